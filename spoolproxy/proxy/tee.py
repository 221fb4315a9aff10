"""A child's stderr copied to ours as it arrives, with its last bytes kept.

``record`` needs the end of a crashed agent's stderr (its traceback) for the cassette, but
the user must still see that stderr live.  :class:`StderrTee` gives the child a stderr of
its own and a thread copies every read at once to this process's stderr (file descriptor
2), keeping the last ``keep`` bytes.  When our stderr is a terminal the child gets a
pseudo-terminal (output post-processing off, our window size), so programs that colour
their logs only on a terminal keep doing so; otherwise a pipe.

Pure plumbing: no redaction here (see :meth:`~.child.ChildEnd.meta`).
"""

from __future__ import annotations

import os
import threading


class StderrTee:
    """Tee for one child's stderr.

    Usage: pass :attr:`child_fd` as ``stderr=`` to ``subprocess.Popen``, call
    :meth:`started` right after the child started (or :meth:`close` if it could not), and
    :meth:`finish` once it exited: it returns the last ``keep`` bytes.  ``out_fd``: where
    the copy goes (default 2).  Never raises on a broken terminal: output that cannot be
    copied is still kept.
    """

    def __init__(self, keep: int, out_fd: int = 2) -> None:
        self.keep = keep
        self.out_fd = out_fd
        self.total = 0  #: bytes the child wrote to stderr
        self._tail = bytearray()
        self._lock = threading.Lock()
        self.read_fd, self.child_fd = self._open(out_fd)
        self._thread = threading.Thread(target=self._pump, name="spoolproxy-stderr", daemon=True)

    @staticmethod
    def _open(out_fd: int) -> tuple[int, int]:
        """(read end, child end): a pseudo-terminal when ``out_fd`` is a terminal, else a pipe."""
        try:
            if os.isatty(out_fd):
                import fcntl
                import termios

                master, slave = os.openpty()
                attrs = termios.tcgetattr(slave)
                attrs[1] &= ~termios.OPOST  # bytes as written: no "\n" -> "\r\n"
                termios.tcsetattr(slave, termios.TCSANOW, attrs)
                try:
                    fcntl.ioctl(slave, termios.TIOCSWINSZ, fcntl.ioctl(out_fd, termios.TIOCGWINSZ, b"\0" * 8))
                except OSError:
                    pass
                return master, slave
        except (OSError, ImportError):
            pass
        return os.pipe()

    def started(self) -> None:
        """The child has its copy of :attr:`child_fd`: close ours and start copying."""
        os.close(self.child_fd)
        self._thread.start()

    def close(self) -> None:
        """The child never started: release both ends."""
        for fd in (self.child_fd, self.read_fd):
            try:
                os.close(fd)
            except OSError:
                pass

    def _pump(self) -> None:
        try:
            while True:
                try:
                    data = os.read(self.read_fd, 65536)
                except OSError:  # EIO: the pseudo-terminal's last writer is gone
                    break
                if not data:
                    break
                self._copy(data)
                with self._lock:
                    self.total += len(data)
                    self._tail += data
                    if len(self._tail) > self.keep:
                        del self._tail[: len(self._tail) - self.keep]
        finally:
            try:
                os.close(self.read_fd)
            except OSError:
                pass

    def _copy(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.out_fd, view)
            except InterruptedError:
                continue
            except OSError:
                return  # our stderr is gone: keep the bytes, drop the copy
            view = view[n:]

    def finish(self, wait_s: float = 1.0) -> bytes:
        """The last ``keep`` bytes of the child's stderr.  Waits up to ``wait_s`` for the
        copy to drain (a grandchild that kept the stream open is not waited for: the copy
        goes on in the background)."""
        self._thread.join(wait_s)
        with self._lock:
            return bytes(self._tail)
