"""The errors users see: bad input (exit status 2) and a run that failed (exit status 1), one line each."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def one_line(text: str) -> str:
    """``text`` with every unprintable character (a newline or carriage return inside a key or
    value the user gave, say) written as its escape, so that an error stays one line."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class ConfigError(Exception):
    """Bad input: names the file, the dotted key (when there is one) and what is wrong.

    Args:
        where: the file (or other input) at fault.
        key: dotted key inside it, or "" when the whole input is at fault.
        message: what is wrong, in one line.
    """

    def __init__(self, where: str, key: str, message: str) -> None:
        self.where = str(where)
        self.key = key
        self.message = message
        super().__init__(self.line())

    def line(self) -> str:
        """Return the single line shown to the user."""
        parts = [self.where] + ([self.key] if self.key else []) + [self.message]
        return one_line(": ".join(parts))


class RunFailed(Exception):
    """A run could not finish (e.g. a real trial failed more often than max_failures): one line, exit status 1."""

    events: list[dict[str, Any]] | None = None  # what happened before, where the failing run recorded it


class EventLimitReached(RunFailed):
    """A simulation logged more events than it was allowed (``--max-events``): one line, exit status 1."""


class WriteFailed(Exception):
    """A result file could not be written (disk full, permission denied); the previous file, if any,
    is intact because every write goes through a temp file and a rename."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot write {path} ({reason}); any previous {Path(path).name} is intact")
