"""Bounded per-rank log storage for the run view.

Why chunks: the run view keeps the last 10,000 lines of every rank (64 ranks: 640,000 lines). As one Python
string per line that is ~160 bytes a line (~100 MB); kept as one joined string per delivered batch it is about
the bytes themselves, and a batch of a busy rank (tens of lines) is compressed (zlib level 1, a few times
smaller; zlib releases the GIL while it works). Lines are unpacked only when a view is rebuilt. Only the view
on screen holds lines one by one (textual's Log, itself bounded). Pure: no textual, no IO; not thread-safe
(the run feed guards it with its lock).
"""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass

MERGED = None  # the view key of the merged view, every source with a [host:rank] prefix
COMPRESS_FROM = 1024  # bytes: smaller chunks stay plain strings (compressing them gains little)


class LineRing:
    """At most ``maxlen`` lines (the oldest go first), stored as newline-joined chunks."""

    def __init__(self, maxlen: int):
        if maxlen < 1:
            raise ValueError("maxlen must be at least 1")
        self.maxlen = maxlen
        self._chunks: deque[tuple[str | bytes, int]] = deque()
        self._skip = 0  # lines of the first chunk that were already dropped
        self._held = 0

    def __len__(self) -> int:
        return self._held

    def extend(self, lines: list[str]) -> None:
        if not lines:
            return
        if len(lines) > self.maxlen:
            lines = lines[-self.maxlen:]
        text = "\n".join(lines)
        if len(text) >= COMPRESS_FROM:
            self._chunks.append((zlib.compress(text.encode("utf-8", "surrogatepass"), 1), len(lines)))
        else:
            self._chunks.append((text, len(lines)))
        self._held += len(lines)
        while self._held > self.maxlen:
            excess = self._held - self.maxlen
            _, n = self._chunks[0]
            if n - self._skip <= excess:
                self._chunks.popleft()
                self._held -= n - self._skip
                self._skip = 0
            else:
                self._skip += excess
                self._held -= excess

    def lines(self) -> list[str]:
        out: list[str] = []
        for i, (chunk, _) in enumerate(self._chunks):
            text = chunk if isinstance(chunk, str) else zlib.decompress(chunk).decode("utf-8", "surrogatepass")
            parts = text.split("\n")
            out.extend(parts[self._skip:] if i == 0 else parts)
        return out


def label(source: tuple) -> str:
    host, rank = source
    return f"[{host}:{rank}]"


@dataclass
class SourceLog:
    ring: LineRing
    lines: int = 0  # every line received, kept or not
    last_time: float | None = None  # time.time() when its last line was read
    dropped: int = 0  # lines the tail engine dropped before they reached us (the file has them)


class LogStore:
    """Every source's last ``max_lines`` lines, and the merged view's last ``max_lines`` (prefixed)."""

    def __init__(self, max_lines: int = 10_000):
        self.max_lines = max_lines
        self.sources: dict[Hashable, SourceLog] = {}
        self.merged = LineRing(max_lines)

    def add(self, source: tuple, texts: list[str], when: float | None) -> list[str]:
        """Keep ``texts``; returns them with the source's prefix (what the merged view shows)."""
        log = self.sources.get(source)
        if log is None:
            log = self.sources[source] = SourceLog(LineRing(self.max_lines))
        log.ring.extend(texts)
        log.lines += len(texts)
        log.last_time = when
        prefix = label(source) + " "
        prefixed = [prefix + t for t in texts]
        self.merged.extend(prefixed)
        return prefixed

    def dropped(self, source: tuple, count: int) -> None:
        log = self.sources.get(source)
        if log is None:
            log = self.sources[source] = SourceLog(LineRing(self.max_lines))
        log.dropped += count

    def view(self, key: tuple | None) -> list[str]:
        if key is MERGED:
            return self.merged.lines()
        log = self.sources.get(key)
        return log.ring.lines() if log else []
