"""The lines of an NCCL communicator's init between ``Init START`` and ``Init COMPLETE``, read as one unit.

Each communicator NCCL makes prints, on each rank, a block of ~50 lines behind its own prefix
(``host:pid:tid [dev] NCCL INFO ``): ``Init START``, affinity, trees, a line per channel and peer, ``Connected
all rings``, thresholds, ``Init COMPLETE``. A job that makes a communicator per process group and per
checkpoint prints hundreds of them per rank, and on such ordinary rank logs they were most of what the parser
did: every marked line of a block took a Python step (``block.feed_marked``), a few of them a regex or ten.

Between ``Init START`` and the next ``Init COMPLETE``, where every line starts with the same prefix, the lines
are records of their own (one prefix: no line continues another, ``LineParser._joins``), and what each gives
depends only on its text and on which facts were already reported (``LineParser._seen``). Of a rank's blocks
most differ from the one before only in NCCL's thread id (``tid``) inside that prefix. So a ``Template``
(the block's lines with their prefix cut off, keyed with the prefix less its tid) keeps each line's rule hits
before the facts already reported are left out (``rules.classify``'s answer): a block seen before gives its
events by running only that last step again (``LineParser._emit``) on the lines that have hits, with their own
text and line numbers: one ``find``, two ``count``s, one ``replace`` and one dict lookup in C for the block.
The ``Init START`` and ``Init COMPLETE`` lines themselves (their comm and commId differ per block) are keyed
without those (``same_key``). Where the line after ``Init COMPLETE`` cannot continue it (empty, or starting a
record), the whole unit, ``Init COMPLETE`` included, gives its events in one step from a ``Plan`` of the
process's last unit: what each line with hits made, copied with the line's own number and text (``_again``);
else ``Init COMPLETE`` is held, as the walk would hold it, for the next line to show whether it was wrapped.

What this relies on: a line's hits do not change with the tid (decimal digits between two ``:`` and the
`` [dev]``): no trigger word holds a digit, origin reads the host, pid and device but not the tid, and no
rule reads a number there (``tests/logs/test_comm_blocks.py`` checks blocks of the corpus and generated ones
against the line-by-line parser). Not taken where the block could be read otherwise: an open table record or
traceback, a held line that is not the ``Init START`` line, a line with ``\\r`` or ESC, ``exitcode``, a
table head's ``]:``, ``Traceback (``, a failure (all kept for the usual way), or a last line with hits.

Pure and stdlib-only. No IO.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Protocol

from cockpit.logs.parse.event import FAILURE_SET, Event
from cockpit.logs.parse.gate import TRIGGER
from cockpit.logs.parse.kinds import Hit
from cockpit.logs.parse.linecount import newlines
from cockpit.logs.parse.rules import classify
from cockpit.logs.parse.runs import channel_key
from cockpit.logs.parse.table import FailureTable
from cockpit.logs.parse.trace import Traceback
from cockpit.logs.parse.wrap import FRESH, WRAP_MIN, unresidue

MAX_LINES = 256
"""Lines between ``Init START`` and ``Init COMPLETE`` read as one unit at most (NCCL prints 40-200)."""
TEMPLATES = 64
"""Templates kept per parser; past it they are dropped and made again (bounded memory)."""

_PREFIX = re.compile(r"([\w.\-]+:\d+:)(\d+)( \[\d+\] NCCL INFO )")
_COMPLETE = b"Init COMPLETE"


class Template:
    """A block's lines without their prefix: the ones with hits, (index, offset in the cut lines, hits,
    whether `` via `` is in it, its ``same_key``), how many lines, and whether the last holds a trigger word."""

    __slots__ = ("hit_lines", "last_trigger", "lines")

    def __init__(self, hit_lines: list[tuple[int, int, list[Hit], bool, tuple[str, ...] | None]], lines: int,
                 last_trigger: bool):
        self.hit_lines = hit_lines
        self.lines = lines
        self.last_trigger = last_trigger


Made = tuple[str, tuple[object, ...], dict[str, object]]
"""An event ``LineParser._made_of`` made but for its line number and text: its kind, the values of its fields
(the fact's key less the line's prefix), all its fields."""


class Plan:
    """What a unit gives, from its Init START line to its Init COMPLETE line, but for the lines' numbers and
    texts and the facts already reported: per line with hits, what ``LineParser._made_of`` made of them. Made
    from one unit by the parser's own steps (``_plan``), it gives the next unit of the same process whose lines
    have the same keys (``comm.same_key``: the tid, and on the Init lines the address and commId, left out) in
    one step (``_again``)."""

    __slots__ = ("body", "complete", "derived", "start", "start_key", "complete_key", "template", "where")

    def __init__(self, template: Template, where: tuple[str | None, int | None], start_key: tuple[str, ...],
                 complete_key: tuple[str, ...], derived: bool, start: list[Made],
                 body: list[tuple[int, int, bool, list[Made]]], complete: list[Made]):
        self.template = template
        self.where = where
        """The caller's (host, rank): they are in the made events."""
        self.start_key = start_key
        self.complete_key = complete_key
        self.derived = derived
        """The Init COMPLETE line is the Init START line with ``COMPLETE`` for ``START`` (then its key is too)."""
        self.start = start
        self.body = body
        """Per line of ``template.hit_lines``: its index and offset (as there), whether it is a channel line,
        what it makes."""
        self.complete = complete


