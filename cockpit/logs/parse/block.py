"""``LineParser.feed_block``'s walk over a block of bytes: the lines without a trigger word are skipped, not
parsed, while nothing is open that they could add to (most of a rank log).

Two walks, the same events (and a third where lines repeat: ``repeat``): ``feed_gated`` looks every line's
template up in the stdlib gate (``gate``); ``feed_marked`` goes from marked line to marked line where
hyperscan marked the block (``scan``), decoding the lines between only where it must, and stepping over a
run of NCCL channel lines that can only repeat reported facts (``runs``) in one regex match. Before the next
line that matters, the skipped lines that still shape the held record (a hard wrap) are replayed
(``_catch_up``), each at most once.

Functions over the parser (``parser.LineParser``, which calls them from ``feed_block``), not methods: the
walk is half of the parser's code and none of its state. Pure and stdlib-only. No IO.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from typing import Protocol

from cockpit.logs.parse.comm import Last, Made, Template, replay
from cockpit.logs.parse.event import Event
from cockpit.logs.parse.gate import RESIDUE, SPECIAL, TRIGGER, Gate, block_templates
from cockpit.logs.parse.kinds import Hit
from cockpit.logs.parse.linecount import newlines
from cockpit.logs.parse.memo import Memo, Segment, Sink
from cockpit.logs.parse.prefix import strip_ansi
from cockpit.logs.parse.runs import channel_run
from cockpit.logs.parse.scan import MARK_SHIFT
from cockpit.logs.parse.table import FailureTable
from cockpit.logs.parse.trace import Traceback
from cockpit.logs.parse.wrap import FRESH, WRAP_MIN, unresidue


class Records(Protocol):
    """What the walk reads and writes of ``parser.LineParser`` (it cannot name that class: ``parse`` imports
    this module): the line count, the held record, the open table record, the gate, and its per-line steps."""

    _lineno: int
    _held: str | None
    _held_trigger: bool
    _table: FailureTable
    _trace: Traceback
    _gate: Gate
    _memo: Memo
    _fresh: list[Event | None] | None
    _sink: Sink | None
    _seen: set[tuple[object, ...]]
    _held_more: list[str] | None
    _more: bool
    _rest: list[bytes] | None
    _after: Segment | None

    def _feed(self, line: str, host: str | None, rank: int | None) -> list[Event]: ...

    def _physical(self, text: str, host: str | None, rank: int | None, trigger: bool) -> list[Event]: ...

    def _reshape(self, text: str, host: str | None, rank: int | None) -> list[Event]: ...

    def _hold(self, text: str, host: str | None, rank: int | None, trigger: bool) -> None: ...

    def _dense_rest(self, block: bytes, host: str | None, rank: int | None) -> list[Event]: ...

    _comms: dict[tuple[bytes, bytes], Template | None]
    _comm_last: dict[bytes, Last]

    _classified: dict[str | tuple[str, ...], list[Hit]]

    def flush(self) -> list[Event]: ...

    def _emit(self, lineno: int, text: str, host: str | None, rank: int | None, hits: list[Hit],
              channel: tuple[str, str] | None, same: tuple[str, ...] | None = None) -> list[Event]: ...

    def _made_of(self, text: str, same: tuple[str, ...], hits: list[Hit], host: str | None,
                 rank: int | None) -> list[Made] | None: ...


Resume = Callable[[int, list[int], int], "int | None"]
"""``feed_marked``'s ``more``: (from offset, marks to add to, no pause up to) -> where the scan paused, -1, or
None."""


def feed_gated(parser: Records, block: bytes, host: str | None, rank: int | None) -> list[Event]:
    """``feed_block`` with the stdlib gate: every line's template looked up."""
    out: list[Event] = []
    flags_of, cached = parser._gate.of_template, parser._gate.cache
    lines = block.decode("utf-8", "replace").split("\n")
    templates = block_templates(block)
    if len(lines) != len(templates):
        raise AssertionError("a block's lines and templates differ in number")  # decoding keeps every \n
    first = parser._lineno  # line i of the block is line first + i + 1
    skipped = -1  # from this line on, lines were skipped while the parser was clean (-1: none)
    for i, template in enumerate(templates):
        flags = cached.get(template)
        if flags is None:
            flags = flags_of(template)
        if not flags:
            if skipped >= 0:
                continue
            if parser._table.record is None and parser._trace.prefix is None and not (
                    parser._held_trigger and parser._held is not None):
                skipped = i
                continue
        elif skipped >= 0:
            text = lines[i]
            if flags & (SPECIAL | RESIDUE) or not (not text or FRESH.match(text)):
                _catch_up(parser, lines, skipped, i, first, host, rank)
            else:  # it starts a record whatever is held, and what is held has nothing to report
                parser._held = None
            skipped = -1
        text = lines[i]
        if flags & SPECIAL:
            parser._lineno = first + i
            found = parser._feed(text, host, rank)
        else:  # ``_feed`` with the flags known
            parser._lineno = first + i + 1
            found = parser._physical(strip_ansi(text) if flags & RESIDUE else text, host, rank,
                                   bool(flags & TRIGGER))
        if found:
            out += found
    if skipped >= 0:
        _catch_up(parser, lines, skipped, len(lines), first, host, rank)
    parser._lineno = first + len(lines)
    return out

