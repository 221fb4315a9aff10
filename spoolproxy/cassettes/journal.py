"""The append-only recording journal: each completed interaction reaches disk at once.

While recording, ``<dir>/.<cassette name>.spooljournal`` gets one JSON line per completed
interaction (already redacted), written to the kernel at once (so a SIGKILL of the proxy
loses nothing that completed) and fsynced by a background thread that batches the syncs
(at most one every :data:`SYNC_INTERVAL_S`, so a power loss loses at most the last few
tens of milliseconds) without holding up the traffic;
its first line holds the run metadata.
On a clean exit the cassette is written atomically and the journal removed.  After a crash
(SIGKILL, power loss) :func:`recover` turns the journal into the cassette: at most the
interaction that was in flight is lost.  A torn last line is ignored.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from pathlib import Path

from ..errors import CassetteError
from .format import from_document, to_document
from .jsonsafe import dumps_line, from_jsonable
from .model import Cassette, CassetteMeta, Interaction
from .redact import Redactor


#: seconds the background fsync waits for more lines before syncing
SYNC_INTERVAL_S = 0.02


def journal_path(cassette_path: str | Path) -> Path:
    """Where the journal of ``cassette_path`` lives (a hidden file beside it)."""
    p = Path(cassette_path)
    return p.with_name(f".{p.name}.spooljournal")




class Journal:
    """Thread-safe append-only journal, held under an exclusive ``flock`` for the whole
    recording (a second recorder of the same cassette gets CassetteError, and
    :func:`is_locked` tells a live journal from a crashed one).  ``append(seq, interaction)``
    redacts and writes one line (flushed; fsynced in the background); ``seq`` is the request-start sequence number used to order the
    cassette.  Raises CassetteError when the file cannot be created."""

    def __init__(self, cassette_path: str | Path, meta: CassetteMeta, redactor: Redactor) -> None:
        self.path = journal_path(cassette_path)
        self._redactor = redactor
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError as exc:
            raise CassetteError(self.path, f"cannot create the recording journal: {exc.strerror}; "
                                           "choose a writable path for the cassette") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise CassetteError(
                cassette_path, "is being recorded by another spoolproxy process right now; use another --cassette"
            ) from None
        os.ftruncate(fd, 0)  # ours now: an old journal was recovered (or is stale) before this
        self._fh = os.fdopen(fd, "wb", buffering=0)  # each write() is one system call, nothing held back
        self._dirty = threading.Event()
        self._stop = threading.Event()
        self._closing = False
        self._syncer = threading.Thread(target=self._sync_loop, name="spoolproxy-fsync", daemon=True)
        head = to_document(Cassette(meta=meta))["spoolproxy"]
        head.pop("interactions", None)  # the count is known only at the end
        self._write({"meta": head})
        self._syncer.start()

    def _write(self, obj: dict) -> None:
        self._write_lines([dumps_line(obj)])

    def _write_lines(self, lines: list[bytes]) -> None:
        data = b"".join(lines)
        while data:  # in the kernel once written: survives a SIGKILL of this process
            n = self._fh.write(data)
            data = data[n:] if n is not None else data
        self._dirty.set()

    def _sync_loop(self) -> None:
        """Group commit: one fsync for every batch of lines written since the last one, at
        most one per SYNC_INTERVAL_S (a recording at hundreds of requests a second would
        otherwise spend a system call and a disk flush on each)."""
        while True:
            self._dirty.wait()
            if self._closing:
                return
            self._stop.wait(SYNC_INTERVAL_S)  # let more lines join this sync (ends early on close)
            self._dirty.clear()
            if self._closing:
                return
            try:
                os.fsync(self._fh.fileno())  # the file stays open until this thread has ended
            except (OSError, ValueError):
                return

    def append(self, seq: int, it: Interaction) -> None:
        self.append_many([(seq, it)])

    def append_many(self, items: list[tuple[int, Interaction]]) -> None:
        """Redact and write several interactions (``(seq, interaction)``) with one write call."""
        cas = Cassette(interactions=[self._redactor.interaction(it) for _, it in items])
        docs = to_document(cas, json_bodies=False)["interactions"]
        lines = [dumps_line({"seq": seq, "interaction": doc}) for (seq, _), doc in zip(items, docs)]
        with self._lock:
            if not self._fh.closed:
                self._write_lines(lines)

    def close(self, *, remove: bool) -> None:
        """Stop the background fsync, fsync once more (unless the journal is to be removed),
        close the file (releasing the lock) and optionally delete it."""
        self._closing = True
        self._stop.set()
        self._dirty.set()
        if self._syncer.is_alive() and threading.current_thread() is not self._syncer:
            self._syncer.join(timeout=10)
        with self._lock:
            if not self._fh.closed:
                if not remove:
                    os.fsync(self._fh.fileno())
                self._fh.close()
        if remove:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass


def is_locked(path: str | Path) -> bool:
    """True while a live recorder holds the journal at ``path`` (see :class:`Journal`)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also drops our shared lock
    return False


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
    damaged: list[int] = []
    for n, line in enumerate(lines):
        try:
            obj = from_jsonable(json.loads(line))
        except ValueError:
            if n != len(lines) - 1:
                damaged.append(n + 1)  # not the torn in-flight write: say so
            continue
        if "meta" in obj:
            meta = {k: v for k, v in obj["meta"].items() if k != "interactions"}
        elif "interaction" in obj:
            entries.append((int(obj.get("seq", n)), obj["interaction"]))
    # one line per sequence number (a batch retried line by line after a failed write may
    # have left an earlier copy), in request-start order
    entries = sorted(dict(entries).items(), key=lambda e: e[0])
    doc = {"version": 1, "spoolproxy": meta or {"format": 1}, "interactions": [e[1] for e in entries]}
    cas = from_document(doc)
    if damaged:
        cas.meta.extra["damaged_journal_lines"] = damaged
    return cas


def recover(cassette_path: str | Path) -> Cassette | None:
    """If a journal exists for ``cassette_path``, write the cassette from it (atomically),
    remove the journal and return the cassette; else None.  Lines that could not be read
    (other than a torn last line) are listed in ``meta.extra["damaged_journal_lines"]`` and
    the journal is kept as ``<journal>.damaged``.  Raises CassetteError while a live
    recorder still holds the journal."""
    from .storage import save

    jp = journal_path(cassette_path)
    if not jp.exists():
        return None
    if is_locked(jp):
        raise CassetteError(cassette_path, "is being recorded right now (its journal is in use); wait for that run to end")
    cas = read_journal(jp)
    cas.meta.extra["recovered_from_journal"] = True
    save(cas, cassette_path)
    if cas.meta.extra.get("damaged_journal_lines"):
        jp.replace(jp.with_name(jp.name + ".damaged"))  # keep the evidence: never lose recorded data
    else:
        jp.unlink()
    cas.path = Path(cassette_path)
    return cas
