"""Bounded per-rank log storage for the run view.

Why chunks: the run view keeps the last 10,000 lines of every rank (64 ranks: 640,000 lines; past
TOTAL_LINES in all, fewer of each). As one Python
string per line that is ~160 bytes a line (~100 MB); kept as one joined string per delivered batch it is about
the bytes themselves, and a rank's newest batches, once they add up to COMPRESS_FROM bytes, are joined and
compressed as one chunk (zlib level 1, a few times smaller; zlib releases the GIL while it works; one call per
32 KB rather than one per batch). The merged ring is not compressed: it holds max_lines lines in all (about a
megabyte), and under a storm its lines are gone a fraction of a second after they came, so compressing them
would only cost CPU. Lines are unpacked only when a view is rebuilt. Only the view on screen holds lines one
by one (textual's Log, itself bounded). Pure: no textual, no IO; not thread-safe (the run feed guards it with
its lock).
"""

from __future__ import annotations

import zlib
from collections import deque
from dataclasses import dataclass

MERGED = None  # the view key of the merged view, every source with a [host:rank] prefix
COMPRESS_FROM = 32 * 1024  # bytes of the newest plain chunks that are joined and compressed as one
# lines kept across all sources: 64 ranks keep max_lines each (640,000), 4,096 ranks 244 each (their views
# show those; the files have every line), where 10,000 each let the feed process grow past 400 MB
TOTAL_LINES = 1_000_000


class LineRing:
    """At most ``maxlen`` lines (the oldest go first), stored as newline-joined chunks."""

    def __init__(self, maxlen: int, compress: bool = True):
        if maxlen < 1:
            raise ValueError("maxlen must be at least 1")
        self.maxlen = maxlen
        self.compress = compress
        self._chunks: deque[tuple[str | bytes, int]] = deque()
        self._skip = 0  # lines of the first chunk that were already dropped
        self._held = 0
        self._plain = 0  # how many chunks at the end are plain strings (not compressed yet)
        self._plain_bytes = 0  # their length

    def __len__(self) -> int:
        return self._held

    def extend(self, lines: list[str]) -> None:
        if not lines:
            return
        if len(lines) > self.maxlen:
            lines = lines[-self.maxlen:]
        text = "\n".join(lines)
        self._chunks.append((text, len(lines)))
        self._held += len(lines)
        self._plain += 1
        self._plain_bytes += len(text)
        while self._held > self.maxlen:
            excess = self._held - self.maxlen
            chunk, n = self._chunks[0]
            if n - self._skip <= excess:
                self._chunks.popleft()
                self._held -= n - self._skip
                self._skip = 0
                if isinstance(chunk, str):
                    self._plain -= 1
                    self._plain_bytes -= len(chunk)
            else:
                self._skip += excess
                self._held -= excess
        if self.compress and self._plain_bytes >= COMPRESS_FROM:
            self._pack()

    def _pack(self) -> None:
        """Join the plain chunks at the end into one compressed chunk (its first line stays the first line of
        the first of them, so ``_skip`` still holds if that was chunk 0)."""
        parts: list[str] = []
        n = 0
        for _ in range(self._plain):
            text, count = self._chunks.pop()
            assert isinstance(text, str)  # the last _plain chunks are the ones not compressed yet
            parts.append(text)
            n += count
        parts.reverse()
        data = zlib.compress("\n".join(parts).encode("utf-8", "surrogatepass"), 1)
        self._chunks.append((data, n))
        self._plain = self._plain_bytes = 0

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
    """Every source's last lines (``max_lines``, fewer once ``total_lines`` shared by all sources is less: see
    ``keep``), and the merged view's last ``max_lines`` (prefixed)."""

    def __init__(self, max_lines: int = 10_000, total_lines: int = TOTAL_LINES):
        self.max_lines, self.total_lines = max_lines, total_lines
        self.sources: dict[tuple, SourceLog] = {}
        self.merged = LineRing(max_lines, compress=False)
        self.keep = max_lines  # lines kept of each source now; a ring is cut to it when it next takes lines

    def expect(self, sources) -> None:
        """Make room for ``sources`` before their lines come (a catch-up of 4,096 ranks in one batch: every
        ring then keeps the same share, not the first ones a larger one)."""
        for source in sources:
            self._log(source)

    def _log(self, source: tuple) -> SourceLog:
        log = self.sources.get(source)
        if log is None:
            log = self.sources[source] = SourceLog(LineRing(self.keep))
            self.keep = max(1, min(self.max_lines, self.total_lines // len(self.sources)))
        return log

    def add(self, source: tuple, texts: list[str], when: float | None, merge: bool = True) -> list[str]:
        """Keep ``texts``; returns them with the source's prefix (what the merged view shows), which go into the
        merged view too unless ``merge`` is False (the caller puts them there in an order of its own)."""
        log = self._log(source)
        log.ring.maxlen = self.keep
        log.ring.extend(texts)
        log.lines += len(texts)
        log.last_time = when
        prefix = label(source) + " "
        prefixed = [prefix + t for t in texts]
        if merge:
            self.merged.extend(prefixed)
        return prefixed

    def dropped(self, source: tuple, count: int) -> None:
        self._log(source).dropped += count

    def view(self, key: tuple | None) -> list[str]:
        if key is MERGED:
            return self.merged.lines()
        log = self.sources.get(key) if key is not None else None
        return log.ring.lines() if log else []
