"""Fast JSON parsing for bodies and stream events: orjson when installed, else :mod:`json`.

Reading a run (``detect``, ``show``, ``test``) parses every JSON body and every SSE event,
and :func:`json.loads` is most of that time.  :func:`loads` gives exactly what
``json.loads`` gives: orjson (RFC 8259, about twice as fast on these documents) parses
first, and whatever it refuses that the standard library accepts (``NaN``/``Infinity``,
integers wider than 64 bits, UTF-16 text, lone surrogates) is parsed again by
``json.loads``, so the result and the errors are the standard library's.
"""

from __future__ import annotations

import json
from typing import Any

try:  # a dependency of spoolproxy; the fallback keeps a bare checkout working
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson missing
    _orjson = None

_std = json.loads


def loads(data: str | bytes | bytearray | memoryview) -> Any:
    """``data`` (JSON text, ``str`` or UTF-8 bytes) parsed like :func:`json.loads`.

    Raises ValueError (``json.JSONDecodeError`` or ``UnicodeDecodeError``) when it is not JSON."""
    if _orjson is not None:
        try:
            return _orjson.loads(data)
        except _orjson.JSONDecodeError:
            pass  # maybe something only the standard library accepts: it decides
    return _std(data)

