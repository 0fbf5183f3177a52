"""An error-dense log (a crash-looping job: the corpus repeated) diagnoses as its events say, in bounded memory.

Two shortcuts make such a log cheap (issue 29): the parser steps over runs of lines it read before
(``parse.memo``), and diagnose folds repeated events into counts (``diagnose.fold``). Neither may change a
result: the block path still gives exactly the events of the line path, the folded diagnosis the findings and
cause of the whole event list; and what is kept does not grow with the repeats. Structural checks, no timing
(the speed is tests/bench/bench_dense.py's).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from bench.bench_dense import corpus_chunk
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.logs.diagnose import report
from cockpit.logs.diagnose.engine import diagnose
from cockpit.logs.diagnose.fold import KEEP_FIRST, Fold, key_of
from cockpit.logs.diagnose.report import diagnose_paths, read_blocks, read_lines, report_to_dict
from cockpit.logs.parse.parser import LineParser, block_events, parse_blocks, parse_lines

SCANS = [pytest.param(True, id="default"), pytest.param(False, id="stdlib")]
CHUNK = corpus_chunk()
CHUNK_LINES = CHUNK.count(b"\n")


def _log(tmp_path: Path, copies: int) -> Path:
    path = tmp_path / f"crashloop-{copies}.log"
    path.write_bytes(CHUNK * copies)
    return path


@pytest.mark.parametrize("scan", SCANS)
@pytest.mark.parametrize("block", [4096, 1 << 20])
def test_a_repeated_corpus_parses_in_blocks_as_line_by_line(tmp_path: Path, scan: bool, block: int):
    path = _log(tmp_path, 3)
    expected = parse_lines(read_lines(path))
    assert parse_blocks(read_blocks(path, block=block), scan=scan) == expected
    assert parse_blocks(read_blocks(path, block=block), host="n1", rank=2, scan=scan) == \
        parse_lines(read_lines(path), host="n1", rank=2)


def test_the_parser_keeps_runs_it_read_and_steps_over_them():
    """The second and third copies come from the memo: it holds segments, and the events are those of
    parsing every line (the test above)."""
    parser = LineParser(scan=False)
    parser.feed_block(CHUNK * 3)
    assert parser._memo._segments  # noqa: SLF001 - the structure under test
    assert sum(len(s) for s in parser._memo._segments.values()) > 100  # noqa: SLF001


_pool = st.sampled_from([
    "", "short", "Traceback (most recent call last):", '  File "train.py", line 3, in <module>',
    "RuntimeError: NCCL error: unhandled system error", "[0]:", "  exitcode  : 1", "  host      : node1",
    "Root Cause (first observed failure):", "h:1:2 [0] NCCL INFO Using network IB",
    "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", "x" * 85 + " Connection refused",
    "y" * 90, "NCCL version 2.18.3", "[rank1]: ValueError: bad batch", "\x1b[31merror\x1b[0m", "a\rb error",
    "[rank0]: Channel 00 : 0 -> 1 via P2P/IPC Connection refused",  # a failure on a line a repeat skips whole
    "Root Cause Channel 01 : 0 -> 1 via SHM ChildFailedError"])


@pytest.mark.parametrize("scan", SCANS)
@settings(max_examples=200, deadline=None)
@given(unit=st.lists(_pool, min_size=1, max_size=20), times=st.integers(2, 5), block=st.integers(1, 400))
def test_repeated_runs_of_lines_parse_as_line_by_line(unit: list[str], times: int, block: int, scan: bool):
    data = ("\n".join(unit * times) + "\n").encode()
    chunks = [data[i:i + block] for i in range(0, len(data), block)]
    assert parse_blocks(chunks, scan=scan) == parse_lines(unit * times)


def test_folding_changes_no_finding_and_no_cause(tmp_path: Path):
    """The folded diagnosis (what `cockpit diagnose` does) against the one of every event kept."""
    path = _log(tmp_path, 12)
    whole = diagnose([(str(path), parse_blocks(read_blocks(path)))])
    folded = diagnose_paths([path])
    assert folded.findings == whole.findings
    assert folded.cause == whole.cause
    assert folded.files[0].folded > 0 and len(folded.files[0].events) < len(whole.files[0].events)


def test_a_long_crash_loop_reads_as_its_first_copies(tmp_path: Path):
    """200k lines of the corpus repeated: the findings and the first cause of a few copies, every repeat
    counted, and no more kept than for those few copies."""
    copies = -(-200_000 // CHUNK_LINES)
    path = tmp_path / "rank-0.log"  # one name: titles name the file
    path.write_bytes(CHUNK * 9)
    few = diagnose_paths([path])
    path.write_bytes(CHUNK * copies)
    many = diagnose_paths([path])
    assert [(f.code, f.title) for f in many.findings] == [(f.code, f.title) for f in few.findings]
    assert many.cause == few.cause and many.cause is not None
    assert len(many.files[0].events) == len(few.files[0].events)
    every = parse_blocks(read_blocks(path))
    fold, fold_few = Fold(), Fold()
    fold.add(every)
    fold_few.add(parse_blocks([CHUNK * 9]))
    assert fold.kept_count() == fold_few.kept_count()  # what is kept does not grow with the repeats
    assert many.files[0].folded == len(every) - fold.kept_count() > len(every) * 0.8
    counts = dict(many.files[0].repeats)
    occurrences = Counter(key_of(e) for e in every)
    at = {(e.line, e.kind): key_of(e) for e in every}
    assert counts and all(count == occurrences[at[where]] >= copies for where, count in counts.items())


def test_what_a_fold_keeps_is_bounded_per_distinct_event():
    once = parse_blocks([CHUNK])
    fold = Fold()
    for _ in range(200):
        fold.add(once)
    distinct = len({key_of(e) for e in once})
    assert fold.read == 200 * len(once)
    assert fold.kept_count() <= distinct * (KEEP_FIRST + 2)
    assert fold.kept_count() + fold.folded == fold.read
    kept = fold.events()
    assert {key_of(e) for e in kept} == {key_of(e) for e in once}
    assert kept[:KEEP_FIRST] == once[:KEEP_FIRST]  # the first ones, in the order read


def test_the_fold_keeps_the_earliest_and_the_last_occurrence():
    import dataclasses

    base = parse_lines(["[rank1]: RuntimeError: NCCL error: unhandled system error"])[0]
    times = [50.0 + i for i in range(20)]
    times[14] = 1.0  # a repeat past the first ones with the earliest timestamp
    events = [dataclasses.replace(base, line=i + 1, ts=t) for i, t in enumerate(times)]
    fold = Fold()
    fold.add(events)
    kept = fold.events()
    assert [e.line for e in kept] == [*range(1, KEEP_FIRST + 1), 15, 20]
    assert fold.repeats()[(20, base.kind)] == 20


def test_diagnose_json_counts_folded_events_and_leaves_a_small_log_as_it_was(tmp_path: Path):
    log = tmp_path / "small.log"
    log.write_text("[rank1]: RuntimeError: NCCL error: unhandled system error\n" * (KEEP_FIRST + 1))
    small = report_to_dict(diagnose_paths([log]))["files"][0]
    assert "folded" not in small and all("count" not in e for e in small["events"])
    assert len(small["events"]) == KEEP_FIRST + 1
    big = report_to_dict(diagnose_paths([_log(tmp_path, 20)]))
    entry = big["files"][0]
    assert entry["folded"] > 0
    counted = [e for e in entry["events"] if "count" in e]
    assert counted and all(e["count"] >= 20 for e in counted)
    json.dumps(big)


def test_block_events_gives_the_events_of_parse_blocks_block_by_block():
    chunks = [CHUNK[i:i + 65536] for i in range(0, len(CHUNK), 65536)]
    assert [e for found in block_events(chunks) for e in found] == parse_blocks(chunks)


def test_a_fold_fed_segments_by_the_parser_keeps_what_a_fold_of_every_event_keeps():
    """``block_events(sink=fold)``: the segments the parser stepped over go to the fold uncopied."""
    chunks = [(CHUNK * 12)[i:i + (1 << 20)] for i in range(0, len(CHUNK) * 12, 1 << 20)]
    fed, plain = Fold(), Fold()
    planned = 0
    for found in block_events(chunks, sink=fed):
        fed.add(found)
        planned = max(planned, len(fed._plans))  # noqa: SLF001 - segments did reach the fold
    plain.add(parse_blocks(chunks))
    assert planned > 0
    assert fed.read == plain.read
    assert fed.events() == plain.events()
    assert fed.repeats() == plain.repeats()


def test_the_memo_is_left_alone_where_lines_do_not_repeat():
    """An ordinary log: after a block whose lookups found nothing, the memo walk is tried on one block in
    PROBE_EVERY only; a crash loop keeps it."""
    from bench.genlogs import rank_log

    from cockpit.logs.parse.memo import PROBE_EVERY, Memo

    memo, lines = Memo(), [line.encode() for line in rank_log(0, 8, 500)]
    assert memo.use_block()  # the first block: nothing known yet
    for at in range(len(lines)):
        memo.find(lines, at, (None, None), None)
    used = [memo.use_block() for _ in range(2 * PROBE_EVERY)]
    assert sum(used) == 2 and not any(used[:PROBE_EVERY - 2])
    parser = LineParser(scan=False)
    for _ in range(3):
        parser.feed_block(CHUNK * 2)
    assert parser._memo.use_block()  # noqa: SLF001 - a crash loop: lookups pay


# A relaunched run's diagnosis reads each log from its last attempt marker (cockpit.insight.diagnosis).
MARK = b"[cockpit] attempt "


def _last_mark_by_lines(data: bytes) -> tuple[int, int]:
    lines = data.split(b"\n")[:-1]  # whole lines only
    at = max((i for i, line in enumerate(lines) if line.startswith(MARK)), default=None)
    return (0, 0) if at is None else (sum(len(line) + 1 for line in lines[:at + 1]), at + 1)


@given(st.lists(st.sampled_from([MARK + b"1 (COCKPIT_ATTEMPT=1)", b"step 3", b"", b"[cockpit] att", b"x" * 40,
                                 MARK]), max_size=14), st.booleans(), st.sampled_from([1, 3, 7, 19, 1 << 20]))
def test_the_last_attempt_marker_is_found_across_block_edges(tmp_path_factory, lines, ended, block):
    data = b"\n".join(lines) + (b"\n" if ended else b"")
    path = tmp_path_factory.mktemp("mark") / "rank-0.log"
    path.write_bytes(data)
    assert report.after_last_mark(path, MARK, block=block) == _last_mark_by_lines(data)


def test_a_relaunched_runs_log_is_diagnosed_from_its_last_attempt_with_its_own_line_numbers(tmp_path):
    path = tmp_path / "rank-1.log"
    path.write_text("step 1\nTraceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n"
                    "RuntimeError: first attempt\n[cockpit] attempt 1 (COCKPIT_ATTEMPT=1) of 2 starts\nstep 2\n"
                    "Traceback (most recent call last):\n  File \"t.py\", line 9, in <module>\n"
                    "ValueError: second attempt\n")
    whole = report.diagnose_sources([(path, "h", 1)])
    last = report.diagnose_sources([(path, "h", 1)], since=MARK)
    assert any("first attempt" in f.title for f in whole.findings)
    assert not any("first attempt" in f.title for f in last.findings)
    second = [f for f in last.findings if "ValueError" in f.title]
    assert second and (str(path), 9) in second[0].evidence, last.findings


def _fed_and_plain(copies: int) -> tuple[Fold, Fold, list]:
    data = CHUNK * copies
    chunks = [data[i:i + (1 << 20)] for i in range(0, len(data), 1 << 20)]
    fed, plain = Fold(), Fold()
    for found in block_events(chunks, sink=fed):
        fed.add(found)
    every = parse_blocks(chunks)
    plain.add(every)
    return fed, plain, every


def test_a_steady_segments_repeats_are_counted_and_give_the_fold_of_every_event():
    """Past its first folds, a segment the parser steps over again costs a count (``Fold._deferred``), not a
    step per event: what is kept, the counts and the places are still those of folding every event."""
    fed, plain, every = _fed_and_plain(40)
    assert fed._deferred  # noqa: SLF001 - the repeats were counted, not folded one by one
    assert fed.read == plain.read == len(every)
    assert fed.events() == plain.events()
    assert fed.repeats() == plain.repeats()
    assert fed.folded == plain.folded > len(every) * 0.7
    occurrences = Counter(key_of(e) for e in every)
    at = {(e.line, e.kind): key_of(e) for e in every}
    assert all(count == occurrences[at[where]] for where, count in fed.repeats().items())
    last = {key_of(e): e for e in every}  # the last occurrence of each distinct event is kept, on its own line
    assert set(last.values()) <= set(fed.events())


def test_counted_repeats_are_added_when_too_many_segments_wait(monkeypatch):
    from cockpit.logs.diagnose import fold as fold_module

    monkeypatch.setattr(fold_module, "DEFERRED_MAX", 2)
    fed, plain, _ = _fed_and_plain(30)
    assert len(fed._deferred) <= 3  # noqa: SLF001 - bounded: added up past DEFERRED_MAX
    assert fed.events() == plain.events() and fed.repeats() == plain.repeats()


def test_the_earliest_is_the_smallest_timestamp_of_all_even_the_first_ones():
    """A repeat whose timestamp is smaller than every later one but not than the first occurrence's is no
    earliest: the first occurrence is (and it is kept)."""
    import dataclasses

    base = parse_lines(["[rank1]: RuntimeError: NCCL error: unhandled system error"])[0]
    times = [5.0, *[50.0 + i for i in range(19)]]
    times[14] = 7.0
    fold = Fold()
    fold.add([dataclasses.replace(base, line=i + 1, ts=t) for i, t in enumerate(times)])
    assert [e.line for e in fold.events()] == [*range(1, KEEP_FIRST + 1), 20]


def test_a_200k_line_crash_loop_reports_as_every_event_would_but_the_elided_ones(tmp_path: Path):
    """`cockpit diagnose` of 200k lines of the corpus repeated (folded, bounded) against the diagnosis of every
    event kept: the same findings, cause and file facts; its events are a subset of every event, and each
    folded one says exactly how many times it occurred."""
    copies = -(-200_000 // CHUNK_LINES)
    path = _log(tmp_path, copies)
    every = parse_blocks(read_blocks(path))
    whole = diagnose([(str(path), every)])
    folded = diagnose_paths([path])
    assert folded.findings == whole.findings and folded.cause == whole.cause
    got, want = folded.files[0], whole.files[0]
    for name in ("path", "nccl_version", "networks", "kinds", "init_complete_ranks", "ranks"):
        assert getattr(got, name) == getattr(want, name), name
    assert {(e.line, e.kind, e.text) for e in got.events} <= {(e.line, e.kind, e.text) for e in want.events}
    assert len(got.events) < len(want.events) / 5
    plain = Fold()
    plain.add(every)
    assert got.folded == len(every) - plain.kept_count() == plain.folded  # every event listed or counted
    entry = report_to_dict(folded)["files"][0]
    occurrences = Counter(key_of(e) for e in every)
    listed = {(e.line, e.kind): key_of(e) for e in every}
    counted = [e for e in entry["events"] if "count" in e]
    assert counted and all(e["count"] == occurrences[listed[(e["line"], e["kind"])]] >= copies for e in counted)
    assert entry["folded"] == got.folded


def test_the_memo_finds_the_longest_run_that_starts_at_a_line():
    """A chain of runs stepped over one after another is kept joined; found by its first line, it must win over
    the shorter run kept first with the same first line (else each pass steps the parts again)."""
    from cockpit.logs.parse.memo import Memo

    memo, where = Memo(), (None, None)
    lines = [b"a", b"b", b"c", b"d", b"e", b"f", b"a"]
    short = memo.keep(lines[:2], [], 0, where, None)
    joined = memo.keep(lines[:6], [], 0, where, None)
    assert short is not None and joined is not None
    assert memo.find(lines, 0, where, None) is joined
    assert memo.find(lines, 6, where, None) is None  # "a" then the end: no kept run fits
    assert memo.find(lines[:4], 0, where, None) is short  # the joined one runs past the block's end


@pytest.mark.parametrize("scan", SCANS)
def test_a_crash_loop_then_ordinary_output_parses_as_line_by_line(scan: bool):
    """A crash loop's blocks are not scanned again (dense, repeating) but now and then: the ordinary output after
    it is found again and gives the events of the line path."""
    from bench.genlogs import rank_log

    tail = ("\n".join(rank_log(1, 8, 6_000)) + "\n").encode()
    data = CHUNK * 30 + tail
    chunks = [data[i:i + 65536] for i in range(0, len(data), 65536)]
    assert len(chunks) > 40
    assert parse_blocks(chunks, scan=scan) == parse_lines(read_lines_of(data))


def read_lines_of(data: bytes) -> list[str]:
    return data.decode("utf-8", "replace").split("\n")[:-1]


@pytest.mark.parametrize("scan", SCANS)
@pytest.mark.parametrize("block", [65536, 300_007, 1 << 20])
def test_lines_held_back_for_the_next_block_give_the_events_of_the_line_path(monkeypatch, scan: bool, block: int):
    """The memo walk holds a block's last lines back for the next block (``repeat._hold_back``): the events,
    their line numbers included, are still the line path's, and the lines held back at the end are read."""
    from cockpit.logs.parse import repeat

    held = []
    real = repeat._hold_back

    def spy(parser, lines, at, after):
        done = real(parser, lines, at, after)
        held.append(done)
        return done

    monkeypatch.setattr(repeat, "_hold_back", spy)
    failure = b"[rank3]: RuntimeError: NCCL error: unhandled system error\n"
    for end in (b"last line, no newline", b""):  # the held-back lines end the file, or a last piece follows
        data = CHUNK * 25 + failure + end
        chunks = [data[i:i + block] for i in range(0, len(data), block)]
        expected = parse_lines(read_lines_of(data if data.endswith(b"\n") else data + b"\n"))
        assert parse_blocks(chunks, scan=scan) == expected
        assert expected[-1].kind == "nccl_system_error" and expected[-1].line == CHUNK_LINES * 25 + 1
    assert any(held)