class Last:
    """The last unit read of a process (``Parser._comm_last``): its newline and prefix, its lines each after
    that, its template, and the plan made of it (None: none yet)."""

    __slots__ = ("cut", "plan", "raw", "template")

    def __init__(self, cut: bytes, raw: bytes, template: Template | None):
        self.cut = cut
        self.raw = raw
        self.template = template
        self.plan: Plan | None = None


class Parser(Protocol):
    """What ``replay`` reads and writes of ``parser.LineParser``."""

    _held: str | None
    _held_trigger: bool
    _held_more: list[str] | None
    _table: FailureTable
    _trace: Traceback
    _seen: set[tuple[object, ...]]
    _fresh: list[Event | None] | None
    _comms: dict[tuple[bytes, bytes], Template | None]
    _comm_last: dict[bytes, Last]
    """Per prefix less its tid, the last block read (``Last``). A block whose lines, that prefix put for its
    own, are that block's has its template: one replace of equal length (about half the cost of cutting the
    prefixes off, which ``_comms`` needs)."""
    _lineno: int
    _classified: dict[str | tuple[str, ...], list[Hit]]

    def flush(self) -> list[Event]: ...

    def _hold(self, text: str, host: str | None, rank: int | None, trigger: bool) -> None: ...

    def _emit(self, lineno: int, text: str, host: str | None, rank: int | None, hits: list[Hit],
              channel: tuple[str, str] | None, same: tuple[str, ...] | None = None) -> list[Event]: ...

    def _made_of(self, text: str, same: tuple[str, ...], hits: list[Hit], host: str | None,
                 rank: int | None) -> list[Made] | None: ...


Unit = tuple[list[Event], int, int, bool]
"""``replay``'s answer: the events, the offset it read to, the lines it stepped over, whether it read the Init
COMPLETE line too."""

_SAME = re.compile(r"[\w.\-]+:(\d+):(\d+) \[\d+\] NCCL INFO ")
_INIT_REST = re.compile(r"(?:\w+ )?comm 0x([0-9a-f]+) rank \d+ nranks \d+ cudaDev \d+(?: nvmlDev \d+)?"
                        r"(?: busId [0-9a-f]+)?(?: commId 0x([0-9a-f]+))? - Init (?:START|COMPLETE)")


