"""The parser is linear on any input, and its fast paths change no result.

Growth, not absolute time: each adversarial input is parsed at two sizes in this process, and the larger
(4x) may cost at most ``MAX_GROWTH`` times the smaller (best of a few runs, so a busy machine does not fail
it). Where a count of the work is possible it is asserted too (characters classified per input character).
The block path (``parse_blocks``, what `cockpit diagnose` uses) must give exactly the events of the line
path (``parse_lines``, what a live tail uses), and the trigger words must cover everything ``classify`` finds.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from bench.genlogs import counter_lines, rank_log
from hypothesis import given, settings
from hypothesis import strategies as st

import cockpit.logs.parse.parser as parse_module
from cockpit.logs.diagnose.report import read_blocks, read_lines
from cockpit.logs.parse import nccl as parse_nccl
from cockpit.logs.parse.gate import TRIGGER, Gate
from cockpit.logs.parse.parser import WRAP_MAX_CHARS, LineParser, parse_blocks, parse_lines
from cockpit.logs.parse.rules import classify

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "nccl"
MAX_GROWTH = 6.0  # for 4x the input; linear is 4, quadratic 16


def _best_of(fn: Callable[[], object], runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def _growth(make: Callable[[int], list[str]], small: int) -> float:
    small_input, large_input = make(small), make(4 * small)
    parse_lines(small_input)  # warm up (imports, caches)
    return _best_of(lambda: parse_lines(large_input)) / max(_best_of(lambda: parse_lines(small_input)), 1e-4)


ADVERSARIAL: dict[str, tuple[Callable[[int], list[str]], int]] = {  # name: (input of size n, the smaller n)
    # a training loop's fixed-width lines that start with a counter: each looks like a hard wrap of the last
    "counter lines": (counter_lines, 10_000),
    "counter lines with a trigger word": (lambda n: [line + " Connection ok" for line in counter_lines(n)], 5_000),
    # one huge line: regexes that scan to the end of the line for every occurrence of their first word
    "timed out, repeated": (lambda n: ["timed out " * n], 2_000),
    "error TCPStore, repeated": (lambda n: ["error TCPStore " * n], 20_000),
    "error ProcessGroupGloo, repeated": (lambda n: ["error ProcessGroupGloo " * n], 2_000),
    "Using network then spaces": (lambda n: ["h:1:2 [0] NCCL INFO Using network x" + " " * (10 * n) + "y"], 50_000),
    "a progress bar redrawn": (lambda n: ["\r".join(["50%|#####     | 5/10 error"] * n)], 2_000),
    "ANSI colour on every word": (lambda n: [" ".join(["\x1b[31mNCCL WARN\x1b[0m"] * n)], 10_000),
    "failure-table keys without end": (lambda n: ["[0]:"] + ["  host      : node1"] * n, 10_000),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_parse_time_grows_linearly(name: str):
    make, small = ADVERSARIAL[name]
    growth = _growth(make, small)
    assert growth <= MAX_GROWTH, f"{name}: 4x the input cost {growth:.1f}x the time"


def test_fixed_width_counter_lines_are_classified_once_each(monkeypatch):
    """Work, counted: every character reaches the classifier once (a join is bounded, never re-classified)."""
    classified = [0]

    def counting(text: str):
        classified[0] += len(text)
        return classify(text)

    monkeypatch.setattr(parse_module, "classify", counting)
    for n in (10_000, 40_000):
        classified[0] = 0
        lines = [line + " Connection ok" for line in counter_lines(n)]
        parse_lines(lines)
        assert classified[0] <= sum(map(len, lines))


def test_a_hard_wrap_holds_at_most_a_few_kilobytes():
    parser = LineParser()
    for line in counter_lines(10_000):
        parser.feed(line)
        assert parser._held_chars <= WRAP_MAX_CHARS  # noqa: SLF001 - the bound is the point


def test_the_gate_keeps_a_bounded_cache():
    gate = Gate()
    for i in range(3):
        gate.of_text(f"{'x' * 5000}{'y' * i} step")  # long templates are answered, not kept
    for i in range(60_000):
        gate.of_text("a" * (i % 50) + "b" * (i // 50))
    assert gate.cache and all(len(t) <= 1024 for t in gate.cache)
    assert len(gate.cache) <= 50_000


# --- the block path equals the line path -------------------------------------------------------------------
# Both ways through a block: the default (hyperscan's marks where the optional extra is installed, as
# tests/run-all.sh does; else the stdlib gate) and the stdlib gate asked for.
SCANS = [pytest.param(True, id="default"), pytest.param(False, id="stdlib")]


@pytest.mark.parametrize("scan", SCANS)
@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.log")), ids=lambda p: p.name)
def test_blocks_equal_lines_on_the_corpus(path: Path, scan: bool):
    expected = parse_lines(read_lines(path))
    assert parse_blocks(read_blocks(path), scan=scan) == expected
    assert parse_blocks(read_blocks(path, block=7), scan=scan) == expected  # lines and characters cut across blocks
    assert (parse_blocks(read_blocks(path), host="n1", rank=3, scan=scan)
            == parse_lines(read_lines(path), host="n1", rank=3))


@pytest.mark.parametrize("scan", SCANS)
def test_blocks_equal_lines_on_a_generated_rank_log(scan: bool):
    lines = rank_log(5, 8, 3_000) + counter_lines(50) + rank_log(2, 8, 2_000)
    data = ("\n".join(lines) + "\n").encode()
    events = parse_blocks([data[i:i + 4096] for i in range(0, len(data), 4096)], scan=scan)
    assert events == parse_lines(lines)
    assert {e.kind for e in events} >= {"cuda_oom", "collective_timeout", "nccl_init_complete", "nccl_channel"}


@pytest.mark.parametrize("scan", SCANS)
def test_blocks_equal_lines_on_a_log_where_most_lines_are_hits(scan: bool):
    """With hyperscan, a block this dense is handed to the stdlib gate part way through its scan."""
    lines = [f"[rank{i % 8}]: RuntimeError: NCCL error {i}: unhandled system error" for i in range(4000)]
    lines[1000:1000] = rank_log(3, 8, 2_000)
    data = ("\n".join(lines) + "\n").encode()
    events = parse_blocks([data[i:i + 65536] for i in range(0, len(data), 65536)], scan=scan)
    assert events == parse_lines(lines)
    assert sum(e.kind == "nccl_system_error" for e in events) == 4000


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200)
_pieces = st.sampled_from(["NCCL INFO ", "NCCL WARN ", "[rank3]:", "h:1:2 [0] ", "\r", "\x1b[31m", "[0m ", "[1;3",
                           "1m ", " via NET/IB/0", "exitcode  : ", "[7]:", "Root Cause", "watch", "dog got stuck",
                           "Error", "x" * 40, "\n", "\xff", "é"])
_logs = st.lists(st.one_of(_text, st.lists(st.one_of(_pieces, _text), max_size=8).map("".join)), max_size=30)


def _lines_of(text: str) -> list[str]:
    """``report.read_lines`` of a file holding ``text``."""
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


@pytest.mark.parametrize("scan", SCANS)
@settings(max_examples=300, deadline=None)
@given(lines=_logs, block=st.integers(min_value=1, max_value=64))
def test_blocks_equal_lines_on_arbitrary_text(lines: list[str], block: int, scan: bool):
    data = "\n".join(lines).encode()
    chunks = [data[i:i + block] for i in range(0, len(data), block)]
    assert parse_blocks(chunks, scan=scan) == parse_lines(_lines_of(data.decode()))


# lines of a few widths >= WRAP_MIN that a terminal could have wrapped, with trigger words cut at the seams
_wrapped = st.builds(lambda head, body, width: (head + body).ljust(width)[:width],
                     st.sampled_from(["", "[rank1]:", "100", "x", "h:1:2 [0] ", "  ", "Error"]),
                     st.lists(st.sampled_from(["abc ", "watch", "dog got stuck ", "NCCL WARN ", "Connection refused ",
                                               "123 ", " via NET/IB/0 ", "exitcode: 1 ", "\x1b[0m", "[0m "]),
                              max_size=30).map("".join), st.sampled_from([80, 81, 90, 120]))


@pytest.mark.parametrize("scan", SCANS)
@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.one_of(_wrapped, _text, st.sampled_from(["", "short", "[0]:", "  host : x",
                                                                  "  exitcode  : 1"])), max_size=60),
       block=st.integers(min_value=1, max_value=300))
def test_blocks_equal_lines_on_hard_wrapped_text(lines: list[str], block: int, scan: bool):
    data = "\n".join(lines).encode()
    chunks = [data[i:i + block] for i in range(0, len(data), block)]
    assert parse_blocks(chunks, scan=scan) == parse_lines(_lines_of(data.decode()))


# --- the trigger words cover the classifier ---------------------------------------------------------------

def _covered(text: str) -> bool:
    needs = classify(text) or "exitcode" in text or text.endswith(("]:", "]: "))
    return not needs or bool(Gate().of_text(text) & TRIGGER)


def test_trigger_words_cover_every_corpus_line():
    lines = [line for path in sorted(CORPUS.glob("*.log"))
             for line in path.read_bytes().decode("utf-8", "replace").split("\n")]
    assert [line for line in lines if not _covered(line)] == []


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_pieces, _text, st.sampled_from([
    "unhandled system error", "Connection refused", "CUDA out of memory", "DistStoreError", "errno: 98",
    "third_party/gloo/", "ChildFailedError", "DUE TO TIME LIMIT", "Using network IB", "Init COMPLETE",
    "NCCL version 2.18.3", "NCCL_SOCKET_IFNAME=eth0", "detected by watchdog at work: 5", " -> 3"])), max_size=6)
    .map("".join))
def test_trigger_words_cover_generated_text(text: str):
    assert _covered(text)


# --- the NCCL patterns' word boundary, checked by hand, is the regex's ``\b`` -------------------------------

_NCCL_WORDS = ["_NET_USING", "_OLD_NET_IFACE", "_OOB", "_INIT", "_INIT_RANK", "_INIT_NRANKS", "_INIT_DEV",
               "_INIT_BUS"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_text, st.sampled_from([
    "rank 3", "nranks 8", "nRanks 2", "cudaDev 1", "busId 9a", "x", "_", "é", " ", "1", "Init START", "Init COMPLETEx",
    "OOB eth0:", "NET/IB : Using", "NET : Using interface ib0"])), max_size=8).map("".join))
def test_word_search_is_a_leading_word_boundary(text: str):
    for name in _NCCL_WORDS:
        pattern = getattr(parse_nccl, name)
        got = parse_nccl._word_search(pattern, text)  # noqa: SLF001 - the helper is the point
        want = re.compile(r"\b" + pattern.pattern).search(text)
        assert (got and (got.span(), got.groups())) == (want and (want.span(), want.groups())), name


def test_the_scanner_is_installed_where_the_tests_run():
    """tests/run-all.sh installs the `fast` extra so that the tests above run both paths: the scanner's absence
    here would mean half of them silently took the stdlib path twice."""
    from cockpit.logs.parse import scan as parse_scan

    assert parse_scan.scanner() is not None, "hyperscan is missing: pip install -e '.[test,fast]'"
