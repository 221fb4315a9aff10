"""Documents with ``bytes`` in them, as JSON: bytes become ``{"$b64": "..."}`` and back.

Used by the recording journal and the parsed-document cache, which both keep cassette
documents (see :mod:`.format`) as JSON Lines (:func:`dumps_line`).
"""

from __future__ import annotations

import base64
import json
from typing import Any

try:  # a dependency of spoolproxy; the fallback keeps a bare checkout working
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None


def to_jsonable(v: Any) -> Any:
    """A copy of ``v`` that ``json.dumps`` accepts; raises TypeError for other types (dates…)."""
    if isinstance(v, bytes):
        return {"$b64": base64.b64encode(v).decode()}
    if isinstance(v, dict):
        return {k: to_jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [to_jsonable(x) for x in v]
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    raise TypeError(f"cannot store a {type(v).__name__} in JSON")


def from_jsonable(v: Any) -> Any:
    """Undo :func:`to_jsonable`."""
    if isinstance(v, dict):
        if len(v) == 1 and "$b64" in v:
            return base64.b64decode(v["$b64"])
        return {k: from_jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [from_jsonable(x) for x in v]
    return v


def _b64(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray)):
        return {"$b64": base64.b64encode(v).decode()}
    raise TypeError(f"cannot store a {type(v).__name__} in JSON")


def dumps_line(obj: Any) -> bytes:
    """``obj`` as one line of UTF-8 JSON (bytes as ``{"$b64": ...}``) ending in a newline.
    orjson writes it when installed (several times faster than :func:`json.dumps` for a
    large body); what orjson refuses (a lone surrogate from a header that was not UTF-8, an
    integer wider than 64 bits) is written by the standard library with ``\\u`` escapes."""
    if _orjson is not None:
        try:
            return _orjson.dumps(obj, default=_b64, option=_orjson.OPT_APPEND_NEWLINE)
        except TypeError:
            pass
    return (json.dumps(to_jsonable(obj)) + "\n").encode("ascii")
