"""Cassettes: the typed model, format v1 on disk, redaction and the crash-safe journal.

Public entry points: :func:`load`, :func:`save`, :func:`iter_paths`, :class:`Cassette`,
:class:`Interaction`, :class:`Request`, :class:`Response`, :class:`Redactor`.
"""

from .model import BodyRef, Cassette, CassetteMeta, Chunk, Failure, Interaction, Request, Response
from .redact import Redactor
from .storage import iter_paths, load, parse_text, read_body, save

__all__ = [
    "BodyRef", "Cassette", "CassetteMeta", "Chunk", "Failure", "Interaction", "Request", "Response",
    "Redactor", "iter_paths", "load", "parse_text", "read_body", "save",
]
