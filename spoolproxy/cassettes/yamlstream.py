"""Reading a YAML cassette one interaction at a time, so memory stays bounded.

``yaml.load`` of a whole cassette composes the entire node graph (a node with start and end
marks for every scalar) before it builds anything: 35-40 times the file's size in memory
for a 15 MB recording.  The layout PyYAML writes (spoolproxy's format v1, and vcrpy's and
pytest-recording's cassettes) puts every top-level key at column 0 and every interaction at
a column-0 ``- `` line under ``interactions:``; every other line of a value is indented (a
blank line inside a literal block is empty, also indented in meaning).  :func:`segments`
cuts the text there, so each piece is parsed on its own by the C loader and turned into an
:class:`~.model.Interaction` before the next is read.

A layout this reader does not know (an indented ``interactions`` list, a top-level sequence,
several documents, a directive) raises :class:`NotStreamable` before anything was parsed
wrongly; so does an alias whose anchor sits in another piece (found when that piece is
parsed).  The caller then parses the whole document as before.
"""

from __future__ import annotations

from typing import Iterable, Iterator, NamedTuple


class NotStreamable(Exception):
    """The text is not in a layout :func:`segments` splits; parse the whole document."""


class Segment(NamedTuple):
    """One piece of a cassette: ``kind`` ``top`` (a top-level key and its value),
    ``interactions`` (the bare ``interactions:`` line: items follow) or ``item`` (one
    interaction, a one-element YAML sequence); ``line`` is its first line (1-based) and
    ``offset`` its first byte in the text; ``text`` its bytes."""

    kind: str
    line: int
    offset: int
    text: bytes


def segments(lines: Iterable[bytes]) -> Iterator[Segment]:
    """Cut the lines of a YAML cassette (bytes, with their line ends) into
    :class:`Segment` s, in order.  Raises NotStreamable for a layout it does not split."""
    kind: str | None = None
    start_line = start_off = 0
    buf: list[bytes] = []
    in_items = False
    seen_item = False
    ended = False
    offset = 0
    for n, line in enumerate(lines, 1):
        here = offset
        offset += len(line)
        c = line[:1]
        if c in (b" ", b"\t") or not line.strip() or c == b"#":
            if ended and line.strip() and c != b"#":
                raise NotStreamable("text after the end of the document")
            if kind is None:
                if in_items and not seen_item and line.strip() and c != b"#":
                    raise NotStreamable("an indented interactions list")
                if line.strip() and c != b"#":
                    raise NotStreamable("indented text before the first key")
                continue  # blank lines and comments between pieces
            buf.append(line)
            continue
        if ended:
            raise NotStreamable("more than one document")
        if kind is not None:
            yield Segment(kind, start_line, start_off, b"".join(buf))
            kind, buf = None, []
        if line.startswith(b"- ") or line.rstrip(b"\r\n") == b"-":
            if not in_items:
                raise NotStreamable("a sequence at the top level")
            kind, start_line, start_off, buf = "item", n, here, [line]
            seen_item = True
            continue
        stripped = line.rstrip()
        if stripped == b"---" and n == 1:
            continue  # an explicit start of the (only) document
        if stripped == b"...":
            ended = True
            continue
        if c in (b"-", b"%", b"&", b"*", b"!", b"[", b"{", b"?", b"|", b">", b"'", b'"'):
            raise NotStreamable("a top-level line this reader does not split")
        in_items = False
        if stripped == b"interactions:":
            in_items, seen_item = True, False
            yield Segment("interactions", n, here, line)
            continue
        kind, start_line, start_off, buf = "top", n, here, [line]
    if kind is not None:
        yield Segment(kind, start_line, start_off, b"".join(buf))
