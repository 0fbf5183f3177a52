"""NCCL init blocks read as one unit by the block walk (``parse.comm``): the same events as the line path,
whatever lines the blocks hold and whatever their thread ids, and the unit does replace the line-by-line walk."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bench.genlogs import rank_log
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.logs.parse import comm
from cockpit.logs.parse import parser as parser_module
from cockpit.logs.parse import scan as parse_scan
from cockpit.logs.parse.event import Event
from cockpit.logs.parse.parser import LineParser, parse_blocks, parse_lines
from cockpit.logs.parse.prefix import origin, text_rank, timestamp
from cockpit.logs.parse.rules import classify

needs_scanner = pytest.mark.skipif(parse_scan.scanner() is None, reason="the walk from mark to mark needs hyperscan")

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
_NCCL = re.compile(r"^([\w.\-]+:\d+:)(\d+)( \[\d+\] NCCL INFO )", re.MULTILINE)

_HEAD = "comm 0x55d5{:04x}c8a0 rank 1 nranks 8 cudaDev 1 nvmlDev 1 busId 29000 commId 0x{:x}"
# What an init block may hold between its first and last line: NCCL's own chatter, lines that give facts, lines
# that give failures or open a traceback or a failure table (the unit must not be taken), other prefixes.
_BODY = ["Setting affinity for GPU 1 to ffff,ffffffff", "NVLS multicast support is not available on dev 1",
         "Channel 00/0 : 1[1] -> 2[2] via P2P/IPC/read", "Channel 01/0 : 1[1] -> 2[2] via P2P/IPC/read",
         "Channel 00/0 : 1[1] -> 9[1] [send] via NET/IB/0/GDRDMA", "Connected all rings", "Using network IB",
         "NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>", "NCCL version 2.18.3+cuda12.2",
         "Call to connect returned Connection refused, retrying", "threadThresholds 8/8/64 | 128/8/64 | 512 | 512",
         "32 coll channels, 32 nvls channels, 32 p2p channels, 32 p2p channels per peer", "exitcode: 1",
         "Traceback (most recent call last):", "a table head [0]:", "x", "\x1b[31mcoloured\x1b[0m", "a\rredraw"]
_OUTSIDE = ["", "[2024-05-07 15:00:01,000][train][INFO] - step 1 | loss 2.0 | a line long enough to be held......",
            "RuntimeError: NCCL error: unhandled system error", "Traceback (most recent call last):", "[0]:"]


@st.composite
def _block(draw: st.DrawFn) -> list[str]:
    """One communicator's init on one rank: a tid, Init START, body lines behind the same prefix (a few not),
    Init COMPLETE."""
    tid, comm_no = draw(st.sampled_from([113, 114, 9999, 10000])), draw(st.integers(0, 50))  # tids come again
    prefix = f"gpu000:31000:{tid} [1] NCCL INFO "
    head = _HEAD.format(comm_no, comm_no * 2654435761 & 0xffffffffffff)
    body = draw(st.lists(st.sampled_from(_BODY), max_size=8))
    lines = [prefix + line if draw(st.integers(0, 9)) else line for line in body]
    return [prefix + head + " - Init START", *lines, prefix + head + " - Init COMPLETE"]


_logs = st.lists(st.one_of(_block(), st.lists(st.sampled_from(_OUTSIDE), max_size=3)), max_size=10).map(
    lambda parts: [line for part in parts for line in part])


def _physical(data: bytes) -> list[str]:
    """``report.read_lines`` of ``data``: split on \\n only, no empty last line after a final newline."""
    physical = data.decode().split("\n")
    return physical[:-1] if physical[-1] == "" else physical


@needs_scanner
@settings(max_examples=300, deadline=None)
@given(lines=_logs, block=st.sampled_from([1 << 17, 997, 64]), end=st.sampled_from(["", "\n"]))
def test_init_blocks_give_the_events_of_the_line_path(lines: list[str], block: int, end: str):
    data = ("\n".join(lines) + end).encode()
    chunks = [data[i:i + block] for i in range(0, len(data), block)]
    assert parse_blocks(chunks) == parse_lines(_physical(data))
    assert parse_blocks(chunks, host="n1", rank=3) == parse_lines(_physical(data), host="n1", rank=3)


@needs_scanner
@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.log")), ids=lambda p: p.name)
def test_the_corpus_again_with_other_thread_ids_gives_the_events_of_the_line_path(path: Path):
    """Each corpus file, then again with every NCCL thread id changed (its init blocks then read by the
    templates the first copy made): the events of the line path."""
    text = path.read_text(encoding="utf-8", errors="replace").rstrip("\n") + "\n"
    again = _NCCL.sub(lambda m: f"{m[1]}{int(m[2]) + 7}{m[3]}", text)
    data = (text + again + text).encode()
    assert parse_blocks([data]) == parse_lines(_physical(data))


@needs_scanner
def test_a_rank_logs_init_blocks_are_read_as_units(monkeypatch: pytest.MonkeyPatch):
    """A generated rank log's init blocks are each read as one unit, Init COMPLETE line included (their lines not
    fed to the parser one by one), and its events are the line path's."""
    lines = rank_log(7, 16, 20_000)  # rank 7 of 16: send and receive lines over IB, a new tid per communicator
    starts = sum(1 for line in lines if line.endswith("Init START"))
    units: list[int] = []
    replay = comm.replay

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - comm.replay's own
        found = replay(*args, **kwargs)
        units.append(found is not None)
        return found

    monkeypatch.setattr("cockpit.logs.parse.block.replay", counted)
    fed: list[str] = []
    physical = LineParser._physical

    def feed(self, text, *args):  # noqa: ANN001, ANN002, ANN202
        fed.append(text)
        return physical(self, text, *args)

    monkeypatch.setattr(LineParser, "_physical", feed)
    data = ("\n".join(lines) + "\n").encode()
    events = parse_blocks([data])
    monkeypatch.undo()
    assert events == parse_lines(lines)
    assert starts > 10 and len(units) == starts and all(units)
    assert not any("Connected all" in text for text in fed)  # the lines inside each unit were not fed
    assert not any("Init COMPLETE" in text for text in fed)  # nor the last lines: read with it (comm._complete)


