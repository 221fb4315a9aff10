"""Errors that the CLI turns into one clear line on stderr and a non-zero exit code.

Every module raises :class:`SpoolError` (or a subclass) for conditions a user can fix:
a corrupt cassette, a port in use, a bad option.  The message says what is wrong and
what to do next; ``exit_code`` is the process status the CLI exits with.
"""

from __future__ import annotations


class SpoolError(Exception):
    """A user-facing failure: ``str(err)`` is one line, ``err.exit_code`` the exit status (default 2)."""

    exit_code: int = 2

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class CassetteError(SpoolError):
    """A cassette file cannot be read or written: names the file and, where known, the line."""

    def __init__(self, path: object, problem: str, *, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else f"{path}"
        self.path = path
        self.line = line
        self.problem = problem
        super().__init__(f"{where}: {problem}")


class UsageError(SpoolError):
    """A bad option value or combination (exit status 2)."""


class OutputError(SpoolError):
    """An output file or directory cannot be written (exit status 2).

    ``str(err)`` is ``cannot write PATH (reason); choose a writable path``; ``path`` is the
    file or directory, ``reason`` what the system said (``No such file or directory``...).
    """

    def __init__(self, path: object, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cannot write {path} ({reason}); choose a writable path")

    @classmethod
    def from_os(cls, path: object, exc: OSError) -> "OutputError":
        """The error for ``exc`` raised while writing ``path`` (a missing parent that cannot be
        made, a read-only or special file system such as ``/proc``, a file in the way)."""
        import errno
        from pathlib import Path

        reason = exc.strerror or str(exc)
        p = Path(str(path))
        existing = next((a for a in p.parents if a.exists()), None)
        if existing is not None and not existing.is_dir():
            reason = f"{existing} is not a directory"
        elif exc.errno == errno.ENOENT and existing is not None:
            reason = f"{existing} does not accept new files"
        return cls(path, reason)