def same_key(text: str) -> tuple[str, ...] | None:
    """``text`` less what no rule, prefix or timestamp reads of an NCCL INFO line, as the pieces around it
    (None: not such a line): the thread id of its ``host:pid:tid [dev] NCCL INFO`` prefix (two pieces), and on
    an Init line in NCCL's own words (``[ncclCommInitRank] comm 0xADDR rank R nranks N cudaDev D [nvmlDev D]
    [busId B] [commId 0xID] - Init START|COMPLETE``, nothing else on it) the communicator's address and id
    (three or four). Two lines with one key give the same ``rules.classify`` hits, ``prefix.origin``,
    ``prefix.timestamp`` and ``prefix.text_rank``: the parser keeps those per key (``LineParser._classified``,
    ``LineParser._placed``), so a job's hundreds of communicators per rank classify and place their Init lines
    once.

    Why: the tid is the module docstring's case; the address and id are lowercase hex between fixed words on a
    line with no ``:`` after the prefix (no timestamp can start there), no ``Rank``, and no trigger word made of
    hex digits (``tests/logs/test_comm_blocks.py`` checks the corpus's Init lines with other values). Not where
    the prefix itself could hold a timestamp the tid ends (``...T12:34:56``: a pid of two digits after a host
    ending in a digit)."""
    m = _SAME.match(text)
    if m is None:
        return None
    pid, tid = m.span(1), m.span(2)
    if pid[1] - pid[0] < 3 and text[pid[0] - 2].isdigit():
        return None
    if text.endswith(("Init START", "Init COMPLETE")):
        init = _INIT_REST.fullmatch(text, m.end())
        if init is not None:
            address, ident = init.span(1), init.span(2)
            if ident[0] < 0:
                return text[:tid[0]], text[tid[1]:address[0]], text[address[1]:]
            return text[:tid[0]], text[tid[1]:address[0]], text[address[1]:ident[0]], text[ident[1]:]
    return text[:tid[0]], text[tid[1]:]


def replay(parser: Parser, block: bytes, pos: int, start_line: str, lineno: int, host: str | None,
           rank: int | None, has_word: Callable[[str], int]) -> Unit | None:
    """After the ``Init START`` line ``start_line`` (line ``lineno``, just fed; the next line at ``block[pos]``):
    the events of the lines up to the next ``Init COMPLETE`` line, where they are one unit, as feeding them
    would give them (and the parser left as it would be), with the offset of the ``Init COMPLETE`` line and the
    lines stepped over; None where the block is not one (then nothing changed). ``has_word``: the gate's test
    of a line's template, for the last line (whether it is held with a trigger word).

    Where the unit's last line holds no trigger word, the Init COMPLETE line is read too, as the block walk
    would (``_complete``): the offset is then the line after it, and it is one of the lines stepped over."""
    if (parser._table.record is not None or parser._trace.prefix is not None or parser._fresh is not None
            or parser._held_more is not None or (parser._held is not None and parser._held is not start_line)):
        return None
    m = _PREFIX.match(start_line)
    if m is None or not start_line.isascii():
        return None
    prefix = m.group().encode()
    hit = block.find(_COMPLETE, pos)
    if hit < 0:
        return None
    stop = block.rfind(b"\n", pos, hit) + 1  # the Init COMPLETE line's start
    if stop <= pos:
        return None
    lines = newlines(block, pos, stop)
    cut = b"\n" + prefix
    if lines > MAX_LINES or block.count(cut, pos - 1, stop) != lines or not block.startswith(prefix, stop):
        return None
    raw = block[pos - 1:stop - 1]
    head = (m.group(1) + m.group(3)).encode()
    last = parser._comm_last.get(head)
    if (last is not None and len(last.raw) == len(raw) and len(last.cut) == len(cut)
            and raw.replace(cut, last.cut) == last.raw):
        template = last.template  # the block before of this process, but for its tid (see ``Parser._comm_last``)
    else:
        body = raw.replace(cut, b"\n")  # each line after its own newline, prefix cut off
        key = (head, body)
        comms = parser._comms
        if key in comms:
            template = comms[key]
        else:
            template = _template(body, prefix.decode(), has_word)
            if len(comms) >= TEMPLATES:
                comms.clear()
            comms[key] = template
        if len(parser._comm_last) >= TEMPLATES:
            parser._comm_last.clear()
        last = parser._comm_last[head] = Last(cut, raw, template)
    if template is None:
        return None
    if not template.last_trigger and parser._held is start_line and parser._held_trigger and (
            unit := _again(parser, last, template, block, pos, stop, len(prefix), start_line, lineno, host,
                           rank)) is not None:
        return unit
    found = _events(parser, template, block, pos, stop, prefix, lineno, host, rank)
    if not template.last_trigger and (end := _complete(parser, block, stop, lineno + lines + 1, host, rank)) > 0:
        return found, end, lines + 1, True
    return found, stop, lines, False


