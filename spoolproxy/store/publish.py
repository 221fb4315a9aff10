"""Finished cassettes go from a local spool directory into a store, atomically.

``spoolproxy serve`` records each session the way ``record`` does, into a local *spool*
directory that mirrors the store's keys: the cassette of key ``2025-01-31/run-42.yaml``
is journalled (crash safety) and written at ``SPOOL/2025-01-31/run-42.yaml``, its big bodies
under ``SPOOL/2025-01-31/run-42.yaml.bodies/``.  :meth:`Publisher.publish` then uploads the
side bodies and, last, the cassette (each to a temporary key, then moved), and removes the
local copies.  A cassette whose upload fails stays in the spool; :meth:`Publisher.leftovers`
finds it (and turns journals of a crashed gateway into cassettes) at the next start.

One gateway owns a spool at a time (:meth:`Publisher.lock`).
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

from ..cassettes.journal import journal_path, recover
from ..cassettes.model import Cassette
from ..cassettes.storage import load, save, side_dir
from ..errors import SpoolError
from .fs import Store, is_cassette_key

JOURNAL_SUFFIX = ".spooljournal"


def rename_side_refs(cas: Cassette, old_name: str, new_name: str) -> int:
    """Point side-body references ``<old_name>.bodies/F`` of ``cas`` at ``<new_name>.bodies/F``
    (the cassette is published under another name); returns how many were changed."""
    old, new = f"{old_name}.bodies/", f"{new_name}.bodies/"
    changed = 0
    for it in cas.interactions:
        ref = it.response.body_ref if it.response is not None else None
        if ref is not None and ref.file and ref.file.startswith(old):
            ref.file = new + ref.file[len(old):]
            changed += 1
        rb = it.extra.get("request_body")
        if isinstance(rb, dict) and str(rb.get("file") or "").startswith(old):
            rb["file"] = new + str(rb["file"])[len(old):]
            changed += 1
    return changed


class Publisher:
    """Moves finished cassettes from ``spool`` (a local directory) into ``store``.

    Raises SpoolError from :meth:`lock` when another gateway holds the spool, and from
    :meth:`publish` when the upload fails (the local cassette is kept then)."""

    def __init__(self, store: Store, spool: str | os.PathLike) -> None:
        self.store = store
        self.spool = Path(spool)
        self._lock_fd: int | None = None

    # -- ownership -----------------------------------------------------------------------
    def lock(self) -> None:
        """Take the spool for this process (an exclusive ``flock`` on ``SPOOL/.lock``).
        Raises SpoolError when it cannot be created or another gateway holds it."""
        try:
            self.spool.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.spool / ".lock", os.O_WRONLY | os.O_CREAT, 0o600)
        except OSError as exc:
            raise SpoolError(f"cannot use {self.spool} as the spool: {exc.strerror}; give a writable --spool DIR") \
                from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SpoolError(f"another spoolproxy serve uses the spool {self.spool}; give this one another --spool DIR") \
                from None
        self._lock_fd = fd

    def unlock(self) -> None:
        """Release the spool (idempotent)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- naming --------------------------------------------------------------------------
    def local(self, key: str) -> Path:
        """The spool path of ``key``."""
        return self.spool / key

    def free_key(self, key: str) -> str:
        """``key``, or ``<stem>-2<suffix>``, ``-3``... when the spool already holds a cassette
        or a journal under that name (a session id used again while its first cassette is
        still being published)."""
        parent, _, name = key.rpartition("/")
        stem, dot, suffix = name.rpartition(".")
        n, cand = 1, key
        while self.local(cand).exists() or journal_path(self.local(cand)).exists():
            n += 1
            cand = f"{parent + '/' if parent else ''}{stem}-{n}{dot}{suffix}"
        return cand

    def _free_store_key(self, key: str) -> str:
        parent, _, name = key.rpartition("/")
        stem, dot, suffix = name.rpartition(".")
        n, cand = 1, key
        while self.store.exists(cand):
            n += 1
            cand = f"{parent + '/' if parent else ''}{stem}-{n}{dot}{suffix}"
        return cand

    # -- publishing ----------------------------------------------------------------------
    def publish(self, local: str | os.PathLike) -> str:
        """Upload the spooled cassette ``local`` (and its side bodies) to its key in the
        store, under ``<stem>-N`` when the key is taken there already, then remove the local
        copies.  Returns the cassette's URL.  Raises SpoolError (the cassette stays)."""
        path = Path(local)
        key = path.relative_to(self.spool).as_posix()
        final = self._free_store_key(key)
        side = side_dir(path)
        bodies = sorted(f for f in side.iterdir() if f.is_file() and not f.name.startswith(".")) if side.is_dir() else []
        if final != key and bodies:
            cas = load(path)
            if rename_side_refs(cas, path.name, final.rpartition("/")[2]):
                save(cas, path)
        for f in bodies:
            self.store.put_atomic(f, f"{final}.bodies/{f.name}")
        url = self.store.put_atomic(path, final)  # last: its appearance means the whole run is there
        path.unlink(missing_ok=True)
        shutil.rmtree(side, ignore_errors=True)
        self._prune_dirs(path.parent)
        return url

    def _prune_dirs(self, d: Path) -> None:
        """Remove empty day directories left in the spool."""
        while d != self.spool and self.spool in d.parents:
            try:
                d.rmdir()
            except OSError:
                return
            d = d.parent

    def leftovers(self) -> list[Path]:
        """Cassettes in the spool not yet published: journals of a crashed gateway are first
        turned into cassettes (:func:`spoolproxy.cassettes.journal.recover`), then every
        cassette file is listed, oldest key first.  Call with the spool locked."""
        if not self.spool.is_dir():
            return []
        for j in sorted(self.spool.rglob("*" + JOURNAL_SUFFIX)):
            if j.name.startswith("."):
                recover(j.with_name(j.name[1:-len(JOURNAL_SUFFIX)]))
        found = []
        for f in sorted(self.spool.rglob("*")):
            rel = f.relative_to(self.spool).as_posix()
            if f.is_file() and is_cassette_key(rel):
                found.append(f)
        return found
