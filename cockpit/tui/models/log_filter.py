"""Which log lines a view shows: a level filter and a search string. Pure; cheap enough for tens of thousands
of lines a second (one precompiled regex per line, only when a filter is on)."""

from __future__ import annotations

import re
from dataclasses import dataclass

LEVELS = ("all", "warn", "error", "nccl")
LEVEL_NAMES = {"all": "all lines", "warn": "warnings + errors", "error": "errors", "nccl": "NCCL WARN + errors"}

_ERROR = re.compile(r"error|exception|traceback|fatal|failed|failure|abort|killed|sigkill|sigsegv|sigabrt|"
                    r"out of memory|timed out|timeout|exitcode|exit code [1-9]", re.IGNORECASE)
_WARN = re.compile(r"\bwarn(ing)?\b", re.IGNORECASE)


def level_of(text: str) -> str:
    """'error', 'warn' or 'info' from the words in a line (a view filter, not the diagnosis)."""
    if _ERROR.search(text):
        return "error"
    if _WARN.search(text):
        return "warn"
    return "info"


@dataclass(frozen=True)
class LineFilter:
    level: str = "all"
    search: str = ""

    @property
    def active(self) -> bool:
        return self.level != "all" or bool(self.search)

    def accepts(self, text: str) -> bool:
        if self.search and self.search.lower() not in text.lower():
            return False
        if self.level == "all":
            return True
        level = level_of(text)
        if self.level == "error":
            return level == "error"
        if self.level == "warn":
            return level != "info"
        return level == "error" or "NCCL WARN" in text

    def next_level(self) -> LineFilter:
        return LineFilter(LEVELS[(LEVELS.index(self.level) + 1) % len(LEVELS)], self.search)

    def describe(self) -> str:
        parts = [LEVEL_NAMES[self.level]]
        if self.search:
            parts.append(f"matching {self.search!r}")
        return ", ".join(parts)
