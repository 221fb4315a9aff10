"""The recorder's writer thread: completed interactions go to the journal off the event loop.

mitmproxy's event loop only queues an interaction (:meth:`JournalWriter.submit`, one
``SimpleQueue.put``); a single background thread takes everything queued at that moment
and hands it to the write function in one batch (redaction, JSON encoding and one write
system call for the lot), so a burst of completed exchanges costs one thread wake-up and
one write instead of one each.  A ``done`` callback (called on the writer thread once the
batch holding the interaction was written) lets the recorder hold back the end of a chunked
response until its line is in the kernel; work that need not hold it back (the run summary)
goes in ``after``, called once the batch's ``done`` callbacks ran.
"""

from __future__ import annotations

import logging
import threading
from queue import Empty, SimpleQueue
from typing import Any, Callable

logger = logging.getLogger(__name__)

#: interactions handed to the write function at most at once
BATCH_MAX = 64

_STOP = object()

Item = tuple[int, Any]  # (sequence number, interaction)


class JournalWriter:
    """A background thread calling ``write(items)`` with batches of submitted ``(seq,
    interaction)`` items, in submission order, then each item's ``done`` callback, then
    ``after(result)`` with what ``write`` returned.  ``write`` must not raise (a raised error
    is logged and the batch's ``done`` callbacks still run).  Thread-safe."""

    def __init__(self, write: Callable[[list[Item]], Any], name: str = "spoolproxy-journal",
                 after: Callable[[Any], None] | None = None) -> None:
        self._write = write
        self._after = after
        self._name = name
        self._queue: SimpleQueue = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._closed = False

    def submit(self, seq: int, interaction: Any, done: Callable[[], None] | None = None) -> None:
        """Queue one interaction; ``done()`` runs on the writer thread after it was written."""
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                    self._thread.start()
        self._queue.put((seq, interaction, done))

    def close(self) -> None:
        """Write everything queued so far, then stop the thread (idempotent)."""
        with self._start_lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._queue.put(_STOP)
            thread.join()

    def _run(self) -> None:
        stop = False
        while not stop:
            batch = [self._queue.get()]
            while len(batch) < BATCH_MAX:
                try:
                    batch.append(self._queue.get_nowait())
                except Empty:
                    break
            if _STOP in batch:
                stop = True
                batch = [b for b in batch if b is not _STOP]
            if not batch:
                continue
            result = None
            try:
                result = self._write([(seq, it) for seq, it, _ in batch])
            except Exception as exc:  # pragma: no cover - the write function reports its own errors
                logger.error("spoolproxy: journal writer failed: %s", exc)
            for _, _, done in batch:
                if done is not None:
                    try:
                        done()
                    except Exception:  # pragma: no cover - a closed event loop at shutdown
                        pass
            if self._after is not None and result is not None:
                try:
                    self._after(result)
                except Exception as exc:  # pragma: no cover - the after function reports its own errors
                    logger.error("spoolproxy: journal writer failed after a batch: %s", exc)
