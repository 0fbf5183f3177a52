"""The block walk for a log whose lines repeat (a crash loop): ``block.feed_gated`` that steps over runs of
lines the parser read before (``memo``), at the points where the parser is clean.

``parser.LineParser.feed_block`` takes it for a block the scanner calls dense, or every block without
hyperscan, while the memo pays (``memo.Memo.use_block``); its events are ``feed_gated``'s. Where more blocks
follow (``block_events``), the lines after the last clean point within ``SEGMENT_MAX_LINES`` of the block's end
are held back and read at the start of the next block (``_hold_back``): a block's edge no longer cuts a kept run
so that its lines are parsed again. Pure, stdlib-only.
"""

from __future__ import annotations

from cockpit.logs.parse.block import Records, _catch_up
from cockpit.logs.parse.event import Event
from cockpit.logs.parse.gate import RESIDUE, SPECIAL, TRIGGER, ZEROS
from cockpit.logs.parse.memo import SEGMENT_MAX_LINES, Memo, Segment
from cockpit.logs.parse.prefix import strip_ansi
from cockpit.logs.parse.wrap import FRESH, WRAP_MIN, unresidue


def feed_repeated(parser: Records, block: bytes, host: str | None, rank: int | None) -> list[Event]:
    """``feed_gated`` where lines repeat: at each clean point, the lines that follow are looked up first among the
    runs read before (``memo``); a line is decoded and its template made only where it is read."""
    out: list[Event] = []
    flags_of, cached = parser._gate.of_template, parser._gate.cache
    lines = block.split(b"\n")
    first = parser._lineno  # line i of the block is line first + i + 1
    skipped = -1  # from this line on, lines were skipped while the parser was clean (-1: none)
    memo, table, trace, where = parser._memo, parser._table, parser._trace, (host, rank)
    start = out_at = -1  # the clean point the run being read started at (-1: none), and len(out) there
    after = parser._after  # the kept segment that ends where the run being read starts, if any
    parser._after = None
    chain: tuple[int, list[tuple[Segment, int]], Segment | None] | None = None  # segments stepped over one after
    # another: (from line, [(segment, base)], the segment before), kept as one where several, next time one step
    sink, sent = parser._sink, 0  # where segments and the events before them go (None: into out), len(out) sent
    looking = True  # False once the memo stops paying in this block
    i, n = 0, len(lines)
    while i < n:
        if looking and skipped < 0 and parser._held is None and table.record is None and trace.prefix is None and \
                not table.root_next:
            if start >= 0:
                after = _keep(parser, lines[start:i], out[out_at:], first + start, where, after)
                start = -1
            if parser._more and n - i < SEGMENT_MAX_LINES and _hold_back(parser, lines, i, after):
                if chain is not None:
                    _join(memo, lines, chain, i, first, where)
                n = i  # the block's last lines: read with the next block's, where a kept run fits whole
                break
            segment = memo.find(lines, i, where, after)
            if segment is not None:
                if chain is not None and i + len(segment.lines) - chain[0] > SEGMENT_MAX_LINES:
                    _join(memo, lines, chain, i, first, where)
                    chain = None
                if chain is None:
                    chain = (i, [], after)
                chain[1].append((segment, first + i))
                if sink is not None:
                    if len(out) > sent:
                        sink.add(out[sent:])
                        sent = len(out)
                    sink.segment(segment, first + i)
                elif segment.events:
                    out += segment.moved(first + i)
                i += len(segment.lines)
                start, after = -1, segment
                continue
            if chain is not None:
                _join(memo, lines, chain, i, first, where)
                chain = None
            if not memo.pays():  # lines that do not come again (an ordinary log): the rest of the block as read
                looking, start, parser._fresh = False, -1, None
                continue
            start, out_at, parser._fresh = i, len(out), []
        template = lines[i].translate(ZEROS)
        flags = cached.get(template)
        if flags is None:
            flags = flags_of(template)
        if not flags:
            if skipped >= 0:
                i += 1
                continue
            if parser._table.record is None and parser._trace.prefix is None and not (
                    parser._held_trigger and parser._held is not None):
                skipped = i
                i += 1
                continue
        text = lines[i].decode("utf-8", "replace")
        if skipped >= 0:
            if flags & (SPECIAL | RESIDUE) or not (not text or FRESH.match(text)):
                _catch_up_lines(parser, lines, skipped, i, first, host, rank)
            else:  # it starts a record whatever is held, and what is held has nothing to report
                parser._held = None
            skipped = -1
        if flags & SPECIAL:
            parser._lineno = first + i
            found = parser._feed(text, host, rank)
        else:  # ``_feed`` with the flags known
            parser._lineno = first + i + 1
            found = parser._physical(strip_ansi(text) if flags & RESIDUE else text, host, rank,
                                   bool(flags & TRIGGER))
        if found:
            out += found
        i += 1
    if skipped >= 0:
        _catch_up_lines(parser, lines, skipped, n, first, host, rank)
    parser._lineno = first + n
    parser._fresh = None
    return out[sent:] if sent else out


REST_MAX = 1 << 20
"""Bytes of a block's last lines held back for the next block, at most."""


def _hold_back(parser: Records, lines: list[bytes], at: int, after: Segment | None) -> bool:
    """Hold ``lines[at:]`` (from a clean point near the block's end) back for the next block, with the kept
    segment that ends at ``at``: a run stepped over again there fits whole, where here it would be cut by the
    block's edge and its lines read one by one. Not past ``REST_MAX`` bytes."""
    if at == 0 or sum(map(len, lines[at:])) > REST_MAX:
        return False
    parser._rest, parser._after = lines[at:], after
    return True


def _join(memo: Memo, lines: list[bytes], chain: tuple[int, list[tuple[Segment, int]], Segment | None], end: int,
          first: int, where: tuple[str | None, int | None]) -> None:
    """Keep the segments stepped over from ``chain`` to ``end`` as one, where they were several."""
    at, steps, before = chain
    if len(steps) > 1:
        memo.keep(lines[at:end], [e for segment, base in steps for e in segment.moved(base)], first + at, where,
                  before)


def _keep(parser: Records, lines: list[bytes], events: list[Event], base: int, where: tuple[str | None, int | None],
          after: Segment | None) -> Segment | None:
    """Keep a run read from a clean point to the next in the memo, with the events a repeat of it gives: not
    the facts it reported first (``LineParser._note_fresh``)."""
    fresh = parser._fresh
    if fresh:
        if None in fresh:
            return None
        left_out = {id(e) for e in fresh}
        events = [e for e in events if id(e) not in left_out]
    return parser._memo.keep(lines, events, base, where, after)


def _catch_up_lines(parser: Records, lines: list[bytes], start: int, end: int, first: int, host: str | None,
                    rank: int | None) -> None:
    """``_catch_up`` over ``lines[start:end]`` (line j numbered ``first + j + 1``), decoding from the end back
    only as far as the line that decides the state."""
    back: list[str] = []
    at = end - 1
    while at >= start:
        text = unresidue(lines[at].decode("utf-8", "replace"))
        back.append(text)
        if len(text) < WRAP_MIN or FRESH.match(text):
            break
        at -= 1
    back.reverse()
    _catch_up(parser, back, 0, len(back), first + end - len(back), host, rank)
