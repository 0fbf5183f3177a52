"""Progress bars on a followed run (`cockpit run`, `attach`, `logs -f`): a rank's line drawn with "\\r" updates
(tqdm, Lightning's bar) is shown by its latest state, once.

- Every line is shown by the frame it ends on (cockpit.logs.filetail.last_frame) after its own `[host:rank]`: the
  terminal never sees the "\\r" that would send the cursor back over the prefix.
- On a terminal, a bar still being drawn (no newline yet) is the last line of the screen: `[host:rank] 45%|####`,
  redrawn in place as it moves and taken away before anything else is written (rank lines, cockpit's notices),
  then drawn again below it. When its line ends, the line is written once, as any other. Several ranks drawing
  bars share the live line, each with an equal part of its width.

Not on a terminal (a pipe, a file) there is no live line: the ended lines alone, each by its last frame.
"""

from __future__ import annotations

import re
import shutil
import unicodedata
from collections.abc import Callable, Hashable
from typing import Any

_ERASE = "\r\x1b[K"  # to the line's start, then clear it
_CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f]")  # escapes and control bytes: not drawn here


class LiveLine:
    """The bars being drawn, as one line below what ``write`` puts out. ``out``: the stream's ``write``;
    ``prefix``: a source's `[host:rank]` (coloured or not); ``columns``: the terminal's width now."""

    def __init__(self, out: Callable[[str], None], prefix: Callable[[Any], str],
                 columns: Callable[[], int] = lambda: shutil.get_terminal_size().columns):
        self.out, self.prefix, self.columns = out, prefix, columns
        self.frames: dict[Hashable, str] = {}  # source -> its bar's frame now, in the order the bars began
        self.drawn = ""  # what the live line shows now ("" : nothing)

    def write(self, text: str, frames: dict[Hashable, str | None] | None = None) -> None:
        """Lines above the live line, and the batch's new ``frames`` (None: that bar's line ended): the live line
        taken away, the lines written and the live line drawn below them, in one write (none where nothing
        changed)."""
        for source, frame in (frames or {}).items():
            if frame is None:
                self.frames.pop(source, None)
            else:
                self.frames[source] = frame
        before = self.drawn
        line = self._line()
        if text or line != before:
            self.out((_ERASE if before else "") + text + line)

    def drawing(self, frames: dict[Hashable, str | None]) -> frozenset:
        """The sources whose bar is still drawn once ``frames`` (a batch's) are taken in."""
        still = {s for s, f in frames.items() if f is not None}
        return frozenset(still | {s for s in self.frames if s not in frames})

    def hide(self) -> None:
        """Take the live line away (before a notice on stderr, onto the same screen); ``show`` draws it again."""
        if self.drawn:
            self.out(_ERASE)
            self.drawn = ""

    def show(self) -> None:
        """Draw the live line again where ``hide`` took it away."""
        if not self.drawn:
            self.write("")

    def _line(self) -> str:
        """The live line for the frames now (and ``drawn`` set to it): each bar after its prefix, cut to its part
        of the width so that the line never wraps (a wrapped line cannot be redrawn in place)."""
        if not self.frames:
            self.drawn = ""
            return ""
        n = len(self.frames)
        share = max(8, (max(self.columns(), 20) - 1 - (n - 1)) // n)  # the last column left free: no wrap
        parts = []
        for source, frame in self.frames.items():
            label = self.prefix(source)
            room = share - _width(_CSI.sub("", label)) - 1
            parts.append(f"{label} {_cut(_CSI.sub('', frame), room)}")
        self.drawn = " ".join(parts)
        return self.drawn


def _width(text: str) -> int:
    """Terminal cells of ``text``: two for East Asian wide characters, none for combining marks."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _cut(text: str, room: int) -> str:
    """``text`` cut to at most ``room`` cells."""
    if _width(text) <= room:
        return text
    out, used = [], 0
    for c in text:
        w = _width(c)
        if used + w > room:
            break
        out.append(c)
        used += w
    return "".join(out)
