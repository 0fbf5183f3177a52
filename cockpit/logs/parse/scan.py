"""The gate of ``gate`` over a whole block at once, in C: which lines hold a trigger word, and where.

``gate`` answers per line (split, decode, template, a dict lookup): about 4.5x the cost of a bare
``for line in open(f)`` loop before any line is parsed. With hyperscan (the optional extra ``cockpit[fast]``)
one scan of a block's bytes reports where each trigger word ends, so the lines without one are never split,
decoded or looked up: ``LineParser.feed_block`` walks from mark to mark.

The marks are ``gate``'s flags: a template only makes digits ``0``, and no trigger word holds a digit, so
a line holds a word exactly when its template does; ``HEAD`` marks the template's "ends with ``]:``", and
\\r or ESC anywhere is ``SPECIAL``. Every mark lies inside one line: no word holds a \\n, and a ``HEAD`` match's
mark is its line's own newline. ``RESIDUE`` is the
parser's to find on the lines it decodes (see ``Scanner``).

``scanner()`` is None where hyperscan is not installed: then the stdlib gate runs. This module is the only
hyperscan import, deferred to the first block parsed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cockpit.logs.parse.gate import SPECIAL, TRIGGER
from cockpit.logs.parse.rules import trigger_words

MARK_SHIFT = 3
"""A mark is ``end << MARK_SHIFT | flag``: where a match ends (inside its line) and its flag, sorted."""


DENSE = 160
DENSE_SLACK = 32_768
"""A block with a mark every ``DENSE`` bytes or closer (most lines a hit, e.g. an excerpt of errors) is left to
the stdlib gate: decoding and splitting it at once costs less than stepping from mark to mark. An NCCL init
burst is that dense locally (a mark per ~45 bytes over ~7 KB), hence the slack."""


def _literal(word: str) -> bytes:
    return b"".join(c.encode() if c.isalnum() else b"\\x%02x" % ord(c) for c in word)


# Literals, not one alternation run to the end of the line: that reports each line once, but takes five
# times as long to compile (~40 ms, paid by every `cockpit diagnose`), more than the saved callbacks. The
# failure-table head's ``]: ?$`` is no anchored pattern either (with it a database took ~15 ms to compile, without
# it ~3): the literals ``]:\n`` and ``]: \n`` (``HEAD``: their mark is moved back onto the line's own newline),
# and a block's very end tested apart.
PAUSE_DENSE = 4 * DENSE
"""No pause where the block so far has a mark every ``PAUSE_DENSE`` bytes or closer (an error-dense log, where a
pause at every init line cost ~6% and the walk reads no unit)."""
HEAD = 8
INIT = 16
"""The pattern id of ``Init `` (an NCCL init line's word; its mark is a ``TRIGGER``): a paused scan
(``Scanner.paused_marks``) stops right after it."""
_WORDS = (*((_literal(w), INIT if w == "Init " else TRIGGER) for w in trigger_words()),
          (_literal("]:\n"), HEAD), (_literal("]: \n"), HEAD))
# One-byte patterns slow a scan down by half: compiled in only for blocks that hold one (a memchr first).
_SPECIAL = ((rb"\r", SPECIAL), (rb"\x1b", SPECIAL))


class Scanner:
    """The compiled patterns, one database for blocks with \\r or ESC and one for the rest (each compiled on
    first use, ~10 ms); ``marks`` scans with the caller's scratch space (one per parser: two threads never
    share one). ``RESIDUE`` is not marked: its pattern costs a third of a scan (every ``[2024-...`` line is a
    candidate), and the parser looks for it on the lines it decodes."""

    def __init__(self, hyperscan: Any) -> None:
        self._hs = hyperscan
        self._dbs: dict[bool, Any] = {}

    def _db(self, special: bool) -> Any:
        db = self._dbs.get(special)
        if db is None:
            patterns = _WORDS + _SPECIAL if special else _WORDS
            hs = self._hs
            db = hs.Database(mode=hs.HS_MODE_BLOCK)
            db.compile(expressions=[p for p, _ in patterns], ids=[f for _, f in patterns],
                       elements=len(patterns), flags=[hs.HS_FLAG_MULTILINE] * len(patterns))
            self._dbs[special] = db
        return db

    def marks(self, block: bytes, scratch: dict[bool, Any]) -> list[int] | None:
        """Every match in ``block`` as ``end << MARK_SHIFT | flag``, in offset order; None (the scan stops
        there) once the block reads as dense: a mark every ``DENSE`` bytes or closer past the first
        ``DENSE_SLACK``. ``scratch``: a dict the caller keeps (scratch space per database)."""
        out: list[int] = []
        return None if self.paused_marks(block, scratch, 0, out, pause_after=len(block)) is None else out

    def paused_marks(self, block: bytes, scratch: dict[bool, Any], start: int, out: list[int], *,
                     pause_after: int = -1, special: bool | None = None) -> int | None:
        """``marks`` of ``block[start:]`` (at offsets in ``block``) added to ``out``, the marks of the block
        before ``start``, which count toward its density; None once the block reads as dense. Paused: the scan
        stops right after the first ``Init `` that ends past ``pause_after`` (an NCCL init line: the block
        walk may read the lines up to ``Init COMPLETE`` as one, ``comm``, whose ~40 marks would only cost a
        callback each), and returns where to resume: the end of that match; else -1, the block's end. Not in
        a block with \r or ESC: a mark of theirs after ``Init `` on the same line would be missed.
        ``special``: whether the block holds \r or ESC, where the caller knows (a resumed scan's block)."""
        if special is None:
            special = b"\r" in block or b"\x1b" in block
        db = self._db(special)
        space = scratch.get(special)
        if space is None:
            space = scratch[special] = self._hs.Scratch(db)
        add = out.append
        before = len(out)
        stopped = [-1]
        pause_after = len(block) if special else pause_after

        def on_match(flag: int, _start: int, end: int, _flags: int, _context: object) -> bool:
            end += start
            if flag == HEAD:  # the match ends after the line's newline: its mark is that newline
                end, flag = end - 1, TRIGGER
            elif flag == INIT:
                add(end << MARK_SHIFT | TRIGGER)
                if end > pause_after and len(out) * PAUSE_DENSE <= end + DENSE_SLACK:
                    stopped[0] = end
                    return True
                return len(out) * DENSE > end + DENSE_SLACK
            add(end << MARK_SHIFT | flag)
            return len(out) * DENSE > end + DENSE_SLACK  # True stops the scan

        try:
            db.scan(memoryview(block)[start:] if start else block, match_event_handler=on_match, scratch=space)
        except self._hs.ScanTerminated:
            if stopped[0] < 0:
                return None
        if stopped[0] < 0 and block.endswith((b"]:", b"]: ")) and block.rfind(b"\n") + 1 >= start:
            out.append(len(block) << MARK_SHIFT | TRIGGER)  # a head on the block's last line (no newline), unread
        # hyperscan reports by end offset: only a head's mark, moved back a byte, may need placing
        out[before:] = sorted(out[before:])
        return stopped[0]

    def has_word(self, scratch: dict[bool, Any]) -> Callable[[bytes], bool]:
        """``gate.has_word`` in C, for one template at a time (~1.5 us where the stdlib's regex takes ~9):
        the database without \\r and ESC (``gate`` tests those itself), stopped at the first match."""
        db = self._db(False)
        space = scratch.get(False)
        if space is None:
            space = scratch[False] = self._hs.Scratch(db)
        terminated = self._hs.ScanTerminated

        def stop(_flag: int, _start: int, _end: int, _flags: int, _context: object) -> bool:
            return True

        def has_word(template: bytes) -> bool:
            if template.endswith((b"]:", b"]: ")):
                return True
            try:
                db.scan(template, match_event_handler=stop, scratch=space)
            except terminated:
                return True
            return False

        return has_word


_SCANNER: list[Scanner | None] = []


def scanner() -> Scanner | None:
    """The scanner, or None where hyperscan is not installed (the stdlib gate runs then). Imported on first
    use, so that importing the parser stays cheap."""
    if not _SCANNER:
        try:
            import hyperscan  # the optional extra
        except ImportError:
            _SCANNER.append(None)
        else:
            _SCANNER.append(Scanner(hyperscan))
    return _SCANNER[0]
