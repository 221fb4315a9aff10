"""Documents with ``bytes`` in them, as JSON: bytes become ``{"$b64": "..."}`` and back.

Used by the recording journal and the parsed-document cache, which both keep cassette
documents (see :mod:`.format`) as JSON.
"""

from __future__ import annotations

import base64
from typing import Any


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
