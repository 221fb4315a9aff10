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