def _template(body: bytes, prefix: str, has_word: Callable[[str], int]) -> Template | None:
    """What the lines of ``body`` (each after a newline, prefix cut off) give; None where the block must take
    the parser's usual way (see the module docstring)."""
    if b"\r" in body or b"\x1b" in body or b"exitcode" in body or b"Traceback (" in body:
        return None
    raw = body[1:].split(b"\n")
    texts = [line.decode("utf-8", "replace") for line in raw]
    hit_lines, offset = [], 0
    channels: set[tuple[str, str] | None] = set()
    for i, rest in enumerate(texts):
        text = prefix + rest
        if text.endswith(("]:", "]: ")):
            return None
        hits = classify(text) if has_word(text) & TRIGGER else []
        if hits:
            if i == len(texts) - 1 or any(kind in FAILURE_SET for kind, _ in hits):
                return None
            via = " via " in text
            # a channel line whose key an earlier one of the block has gives nothing: reported by then
            if not via or (key := channel_key(text)) is None or key not in channels:
                hit_lines.append((i, offset, hits, via, same_key(text)))
                if via:
                    channels.add(channel_key(text))
        offset += len(raw[i]) + 1  # in bytes: an undecodable byte is one byte, not U+FFFD's three
    last = prefix + texts[-1]
    return Template(hit_lines, len(texts), len(last) >= WRAP_MIN and bool(has_word(last) & TRIGGER))


def _events(parser: Parser, template: Template, block: bytes, pos: int, stop: int, prefix: bytes, lineno: int,
            host: str | None, rank: int | None) -> list[Event]:
    """The events of a block's lines by ``template``, the parser left as after its last line."""
    out = parser.flush() if parser._held is not None else []  # the Init START line (no line joins it)
    seen, width = parser._seen, len(prefix)
    for i, offset, hits, via, same in template.hit_lines:
        at = pos + offset + i * width
        text = block[at:block.find(b"\n", at)].decode("utf-8", "replace")
        channel = None
        if via:
            channel = channel_key(text)
            if channel in seen:
                continue
        found = parser._emit(lineno + 1 + i, text, host, rank, hits, channel, same)
        if found:
            out += found
    text = block[block.rfind(b"\n", pos - 1, stop - 1) + 1:stop - 1].decode("utf-8", "replace")
    parser._lineno = lineno + template.lines
    if len(text) >= WRAP_MIN:
        parser._hold(text, host, rank, template.last_trigger)
    else:
        parser._held = None
    return out


def _complete(parser: Parser, block: bytes, start: int, lineno: int, host: str | None, rank: int | None) -> int:
    """The Init COMPLETE line at ``block[start]`` (line ``lineno``), after a unit whose last line holds no
    trigger word, read as the block walk would read it: it joins nothing (the line before starts with the
    same prefix, ``LineParser._joins``), what was held gives nothing when flushed (no trigger word, nothing
    open), so the line is held with its trigger word (``Init ``). The offset after it; 0 (nothing changed)
    where it is not that simple: the block's last line (no newline), a line shorter than ``WRAP_MIN`` (it
    would give its events at once), \r or ESC in it, or words the walk tests after a marked line (`` via ``,
    ``Init START``)."""
    end = block.find(b"\n", start)
    if end < 0:
        return 0
    raw = block[start:end]
    if b"\r" in raw or b"\x1b" in raw or b" via " in raw or b"Init START" in raw:
        return 0
    text = raw.decode("utf-8", "replace")
    if len(text) < WRAP_MIN:
        return 0
    parser._lineno = lineno
    parser._hold(text, host, rank, True)
    return end + 1


