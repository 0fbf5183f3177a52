"""Log lines -> typed events: the pure parser under `cockpit diagnose` and the live log views.

A training log is many processes' output interleaved, behind launcher prefixes, sometimes hard-wrapped by
a terminal, with progress bars redrawn by carriage returns. ``LineParser`` reads it one physical line at a
time (so a tail can feed it live) and keeps only what multi-line text needs: the previous line while it
might continue (a hard wrap), the torchelastic failure-table record being read, and which transports each
process already reported. NCCL repeats its facts (a channel line per channel, a bootstrap line per
communicator): an informational event is reported once per process and value, failures every time.

Linear on any input, and cheap where a log says nothing (most of a 1 GB rank log): a hard wrap holds at most
``WRAP_MAX_PARTS`` lines, and a record is classified only if one of its lines holds a trigger word, which
``gate`` answers per line with a cached lookup (or ``scan``, in C over a whole block, where
hyperscan is installed). ``parse_blocks`` / ``LineParser.feed_block`` take the log as blocks of bytes (what
`cockpit diagnose` reads) and skip such lines without touching them (the walk is in ``block``);
``parse_lines`` / ``LineParser.feed`` take it line by line (a live tail). Both give the same events.

``Event`` is in ``event``, torchelastic's failure table in ``table``, an open Python traceback in
``trace``, the kind vocabulary in ``kinds``, what is recognised in ``rules`` (failures),
``ends`` (a process's end no rule names) and ``nccl`` (NCCL's facts), runs of channel lines that repeat
reported facts (stepped over by the block walk) in ``runs``, prefixes
and timestamps in ``prefix``, what a hard wrap looks like in ``wrap``, the cheap test in
``gate`` (and ``scan``, the one module that uses a library, optional: hyperscan). No IO.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cockpit.logs.parse.block import feed_gated, feed_marked
from cockpit.logs.parse.comm import Last, Made, Template, same_key
from cockpit.logs.parse.event import FAILURE_SET, Event, new_event
from cockpit.logs.parse.gate import RESIDUE, SPECIAL, TRIGGER, Gate, has_word
from cockpit.logs.parse.kinds import (
    FAILURE_KINDS,
    INFO_KINDS,
    NCCL_INIT_COMPLETE,
    NCCL_INIT_START,
    PYTHON_EXCEPTION,
    WORKER_FAILED,
    Hit,
)
from cockpit.logs.parse.memo import PROBE_EVERY, Memo, Segment, Sink
from cockpit.logs.parse.prefix import Origin, origin, strip_ansi, text_rank, timestamp
from cockpit.logs.parse.repeat import feed_repeated
from cockpit.logs.parse.rules import classify
from cockpit.logs.parse.runs import channel_key as channel_key_of
from cockpit.logs.parse.scan import scanner
from cockpit.logs.parse.table import FailureTable
from cockpit.logs.parse.trace import Traceback
from cockpit.logs.parse.wrap import FRESH, WRAP_MAX_CHARS, WRAP_MAX_PARTS, WRAP_MIN

__all__ = ["FAILURE_KINDS", "INFO_KINDS", "Event", "LineParser", "block_events", "parse_blocks", "parse_lines"]

MAX_TEXT = 2000
"""Event text is cut here (a flattened traceback or a progress bar can be megabytes)."""


CLASSIFIED_MAX = 4096
CLASSIFIED_LONGEST = 512
"""Records whose ``classify`` answer is kept (a pure function of the text): a warning printed again and again in
the same words (``... pass in use_reentrant=...``, ~1% of a generated rank log, holds "in use") is classified
once. Bounded: that many texts of at most that many characters, then it starts again."""

_COMM_RANK_KINDS = frozenset({NCCL_INIT_START, NCCL_INIT_COMPLETE})

class LineParser:
    """Incremental parser: ``feed`` physical lines in order, then ``flush`` at the end (or when idle).

    A line of ``WRAP_MIN`` characters or more is held until the next line shows whether it was
    hard-wrapped, so its events come out one ``feed`` later (or from ``flush``). ``host`` and ``rank``
    passed to ``feed`` are facts the caller knows (e.g. a per-rank log file); they win over the text.
    A record is classified only if one of its lines holds a trigger word (``gate``): the rest of a
    log costs a cached lookup per line. ``feed_block`` is the same parser over a block of bytes.
    """

    def __init__(self, *, scan: bool = True) -> None:
        self._lineno = 0
        self._scan = scan  # False: the stdlib gate, as where hyperscan is not installed
        # The held record: its first part (None when nothing is held), the parts after it (a terminal wraps
        # every part but the last at the same width), its length once it has several, whether a part holds a
        # trigger word, and (line it starts on, caller's host, caller's rank).
        self._held: str | None = None
        self._held_more: list[str] | None = None
        self._held_chars = 0
        self._held_trigger = False
        self._held_at: tuple[int, str | None, int | None] = (0, None, None)
        self._table = FailureTable()
        self._trace = Traceback()
        self._seen: set[tuple[object, ...]] = set()  # informational facts already reported
        self._gate = Gate()
        self._memo = Memo()  # runs of lines read before, from a clean point to the next (block walk only)
        self._fresh: list[Event | None] | None = None  # the block walk's: events a repeat would not give (memo)
        self._sink: Sink | None = None  # block_events(sink=): where the block walk hands segments it stepped over
        self._scratch: dict[bool, object] = {}  # the scanner's, per database
        self._dense = False  # the scanner found the last block it scanned dense
        self._more = False  # block_events: more blocks follow (the memo walk may hold a block's last lines back)
        self._rest: list[bytes] | None = None  # lines held back, read before the next block's
        self._after: Segment | None = None  # the kept segment that ends where the held-back lines start
        self._comms: dict[tuple[bytes, bytes], Template | None] = {}  # NCCL init blocks read (``comm``)
        self._comm_last: dict[bytes, Last] = {}  # the last one per process (``comm.Last``)
        # record text (an NCCL INFO line's ``comm.same_key``) -> classify's hits (not changed by callers)
        self._classified: dict[str | tuple[str, ...], list[Hit]] = {}
        self._placed: dict[tuple[str, ...], tuple[Origin, float | None, int | None]] = {}  # same_key -> _place
        self._made: dict[tuple[str, ...], tuple[list[Hit], str | None, int | None, list[Made] | None]] = {}
        """same_key -> (its hits, the caller's host and rank, what ``_made_of`` made of them)"""

    def feed(self, line: str, *, host: str | None = None, rank: int | None = None) -> list[Event]:
        """Parse one physical line (a trailing newline is ignored); return the events now complete."""
        return self._feed(line, host, rank)

    def feed_block(self, block: bytes, host: str | None = None, rank: int | None = None) -> list[Event]:
        """Parse whole lines at once: ``block`` is UTF-8 bytes (undecodable bytes replaced), split on b"\\n"
        only, each piece one physical line (end a block with a newline to mean none follows). The same events
        as feeding each piece.

        A line without a trigger word, while nothing is open that it could add to, is skipped: only the few
        before the next line that matters are replayed (``block``). Which lines hold one: hyperscan's marks
        where it is installed (``scan``), else the stdlib gate, a dict lookup per line."""
        rest, self._rest = self._rest, None
        if rest is not None:
            block = b"\n".join((*rest, block))
        else:
            self._after = None
        scan = scanner() if self._scan else None
        if scan is not None:
            if self._gate.words is has_word:  # templates not seen before are tested in C too
                self._gate.words = scan.has_word(self._scratch)
            # None: most lines hold a trigger word. A crash loop (the last block dense, its runs repeating) is
            # not scanned again but on one block in PROBE_EVERY: the scan would stop as dense ~35 KB in.
            dense = self._dense and self._memo.repeating() and self._memo.blocks % PROBE_EVERY
            self._dense = True
            if not dense:
                marks: list[int] = []
                scratch = self._scratch
                special = b"\r" in block or b"\x1b" in block
                resume = scan.paused_marks(block, scratch, 0, marks, special=special)
                if resume is not None:
                    self._dense = False
                    return feed_marked(self, block, marks, host, rank, resume,
                                       lambda at, into, after: scan.paused_marks(
                                           block, scratch, at, into, pause_after=after, special=special))
        return self._dense_rest(block, host, rank)

    def _dense_rest(self, block: bytes, host: str | None, rank: int | None) -> list[Event]:
        """The walk of a block (or of its rest) that the scanner calls dense, or of every block without one."""
        self._dense = True
        if self._memo.use_block():  # most lines hold a trigger word, or no scanner: repeats are worth a look
            return feed_repeated(self, block, host, rank)
        return feed_gated(self, block, host, rank)

    def flush(self) -> list[Event]:
        """Events of a held line: call at end of input, or when a live stream goes quiet."""
        held, self._held = self._held, None
        if held is None:
            return []
        more = self._held_more
        line, host, rank = self._held_at
        if not (self._held_trigger or self._table.record is not None):
            if self._trace.prefix is None:
                return []
            return self._trace_only(line, held + "".join(more) if more else held, host, rank)
        return self._record_events(line, held + "".join(more) if more else held, host, rank)

    def _trace_only(self, lineno: int, text: str, host: str | None, rank: int | None) -> list[Event]:
        """A record without a trigger word while a traceback is open: only its last line can make an event."""
        if not self._trace.read(lineno, text):
            return []
        return [_located(lineno, PYTHON_EXCEPTION, text[:MAX_TEXT], {}, origin(text), timestamp(text),
                         text_rank(text), host, rank)]

    def _feed(self, line: str, host: str | None, rank: int | None) -> list[Event]:
        self._lineno += 1
        text = line.rstrip("\n")
        flags = self._gate.of_text(text)
        if flags & SPECIAL and "\r" in text:  # progress bars: each redraw is its own piece of text
            out: list[Event] = []
            for segment in text.split("\r"):
                if segment:
                    trigger = bool(self._gate.of_text(segment) & TRIGGER)
                    out += self._physical(strip_ansi(segment), host, rank, trigger)
            return out
        if flags & (SPECIAL | RESIDUE):
            text = strip_ansi(text)
        return self._physical(text, host, rank, bool(flags & TRIGGER))

    def _joins(self, text: str) -> bool:
        """Whether ``text`` continues the held record: a hard wrap. Not if it is empty or starts like a new
        record (``FRESH``, or like the held one: the same loop printing again), once the parts so far differ
        in width (the last part of a wrap is shorter), or past ``WRAP_MAX_PARTS`` / ``WRAP_MAX_CHARS``."""
        held, more = self._held, self._held_more
        if not text or text[:6] == held[:6]:  # type: ignore[index]
            return False
        if more is None:
            if len(held) + len(text) > WRAP_MAX_CHARS:  # type: ignore[arg-type]
                return False
        elif (len(more[-1]) != len(held) or len(more) + 1 >= WRAP_MAX_PARTS  # type: ignore[arg-type]
              or self._held_chars + len(text) > WRAP_MAX_CHARS):
            return False
        return not FRESH.match(text)

    def _join(self, text: str, trigger: bool) -> None:
        if self._held_more is None:
            self._held_more, self._held_chars = [text], len(self._held) + len(text)  # type: ignore[arg-type]
        else:
            self._held_more.append(text)
            self._held_chars += len(text)
        self._held_trigger = self._held_trigger or trigger

    def _hold(self, text: str, host: str | None, rank: int | None, trigger: bool) -> None:
        self._held, self._held_more, self._held_trigger = text, None, trigger
        self._held_at = (self._lineno, host, rank)

    def _reshape(self, text: str, host: str | None, rank: int | None) -> list[Event]:
        """``_physical`` for a line without a trigger word while no table record is open and the held record
        (if any) has none either: no event can come of it, only the held record changes."""
        if self._held is not None and self._joins(text):
            if len(text) >= WRAP_MIN:
                self._join(text, False)
            else:
                self._held = None
        elif len(text) >= WRAP_MIN:
            self._hold(text, host, rank, False)
        else:
            self._held = None
        return []

    def _physical(self, text: str, host: str | None, rank: int | None, trigger: bool) -> list[Event]:
        out: list[Event] = []
        if self._held is not None:
            if self._joins(text):  # a hard-wrapped continuation
                self._join(text, trigger)
                return out if len(text) >= WRAP_MIN else self.flush()
            out = self.flush()
        if len(text) >= WRAP_MIN:
            self._hold(text, host, rank, trigger)
            return out
        if not (trigger or self._table.record is not None):
            if self._trace.prefix is not None:
                out += self._trace_only(self._lineno, text, host, rank)
            return out
        events = self._record_events(self._lineno, text, host, rank)
        if out:
            out += events
            return out
        return events

    def _record_events(self, lineno: int, text: str, host: str | None, rank: int | None) -> list[Event]:
        """The events of one record (a line, or a hard-wrapped line joined back)."""
        if self._table.record is not None or "exitcode" in text or text.endswith(("]:", "]: ")):
            handled, events = self._table.read(lineno, text, host, rank)
            if handled:
                return events
        channel_key = None
        if " via " in text:  # channel lines differ only in the channel number: skip repeats before parsing
            channel_key = channel_key_of(text)
            if channel_key in self._seen:
                return []
        same = same_key(text) if " NCCL INFO " in text else None
        hits = self._classified.get(same or text)
        if hits is None:
            hits = classify(text)
            if len(text) <= CLASSIFIED_LONGEST:
                if len(self._classified) >= CLASSIFIED_MAX:
                    self._classified.clear()
                self._classified[same or text] = hits
        if (self._trace.prefix is not None or "Traceback (" in text) and self._trace.read(lineno, text) and not hits:
            hits = [(PYTHON_EXCEPTION, {})]  # the traceback's last line, whatever its type is called
        if not hits:
            return []
        return self._emit(lineno, text, host, rank, hits, channel_key, same)

    def _emit(self, lineno: int, text: str, host: str | None, rank: int | None, hits: list[Hit],
              channel_key: tuple[str, str] | None, same: tuple[str, ...] | None = None) -> list[Event]:
        """The events of a record's ``hits`` (``classify``'s, not empty): facts reported before left out.
        ``channel_key``: a channel line's, reported with it (``_record_events`` tested it first); ``same``: the
        text's ``comm.same_key`` where the caller made it."""
        if channel_key is not None:
            self._seen.add(channel_key)
        if same is not None and len(text) <= CLASSIFIED_LONGEST:
            made = self._made.get(same)
            if made is None or (made[0] is not hits and made[0] != hits) or made[1] != host or made[2] != rank:
                if len(self._made) >= CLASSIFIED_MAX:
                    self._made.clear()
                made = self._made[same] = (hits, host, rank, self._made_of(text, same, hits, host, rank))
            if made[3] is not None:
                return self._emit_made(lineno, text, made[3], channel_key is not None)
        where: Origin | None = None
        events = []
        for kind, fields in hits:
            if kind not in FAILURE_SET:  # a fact: once per process (its prefix) and value
                cut = text.find("NCCL")
                key = (kind, text[:cut] if cut > 0 else "", *fields.values())
                if key in self._seen:
                    continue
                self._seen.add(key)
            elif kind == WORKER_FAILED and "Root Cause" in text:
                self._table.root_next = True
            if where is None:
                where, ts, said_rank = self._place(text, same)
                if len(text) > MAX_TEXT:
                    text = text[:MAX_TEXT] + "…"
            events.append(_located(lineno, kind, text, fields, where, ts, said_rank, host, rank))
        if self._fresh is not None:
            self._note_fresh(events, channel_key is not None)
        return events

    def _made_of(self, text: str, same: tuple[str, ...], hits: list[Hit], host: str | None,
                 rank: int | None) -> list[Made] | None:
        """What ``_emit`` makes of the facts ``hits`` on a line of key ``same`` but its line number and text:
        per hit, its kind, its fields' values (the fact's key but the prefix) and the event's fields, all
        the same for every line of that key (``_place`` and ``_located`` read nothing else). None where a hit
        is a failure (reported every time, some with a side effect) or names a field the line sets."""
        if any(kind in FAILURE_SET or "line" in fields or "text" in fields for kind, fields in hits):
            return None
        where, ts, said_rank = self._place(text, same)
        return [(kind, tuple(fields.values()),
                 dict(_located(0, kind, text, fields, where, ts, said_rank, host, rank).__dict__))
                for kind, fields in hits]

    def _emit_made(self, lineno: int, text: str, made: list[Made], channel: bool) -> list[Event]:
        """``_emit`` of a line whose events ``_made_of`` made but for their line number and text: each one's
        fields copied in one call, those two set after (the same Event, fields in the same order)."""
        cut = text.find("NCCL")
        head = text[:cut] if cut > 0 else ""
        seen = self._seen
        events = []
        for kind, values, fields in made:
            key = (kind, head, *values)
            if key in seen:
                continue
            seen.add(key)
            event = object.__new__(Event)
            own = event.__dict__
            own.update(fields)
            own["line"] = lineno
            own["text"] = text
            events.append(event)
        if self._fresh is not None:
            self._note_fresh(events, channel)
        return events

    def _place(self, text: str, same: tuple[str, ...] | None) -> tuple[Origin, float | None, int | None]:
        """``text``'s origin, timestamp and the rank it names: kept per ``comm.same_key`` for NCCL INFO lines
        (each communicator's Init lines differ only where none of the three reads), bounded like ``_classified``."""
        if same is None and (" NCCL INFO " not in text or (same := same_key(text)) is None):
            return origin(text), timestamp(text), text_rank(text)
        placed = self._placed.get(same)
        if placed is None:
            placed = origin(text), timestamp(text), text_rank(text)
            if len(text) <= CLASSIFIED_LONGEST:
                if len(self._placed) >= CLASSIFIED_MAX:
                    self._placed.clear()
                self._placed[same] = placed
        return placed

    def _note_fresh(self, events: list[Event], channel: bool) -> None:
        """Note the events that a repeat of this record would not give (``memo``): its facts, reported once, or
        all of a channel line's (a repeat is skipped whole; None where that skips a failure too)."""
        fresh = self._fresh
        if fresh is None:
            return
        if channel:
            fresh += events
            if any(e.kind in FAILURE_SET for e in events):
                fresh.append(None)
        else:
            fresh += [e for e in events if e.kind not in FAILURE_SET]


def _located(lineno: int, kind: str, text: str, fields: dict[str, object], where: Origin, ts: float | None,
             said_rank: int | None, host: str | None, rank: int | None) -> Event:
    """A hit placed on its line and process. Rank: the caller's, a launcher prefix's, the one the message
    names, a bare ``[N]``; for Init START/COMPLETE the communicator rank printed on the line."""
    own_rank = fields.get("rank")
    if kind in _COMM_RANK_KINDS and own_rank is not None:
        rank = own_rank  # type: ignore[assignment]
    elif rank is None:
        for candidate in (where.rank, own_rank, said_rank, where.weak_rank):
            if candidate is not None:
                rank = candidate  # type: ignore[assignment]
                break
    event = {"line": lineno, "kind": kind, "text": text, "host": where.host, "pid": where.pid,
             "cuda_dev": where.cuda_dev, "nranks": where.nranks, "ts": ts}
    event.update(fields)
    event["rank"] = rank
    if host is not None:
        event["host"] = host
    return new_event(event)


def parse_lines(lines: Iterable[str], host: str | None = None, rank: int | None = None) -> list[Event]:
    """Parse a whole log (an iterable of physical lines, e.g. an open file) into its events, in order."""
    parser = LineParser()
    events: list[Event] = []
    feed = parser._feed  # noqa: SLF001 - the same code as feed(), minus keyword handling per line
    for line in lines:
        found = feed(line, host, rank)
        if found:
            events += found
    events += parser.flush()
    return events


def parse_blocks(blocks: Iterable[bytes], host: str | None = None, rank: int | None = None, *,
                 scan: bool = True) -> list[Event]:
    """Parse a whole log given as consecutive blocks of its bytes (any sizes, e.g. 1 MiB reads), with the
    lines of ``report.read_lines``: split on \\n only, no empty last line after a final newline. The same
    events as ``parse_lines`` of those lines, several times faster (``LineParser.feed_block``). ``scan=False``
    takes the stdlib gate even where hyperscan is installed (the tests check that both give the same events)."""
    return [e for found in block_events(blocks, host, rank, scan=scan) for e in found]


def block_events(blocks: Iterable[bytes], host: str | None = None, rank: int | None = None, *,
                 scan: bool = True, sink: Sink | None = None, first_line: int = 0) -> Iterator[list[Event]]:
    """``parse_blocks`` as it goes: the events of each block (and last, of the end), so that a caller that
    folds them (`cockpit diagnose`) never holds the whole list. ``sink``: the events of a run of lines read
    before go to ``sink.segment`` uncopied, with the events before them (``sink.add``), in order, before the
    rest of the block's are yielded. ``first_line``: the lines of the file before the first block (its events
    name their file's lines)."""
    parser = LineParser(scan=scan)
    parser._sink = sink
    parser._lineno = first_line
    parser._more = True
    pending: list[bytes] = []  # a line still open: kept as pieces, so a huge line is not copied per block
    for block in _gathered(blocks, parser):
        cut = block.rfind(b"\n")
        if cut < 0:
            pending.append(block)
            continue
        if pending:
            pending.append(block[:cut])
            yield parser.feed_block(b"".join(pending), host, rank)
            pending.clear()
        else:
            yield parser.feed_block(block[:cut], host, rank)
        if cut + 1 < len(block):
            pending.append(block[cut + 1:])
    parser._more = False
    if pending:
        yield parser.feed_block(b"".join(pending), host, rank)
    elif parser._rest is not None:  # the lines held back are the last
        rest, parser._rest = parser._rest, None
        yield parser.feed_block(b"\n".join(rest), host, rank)
    yield parser.flush()


DENSE_READ = 1 << 20
"""While the scanner finds the log dense and its runs repeat (a crash loop), blocks are read joined up to this
many bytes: the
memo's runs (``memo``) are found whole in a larger block (the corpus repeated: ~0.16 s per 0.4M lines in
128 KiB blocks, ~0.09 in 1 MiB ones), where an ordinary log is cheaper in small ones (``report``)."""


def _gathered(blocks: Iterable[bytes], parser: LineParser) -> Iterator[bytes]:
    """``blocks``, consecutive ones joined up to ``DENSE_READ`` bytes while the parser reads a crash loop."""
    pieces: list[bytes] = []
    size = 0
    for block in blocks:
        pieces.append(block)
        size += len(block)
        if parser._dense and size < DENSE_READ and parser._memo.repeating():
            continue
        yield block if len(pieces) == 1 else b"".join(pieces)
        pieces.clear()
        size = 0
    if pieces:
        yield b"".join(pieces)
