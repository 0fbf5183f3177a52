"""Runs of NCCL channel lines stepped over by the block walk (``parse.runs``): the same events as the line
path, whatever the run's prefixes, words, tails and neighbours, and the stepping over does happen."""

from __future__ import annotations

import pytest
from bench.genlogs import rank_log
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.logs.parse import scan as parse_scan
from cockpit.logs.parse.parser import LineParser, parse_blocks, parse_lines
from cockpit.logs.parse.runs import channel_key

needs_scanner = pytest.mark.skipif(parse_scan.scanner() is None, reason="the walk from mark to mark needs hyperscan")

_PREFIXES = ["gpu000:31000:31113 [0] NCCL INFO ", "h:1:2 [0] NCCL INFO ", "[0] NCCL INFO ", "n1:9:9 [1] exitcode ",
             "gpu:1:1 [0] NCCL INFO Ring 3 ", "\x1b[0mh:1:1 [0] NCCL INFO ", "hé:1:1 [0] NCCL INFO "]
_TAILS = [" : 0[0] -> 1[1] via P2P/IPC/read", " : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA",
          " : 7[7] -> 0[0] [receive] via NET/IB/1/GDRDMA", " : 0 -> 1 via P2P/IPC", " : 1 -> 2 via NET/Socket/0]:",
          " : 0[0] -> 1[1] via SHM/direct/direct and a tail long enough to be held as a possible hard wrap",
          " : 0[0] -> 1[1] via P2P/IPC/read exitcode", " : Ring 1 via x", " : 0[0] -> 1[1] via P2P\r50%"]
_OTHERS = ["", "short", "x" * 85, "Traceback (most recent call last):", "RuntimeError: boom", "[0]:",
           "  exitcode  : 1 (pid: 12)", "a continuation of a hard-wrapped line, long enough to be held as one......."]


@st.composite
def _run(draw: st.DrawFn) -> list[str]:
    """A communicator's channel lines: one prefix and word, one to three tails in turn, numbered channels."""
    prefix, word = draw(st.sampled_from(_PREFIXES)), draw(st.sampled_from(["Channel", "Ring"]))
    tails = draw(st.lists(st.sampled_from(_TAILS), min_size=1, max_size=3))
    numbers = st.sampled_from(["{:02d}/0", "{}", "{:02d}/32", "x{}"])
    fmt = draw(numbers)
    return [f"{prefix}{word} {fmt.format(c)}{tails[c % len(tails)]}" for c in range(draw(st.integers(1, 40)))]


_logs = st.lists(st.one_of(_run(), st.lists(st.sampled_from(_OTHERS), max_size=3)), max_size=12).map(
    lambda parts: [line for part in parts for line in part])


@needs_scanner
@settings(max_examples=300, deadline=None)
@given(lines=_logs, block=st.sampled_from([1 << 20, 997, 64]), end=st.sampled_from(["", "\n"]))
def test_channel_runs_give_the_events_of_the_line_path(lines: list[str], block: int, end: str):
    data = ("\n".join(lines) + end).encode()
    chunks = [data[i:i + block] for i in range(0, len(data), block)]
    physical = data.decode().split("\n")  # ``report.read_lines``: no empty last line after a final newline
    physical = physical[:-1] if physical[-1] == "" else physical
    assert parse_blocks(chunks) == parse_lines(physical)
    assert parse_blocks(chunks, host="n1", rank=3) == parse_lines(physical, host="n1", rank=3)


@needs_scanner
def test_a_communicators_channel_lines_are_stepped_over(monkeypatch: pytest.MonkeyPatch):
    """Of a generated rank log's 64 channel lines per communicator (send and receive in turn, each held as a
    possible hard wrap), only the first few are fed to the parser; the events are the line path's."""
    lines = rank_log(7, 16, 20_000)  # rank 7 of 16: its ring leaves the node (send and receive lines, over IB)
    channel = [line for line in lines if " via " in line and channel_key(line) is not None]
    fed: list[str] = []
    physical = LineParser._physical

    def counted(self: LineParser, text: str, *args: object) -> object:
        fed.append(text)
        return physical(self, text, *args)  # type: ignore[arg-type]

    data = ("\n".join(lines) + "\n").encode()
    expected = parse_lines(lines)
    monkeypatch.setattr(LineParser, "_physical", counted)
    assert parse_blocks([data]) == expected
    fed_channel = [text for text in fed if " via " in text and channel_key(text) is not None]
    assert len(channel) > 1000
    assert len(fed_channel) * 10 < len(channel), (len(fed_channel), len(channel))
    assert {e.kind for e in expected} >= {"nccl_channel", "nccl_init_complete"}
