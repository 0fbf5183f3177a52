"""A Python traceback being read: its header opens it, its last line names the exception, of any type.

``ends.is_exception_line`` knows an exception's last line by its name's ending (Error, Exception,
Interrupt), on any line; this knows it by its place: the first line after a "Traceback (most recent call last):"
header, with the header's launcher prefix, that is not indented: the exception where it starts with a dotted
CamelCase name ("my_pkg.errors.ConfigurationProblem: ...", "StopIteration"), else a traceback cut short. Lines of
other processes interleaved in between (another prefix) leave it open; past ``MAX_LINES`` it closes unread.

Pure and stdlib-only; ``parser.LineParser`` owns one, and feeds it every record while it is open.
"""

from __future__ import annotations

import re

HEADER = "Traceback (most recent call last)"
MAX_LINES = 400
"""A traceback is read at most this many lines after its header (a deep recursion's is ~3000: its last line
then goes unnamed unless its type ends like one)."""
_NAME = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*?[a-z]\w*(?=: |:$|$)")
_LAUNCHER = re.compile(r"(?:\[[^\]\n]{1,60}\]:? ?|\d{1,6}: )+")


class Traceback:
    """The open traceback: the header's prefix (None: none open) and the line it was on."""

    __slots__ = ("prefix", "since")

    def __init__(self) -> None:
        self.prefix: str | None = None
        self.since = 0

    def read(self, lineno: int, text: str) -> bool:
        """Open on a header; True when ``text`` is the open traceback's last line (then it closes)."""
        at = text.find(HEADER)
        if at >= 0:
            self.prefix, self.since = text[:at], lineno
            return False
        prefix = self.prefix
        if prefix is None:
            return False
        if lineno - self.since > MAX_LINES:
            self.prefix = None
            return False
        if text.startswith(prefix):
            rest = text[len(prefix):]
        elif not _LAUNCHER.fullmatch(prefix) and not _LAUNCHER.match(text):
            rest = text  # a logger's prefix (a timestamp) on the header line only: the traceback follows bare
        else:
            return False
        if not rest or rest[0] in " \t":
            return False  # a frame, its code, a caret line (or a blank line) of this traceback
        self.prefix = None  # its first unindented line ends it: the exception, or a traceback cut short
        return _NAME.match(rest) is not None