def feed_marked(parser: Records, block: bytes, marks: list[int], host: str | None, rank: int | None,
                resume: int = -1, more: Resume | None = None) -> list[Event]:
    """``feed_block`` where a scanner marked the lines with flags (``scan``): the same walk, from
    marked line to marked line. The lines between are decoded only while the parser is not clean (a table
    record, or a held record with a trigger word, is open) and as far back as ``_catch_up`` needs.

    ``resume`` >= 0: the scan paused there, after an NCCL init line's mark (``scan.Scanner.paused_marks``);
    once that line is handled (and the lines up to ``Init COMPLETE`` read as one, ``comm``), ``more(pos,
    marks, after)`` adds the marks from ``pos`` on, pausing at an init line that ends past ``after``, and says
    where it paused (-1: the end), or None where the block reads as dense: then the rest of it takes the
    parser's dense walk (``_dense_rest``)."""
    out: list[Event] = []
    first = parser._lineno
    size = len(block)
    pos = index = 0  # offset and block index of the first line not handled yet
    k, n_marks = 0, len(marks)
    table = parser._table
    after = -1  # where the scan resumes: no pause on the line there (an Init COMPLETE after a unit)
    while True:
        if k == n_marks and resume >= 0 and more is not None:
            resume = more(max(pos, resume), marks, after)  # type: ignore[assignment]
            if resume is None:
                parser._lineno = first + index
                if out and parser._sink is not None:  # before the segments the dense walk may hand it
                    parser._sink.add(out)
                    out = []
                found = parser._dense_rest(block[pos:], host, rank)
                if found:
                    out += found
                return out
            n_marks, after = len(marks), -1
        if k < n_marks:  # the next marked line: from before its first mark to its end, flags of all its marks
            at = marks[k] >> MARK_SHIFT
            start = block.rfind(b"\n", pos, at) + 1 or pos
            end = block.find(b"\n", at)
            if end < 0:
                end = size
            flags = 0
            while k < n_marks and marks[k] >> MARK_SHIFT <= end:
                flags |= marks[k]
                k += 1
            flags &= 7
        else:  # past the last mark: the rest of the block is one gap, up to a line after its end
            start = end = size + 1
            flags = 0
        trace = parser._trace
        while pos < start and (table.record is not None or trace.prefix is not None
                               or (parser._held_trigger and parser._held is not None)):
            cut = block.find(b"\n", pos, start)
            if cut < 0:
                cut = size
            index += 1
            parser._lineno = first + index
            found = parser._physical(unresidue(block[pos:cut].decode("utf-8", "replace")), host, rank, False)
            if found:
                out += found
            pos = cut + 1
        if not flags:
            if pos <= size:
                gap = newlines(block, pos) + 1
                _catch_up_bytes(parser, block, pos, size + 1, first + index, gap, host, rank)
                index += gap
            break
        text = block[start:end].decode("utf-8", "replace")
        special = flags & SPECIAL
        if not special:
            text = unresidue(text)
        if pos < start:
            gap = newlines(block, pos, start)
            if special or not (not text or FRESH.match(text)):
                _catch_up_bytes(parser, block, pos, start, first + index, gap, host, rank)
            else:  # it starts a record whatever is held, and what is held has nothing to report
                parser._held = None
            index += gap
        index += 1
        if special:
            parser._lineno = first + index - 1
            found = parser._feed(text, host, rank)
        else:
            parser._lineno = first + index
            found = parser._physical(text, host, rank, bool(flags & TRIGGER))
        if found:
            out += found
        pos = end + 1
        if not special and "Init START" in text and (
                unit := replay(parser, block, pos, text, first + index, host, rank, parser._gate.of_text)) is not None:
            found, pos, lines, complete = unit  # the lines up to Init COMPLETE, read as one (``comm``)
            if found:
                out += found
            index += lines
            k = bisect_right(marks, (pos - 1) << MARK_SHIFT | 7, k)
            after = -1 if complete else block.find(b"\n", pos)
            continue
        if not special and " via " in text and (run := channel_run(parser, block, pos, text)) is not None:
            pos, lines, last = run  # lines that give nothing: hold the last, as feeding them all would
            index += lines
            parser._lineno = first + index
            if len(last) >= WRAP_MIN:
                parser._hold(last, host, rank, True)
            else:
                parser._held = None
            k = bisect_right(marks, (pos - 1) << MARK_SHIFT | 7, k)
    parser._lineno = first + index
    return out

def _catch_up_bytes(parser: Records, block: bytes, start: int, stop: int, first: int, count: int, host: str | None,
                    rank: int | None) -> None:
    """``_catch_up`` over the ``count`` lines of ``block[start:stop - 1]`` (``first``: the line number
    before them), decoding from the end back only as far as the line that decides the state."""
    back: list[str] = []
    cut = stop - 1
    while cut >= start:
        begin = block.rfind(b"\n", start, cut) + 1 or start
        text = unresidue(block[begin:cut].decode("utf-8", "replace"))
        back.append(text)
        if len(text) < WRAP_MIN or FRESH.match(text):
            break
        cut = begin - 1
    back.reverse()
    _catch_up(parser, back, 0, len(back), first + count - len(back), host, rank)

def _catch_up(parser: Records, lines: list[str], start: int, end: int, first: int, host: str | None,
              rank: int | None) -> None:
    """Bring the held record up to date over ``lines[start:end]``, skipped lines without a trigger word
    fed while the parser was clean: no event can come of them. Only the lines after the last one that
    decides the state alone are replayed: a short line (after it nothing is held) or an empty or fresh
    one (it starts a record whatever was held). So every line is looked at once at most."""
    at = end - 1
    while at >= start:
        text = lines[at] = unresidue(lines[at])
        if len(text) < WRAP_MIN:
            parser._held = None
            at += 1
            break
        if FRESH.match(text):
            break
        at -= 1
    for j in range(max(at, start), end):
        parser._lineno = first + j + 1
        parser._reshape(lines[j], host, rank)
    parser._lineno = first + end
