"""The append-only recording journal: each completed interaction reaches disk at once.

While recording, ``<dir>/.<cassette name>.spooljournal`` gets one JSON line per completed
interaction (already redacted), written to the kernel at once (so a SIGKILL of the proxy
loses nothing that completed) and fsynced by a background thread that batches the syncs
(so a power loss loses at most the last few milliseconds) without holding up the traffic;
its first line holds the run metadata.
On a clean exit the cassette is written atomically and the journal removed.  After a crash
(SIGKILL, power loss) :func:`recover` turns the journal into the cassette: at most the
interaction that was in flight is lost.  A torn last line is ignored.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from ..errors import CassetteError
from .format import from_document, to_document
from .jsonsafe import from_jsonable, to_jsonable
from .model import Cassette, CassetteMeta, Interaction
from .redact import Redactor


def journal_path(cassette_path: str | Path) -> Path:
    """Where the journal of ``cassette_path`` lives (a hidden file beside it)."""
    p = Path(cassette_path)
    return p.with_name(f".{p.name}.spooljournal")




class Journal:
    """Thread-safe append-only journal.  ``append(seq, interaction)`` redacts and writes one
    line (flushed; fsynced in the background); ``seq`` is the request-start sequence number used to order the
    cassette.  Raises CassetteError when the file cannot be created."""

    def __init__(self, cassette_path: str | Path, meta: CassetteMeta, redactor: Redactor) -> None:
        self.path = journal_path(cassette_path)
        self._redactor = redactor
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        except OSError as exc:
            raise CassetteError(self.path, f"cannot create the recording journal: {exc.strerror}") from None
        self._fh = os.fdopen(fd, "w", encoding="utf-8")
        self._dirty = threading.Event()
        self._syncer = threading.Thread(target=self._sync_loop, name="spoolproxy-fsync", daemon=True)
        head = to_document(Cassette(meta=meta))["spoolproxy"]
        self._write({"meta": head})
        self._syncer.start()

    def _write(self, obj: dict) -> None:
        self._fh.write(json.dumps(to_jsonable(obj), ensure_ascii=False) + "\n")
        self._fh.flush()  # in the kernel now: survives a SIGKILL of this process
        self._dirty.set()

    def _sync_loop(self) -> None:
        """Group commit: one fsync for every batch of lines written since the last one."""
        while True:
            self._dirty.wait()
            self._dirty.clear()
            with self._lock:
                if self._fh.closed:
                    return
                fd = self._fh.fileno()
            try:
                os.fsync(fd)
            except OSError:
                return

    def append(self, seq: int, it: Interaction) -> None:
        cas = Cassette(interactions=[self._redactor.interaction(it)])
        doc = to_document(cas, json_bodies=False)["interactions"][0]
        with self._lock:
            if not self._fh.closed:
                self._write({"seq": seq, "interaction": doc})

    def close(self, *, remove: bool) -> None:
        with self._lock:
            if not self._fh.closed:
                if not remove:
                    os.fsync(self._fh.fileno())
                self._fh.close()
        self._dirty.set()  # wake the syncer so it sees the closed file and exits
        if remove:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass


def read_journal(path: str | Path) -> Cassette:
    """Rebuild a cassette from a journal file, in request-start order.

    Raises CassetteError when the file is missing or its first line is unreadable.
    """
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise CassetteError(p, f"cannot read journal: {exc.strerror}") from None
    meta: dict = {}
    entries: list[tuple[int, dict]] = []
    for n, line in enumerate(lines):
        try:
            obj = from_jsonable(json.loads(line))
        except ValueError:
            continue  # torn write of the in-flight interaction
        if "meta" in obj:
            meta = obj["meta"]
        elif "interaction" in obj:
            entries.append((int(obj.get("seq", n)), obj["interaction"]))
    entries.sort(key=lambda e: e[0])
    doc = {"version": 1, "spoolproxy": meta or {"format": 1}, "interactions": [e[1] for e in entries]}
    return from_document(doc)


def recover(cassette_path: str | Path) -> Cassette | None:
    """If a journal exists for ``cassette_path``, write the cassette from it (atomically),
    remove the journal and return the cassette; else None."""
    from .storage import save

    jp = journal_path(cassette_path)
    if not jp.exists():
        return None
    cas = read_journal(jp)
    cas.meta.extra["recovered_from_journal"] = True
    save(cas, cassette_path)
    jp.unlink()
    cas.path = Path(cassette_path)
    return cas
