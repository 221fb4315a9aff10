"""``python -m spoolproxy.checks.pyfunc module:function``: run a Python check on the run
document read from stdin (what :mod:`.runner` does for ``function = "module:function"``).

The function gets the :class:`~spoolproxy.detectors.models.Transcript` (and, when it takes
two positional parameters, the whole run document as a dict: ``meta`` with the run's tags,
``report`` with the detectors' findings).  It passes by returning None or True; it fails by
returning False, a non-empty message, or a ``{"reason", "interactions"}`` dict, or by
raising AssertionError.  Exit status: 0 pass, 1 fail (reason on stdout), 2 the function
could not be imported, 3 it raised another exception (traceback on stderr).
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
import traceback


def _load(spec: str):
    module_name, _, attr = spec.partition(":")
    module = importlib.import_module(module_name)
    fn = getattr(module, attr)
    if not callable(fn):
        raise TypeError(f"{spec} is not callable")
    return fn


def _positional(fn) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params):
        return 2
    return sum(1 for p in params if p.kind in kinds)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m spoolproxy.checks.pyfunc module:function < run.json", file=sys.stderr)
        return 2
    try:
        fn = _load(argv[0])
    except Exception as exc:  # noqa: BLE001 - reported as "could not import"
        print(f"{argv[0]}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    from ..detectors.models import Transcript

    doc = json.loads(sys.stdin.buffer.read() or b"{}")
    transcript = Transcript.model_validate(doc.get("transcript") or {})
    try:
        verdict = fn(transcript, doc) if _positional(fn) >= 2 else fn(transcript)
    except AssertionError as exc:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        print(str(exc) or f"assertion failed at {frame.filename}:{frame.lineno}: {frame.line}")
        return 1
    except Exception:  # noqa: BLE001 - the check broke: "raised", never a pass
        traceback.print_exc()
        return 3
    if verdict is None or verdict is True or verdict == "":
        return 0
    if verdict is False:
        print(f"{argv[0]} returned False")
    elif isinstance(verdict, dict):
        print(json.dumps(verdict))
    else:
        print(str(verdict))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