@needs_scanner
def test_undecodable_bytes_inside_a_block_do_not_move_its_lines():
    """A line with bytes that are not UTF-8 before a line with facts: the unit finds each line by its bytes."""
    prefix = b"gpu000:31000:%d [1] NCCL INFO "
    lines = []
    for tid in (113, 114, 113):
        head = _HEAD.format(tid, tid).encode()
        lines += [prefix % tid + head + b" - Init START", prefix % tid + b"Setting affinity \xff\xfe to ffff",
                  prefix % tid + b"Channel 00/0 : 1[1] -> 2[2] via P2P/IPC/read", prefix % tid + b"Connected all rings",
                  prefix % tid + head + b" - Init COMPLETE"]
    data = b"\n".join(lines) + b"\n"
    assert parse_blocks([data]) == parse_lines(_physical_bytes(data))


def _physical_bytes(data: bytes) -> list[str]:
    return _physical(data.decode("utf-8", "replace").encode())


FIXTURES = CORPUS.parent
_HEX = re.compile(r"((?:comm|commId) 0x)[0-9a-f]+")


def _nccl_info_lines() -> list[str]:
    """Every NCCL INFO line of the three corpus folders and of a generated rank log, each once."""
    lines = [line for folder in ("nccl", "nccl2", "nccl3") for path in sorted((FIXTURES / folder).glob("*.log"))
             for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    return list(dict.fromkeys(line for line in [*lines, *rank_log(7, 16, 3_000)] if " NCCL INFO " in line))


def _placed(text: str) -> tuple[object, ...]:
    return classify(text), origin(text), timestamp(text), text_rank(text)


def test_lines_with_one_same_key_classify_and_place_alike():
    """``comm.same_key`` leaves out the tid, and an Init line's communicator address and id: every NCCL INFO line
    of the corpus, with other values there, has the same key and the same hits, origin, timestamp and rank."""
    lines = _nccl_info_lines()
    keyed = [line for line in lines if comm.same_key(line) is not None]
    inits = [line for line in keyed if len(comm.same_key(line)) > 2]  # type: ignore[arg-type]
    assert len(keyed) > 200 and len(inits) > 20
    for line in keyed:
        m = _NCCL.match(line)
        assert m is not None
        for tid in ("1", "37", "31224", "4000000"):
            other = f"{m[1]}{tid}{m[3]}{line[m.end():]}"
            for value in (("0", "ffffffffffffffff", "a", "55d5deadc8a0") if line in inits else ("",)):
                if value:
                    other = _HEX.sub(lambda h, v=value: h[1] + v, other)
                assert comm.same_key(other) == comm.same_key(line), other
                assert _placed(other) == _placed(line), other


def test_a_prefix_whose_tid_could_end_a_timestamp_has_no_key():
    """``2024-05-07T12:34:56 [0] NCCL INFO`` reads as host ``2024-05-07T12``, pid 34, tid 56: the tid is the
    seconds of a timestamp there, so the line is not keyed without it."""
    line = "2024-05-07T12:34:56 [0] NCCL INFO Using network IB"
    assert comm._SAME.match(line) is not None and comm.same_key(line) is None
    assert timestamp(line) != timestamp(line.replace(":56 ", ":57 "))
    assert comm.same_key("gpu0:31000:56 [0] NCCL INFO Using network IB") is not None


@needs_scanner
@pytest.mark.parametrize("folder", ["nccl", "nccl2", "nccl3"])
def test_the_parser_keyed_by_same_key_gives_the_events_of_one_without(folder: str, monkeypatch: pytest.MonkeyPatch):
    """A folder's logs, then again with other tids and communicator addresses (read by what the first copy
    kept per ``same_key``, events made once per key too: ``LineParser._made_of``): the events of a parser that
    keys nothing, on both paths, with and without the caller's host and rank, their fields set in the same
    order."""
    text = "".join(p.read_text(encoding="utf-8", errors="replace").rstrip("\n") + "\n"
                   for p in sorted((FIXTURES / folder).glob("*.log")))
    again = _HEX.sub(lambda h: h[1] + "beef", _NCCL.sub(lambda m: f"{m[1]}{int(m[2]) + 7}{m[3]}", text))
    data = (text + again + "\n".join(rank_log(3, 8, 2_000)) + "\n").encode()

    def parsed() -> list[list[Event]]:
        return [parse_blocks([data]), parse_lines(_physical(data)), parse_blocks([data], "h0", 3)]

    keyed = parsed()
    monkeypatch.setattr(comm, "same_key", lambda _text: None)
    monkeypatch.setattr(parser_module, "same_key", lambda _text: None)
    plain = parsed()
    assert keyed == plain
    assert [[list(vars(e).items()) for e in found] for found in keyed] == \
        [[list(vars(e).items()) for e in found] for found in plain]
    assert {e.host for e in keyed[2]} == {"h0"}
    assert sum(1 for e in plain[0] if e.kind.startswith("nccl_init")) > 10


@needs_scanner
def test_a_block_like_the_last_but_for_its_transport_is_read_as_its_own():
    """Two blocks of one process whose lines differ only in a channel's transport (same lengths, tids of the same
    width): the second is not taken for the first (``_comm_last``); the events are the line path's."""
    lines = []
    for tid, via in ((113, b"P2P/IPC/read"), (114, b"P2P/CUMEM/rd")):
        prefix = b"gpu000:31000:%d [1] NCCL INFO " % tid
        head = _HEAD.format(tid, tid).encode()
        lines += [prefix + head + b" - Init START", prefix + b"Setting affinity for GPU 1 to ffff,ffffffff",
                  prefix + b"Channel 00/0 : 1[1] -> 2[2] via " + via, prefix + b"Connected all rings",
                  prefix + head + b" - Init COMPLETE"]
    data = b"\n".join(lines) + b"\n"
    events = parse_blocks([data])
    assert events == parse_lines(_physical_bytes(data))
    assert [e.transport for e in events if e.kind == "nccl_channel"] == ["P2P/IPC/read", "P2P/CUMEM/rd"]


_WRAPPED = " the rest of a line that a terminal wrapped at its width, long enough to be held again ......"


@needs_scanner
@pytest.mark.parametrize("every", [2, 5])
def test_a_process_s_next_unit_comes_in_one_step_unless_a_wrap_continues_its_last_line(
        every: int, monkeypatch: pytest.MonkeyPatch):
    """A process's units after its first are made in one step from the plan of its last (``comm._again``): Init
    START, the channel line, Init COMPLETE. Where the line after Init COMPLETE continues it (a terminal's hard
    wrap) the unit takes the usual way, and the joined record is the event's text; the events are the line
    path's either way."""
    lines = rank_log(1, 8, 12_000)
    completes = [i for i, line in enumerate(lines) if line.endswith("Init COMPLETE")]
    for i in reversed(completes[2::every]):
        lines.insert(i + 1, _WRAPPED)
    steps: list[bool] = []
    again = comm._again

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - comm._again's own
        found = again(*args, **kwargs)
        steps.append(found is not None)
        return found

    monkeypatch.setattr(comm, "_again", counted)
    data = ("\n".join(lines) + "\n").encode()
    events = parse_blocks([data])
    monkeypatch.undo()
    assert events == parse_lines(lines)
    joined = [e for e in events if e.kind == "nccl_init_complete" and e.text.endswith(_WRAPPED)]
    assert len(joined) == len(completes[2::every]) > 5
    assert steps.count(False) == len(joined) and steps.count(True) == len(completes) - len(joined) > 5
