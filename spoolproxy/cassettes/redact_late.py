"""The last redaction pass of a recording: secrets learned late, replaced everywhere, and the run facts.

Each interaction is redacted when it is journalled, with the secrets known at that
moment.  A secret can first be recognised later in the run (a password field in the tenth
request that the third one's URL path already held); :func:`late_pass` replaces every
secret the run's :class:`~.redact.Redactor` remembers in the whole cassette and in its
side body files (``<cassette>.bodies/``), rewriting a side file only when it holds one.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from .model import BodyRef, Cassette, Chunk
from .redact import Redactor


def late_pass(cas: Cassette, cassette_path: Path, red: Redactor) -> Cassette:
    """``cas`` with its run facts redacted (:meth:`Redactor.meta`) and every remembered
    secret replaced, its side files (relative to ``cassette_path``'s directory) rewritten
    where they held one.  Cheap: one substring test per remembered secret and field.
    Raises OSError when a side file cannot be rewritten."""
    cas = cas.model_copy(update={"meta": red.meta(cas.meta)})  # run facts (a captured stderr tail ...)
    if not red.remembered:
        return cas
    its = []
    for it in cas.interactions:
        it = red.known_only(it)
        ref = it.response.body_ref if it.response is not None else None
        if ref is not None and ref.file:
            new = _rewrite(cassette_path.parent / ref.file, red)
            if new is not None:
                chunks = _fit(it.response.chunks, new.size) if it.response.chunks else it.response.chunks
                resp = it.response.model_copy(update={"body_ref": BodyRef(size=new.size, sha256=new.sha256, file=ref.file),
                                                      "chunks": chunks})
                it = it.model_copy(update={"response": resp})
        side = it.extra.get("request_body")
        if isinstance(side, dict) and side.get("file"):
            new = _rewrite(cassette_path.parent / str(side["file"]), red)
            if new is not None:
                it = it.model_copy(update={"extra": {**it.extra, "request_body": {**side, "size": new.size,
                                                                                  "sha256": new.sha256}}})
        its.append(it)
    return cas.model_copy(update={"interactions": its})


def _rewrite(path: Path, red: Redactor) -> BodyRef | None:
    """Replace remembered secrets in one side file (atomically, mode 0600); None when it
    held none or does not exist."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    new = red.replace_known(data)
    if new == data:
        return None
    fd, tmp = tempfile.mkstemp(prefix=".spill-", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(new)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return BodyRef(size=len(new), sha256=hashlib.sha256(new).hexdigest(), file=path.name)


def _fit(chunks: list[Chunk] | None, size: int) -> list[Chunk] | None:
    """Chunk sizes adjusted (last chunks first) to sum to ``size``."""
    if not chunks:
        return chunks
    out, delta = list(chunks), size - sum(c.size for c in chunks)
    while delta and out:
        last = out.pop()
        if last.size + delta > 0:
            out.append(last.model_copy(update={"size": last.size + delta}))
            delta = 0
        else:
            delta += last.size
    return out