def _again(parser: Parser, last: Last, template: Template, block: bytes, pos: int, stop: int, width: int,
           start_line: str, lineno: int, host: str | None, rank: int | None) -> Unit | None:
    """The unit and its Init COMPLETE line in one step, by the plan of the process's last unit (made here where
    there is none that fits): what ``_events``, ``_complete`` and the next line's flush of that line give,
    where the next line cannot join it (empty, or starting a record: ``wrap.FRESH``) and decides what a walk
    over the lines after it holds (``block._catch_up``), so nothing is held after it. None where that is not
    so (then nothing changed)."""
    end = block.find(b"\n", stop)
    if end < 0:
        return None
    raw = block[stop:end]
    if b"\r" in raw or b"\x1b" in raw or b" via " in raw or b"Init START" in raw:
        return None
    after = block.find(b"\n", end + 1)
    nxt = block[end + 1:after] if after >= 0 else block[end + 1:]
    if b"\r" in nxt or b"\x1b" in nxt:
        return None
    if nxt and (text := unresidue(nxt.decode("utf-8", "replace"))) and not FRESH.match(text):
        return None
    complete = raw.decode("utf-8", "replace")
    if not (WRAP_MIN <= len(complete) <= _LONGEST and WRAP_MIN <= len(start_line) <= _LONGEST):
        return None
    start_key = same_key(start_line)
    if start_key is None:
        return None
    derived = start_line.endswith("START") and complete == start_line[:-5] + "COMPLETE"
    plan = last.plan
    if (plan is None or plan.template is not template or plan.where != (host, rank) or plan.start_key != start_key
            or not (derived and plan.derived or same_key(complete) == plan.complete_key)):
        plan = last.plan = _plan(parser, template, block, pos, width, start_line, start_key, complete, derived,
                                 host, rank)
        if plan is None:
            return None
    lines = [(lineno, start_line, plan.start, False)]
    for i, offset, via, made in plan.body:
        at = pos + offset + i * width
        text = block[at:block.find(b"\n", at)].decode("utf-8", "replace")
        if len(text) > _LONGEST:
            return None
        lines.append((lineno + 1 + i, text, made, via))
    lines.append((lineno + template.lines + 1, complete, plan.complete, False))
    seen = parser._seen
    cut = start_line.find("NCCL")
    head = start_line[:cut] if cut > 0 else ""  # every line of the unit starts with the same prefix
    out: list[Event] = []
    parser._held = None
    for line, text, made, channel in lines:
        if channel and (key := channel_key(text)) is not None:  # as ``_events``: a channel key reported
            if key in seen:  # is the line's end; else it is reported now
                continue
            seen.add(key)
        for kind, values, fields in made:  # ``LineParser._emit_made``
            fact = (kind, head, *values)
            if fact in seen:
                continue
            seen.add(fact)
            event = object.__new__(Event)
            own = event.__dict__
            own.update(fields)
            own["line"] = line
            own["text"] = text
            out.append(event)
    parser._lineno = lineno + template.lines + 1
    return out, end + 1, template.lines + 1, True


_LONGEST = 512
"""Lines longer than this take the usual way (``parser.CLASSIFIED_LONGEST``: what the parser keeps made)."""


def _plan(parser: Parser, template: Template, block: bytes, pos: int, width: int, start_line: str,
          start_key: tuple[str, ...], complete: str, derived: bool, host: str | None, rank: int | None) -> Plan | None:
    """The plan of this unit (see ``Plan``), by the steps the parser takes on its lines (``_record_events`` on
    the Init lines, ``_emit`` on the lines with hits); None where one of them would take another way."""
    complete_key = same_key(complete)
    if complete_key is None:
        return None
    made_of: list[list[Made]] = []
    for text, same in ((start_line, start_key), (complete, complete_key)):
        if ("exitcode" in text or text.endswith(("]:", "]: ")) or " via " in text or "Traceback (" in text
                or " NCCL INFO " not in text):
            return None
        hits = parser._classified.get(same)
        if hits is None:
            hits = classify(text)
        made = parser._made_of(text, same, hits, host, rank) if hits else []
        if made is None:
            return None
        made_of.append(made)
    body = []
    for i, offset, hits, via, key in template.hit_lines:
        if key is None:
            return None
        at = pos + offset + i * width
        made = parser._made_of(block[at:block.find(b"\n", at)].decode("utf-8", "replace"), key, hits, host, rank)
        if made is None:
            return None
        body.append((i, offset, via, made))
    return Plan(template, (host, rank), start_key, complete_key, derived, made_of[0], body, made_of[1])
