"""The line parser: prefixes, ANSI, progress bars, hard wraps, interleaving, fields, incremental use."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.logs.parse.nccl import network_name
from cockpit.logs.parse.parser import FAILURE_KINDS, INFO_KINDS, Event, LineParser, parse_lines
from cockpit.logs.parse.prefix import origin, strip_ansi, timestamp
from cockpit.logs.parse.rules import classify

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "nccl"
WATCHDOG = ("[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
            "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600123 milliseconds before timing out.")


def one(lines: list[str], kind: str) -> Event:
    events = [e for e in parse_lines(lines) if e.kind == kind]
    assert len(events) == 1, events
    return events[0]


def kinds(lines: list[str]) -> set[str]:
    return {e.kind for e in parse_lines(lines)}


# --- prefixes: who printed the line ------------------------------------------------------------------------

@pytest.mark.parametrize(("line", "host", "rank", "pid", "cuda_dev"), [
    ("[1,3]<stdout>:gpu7:411:412 [3] NCCL WARN Connect to 10.0.0.2<3> failed : Connection refused",
     "gpu7", 3, 411, 3),
    ("[rank7]:[E321 02:07:08.40 ProcessGroupNCCL.cpp:1] " + WATCHDOG.format(r=1, seq=5), None, 7, None, None),
    ("[default3]:RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", None, 3, None, None),
    ("node-5: node-5:3048:4991 [2] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote "
     "peer x<1>", "node-5", None, 3048, 2),
    ("[155] crow-19:5330:5330 [3] NCCL WARN Call to ibv_create_cq failed", "crow-19", 155, 5330, 3),
    ("3: RuntimeError: CUDA error: out of memory", None, 3, None, None),
    ("[1,mpirank:5,algo-2]<stderr>:RuntimeError: CUDA out of memory.", "algo-2", 5, None, None),
    ("(RayTrainWorker pid=812, ip=10.0.0.9) RuntimeError: CUDA out of memory.", "10.0.0.9", None, 812, None),
    ("stderr: [rank2]: torch.OutOfMemoryError: CUDA out of memory.", None, 2, None, None),
])
def test_prefixes_name_host_rank_pid_and_device(line, host, rank, pid, cuda_dev):
    event = next(e for e in parse_lines([line]) if e.is_failure)
    assert (event.host, event.rank, event.pid, event.cuda_dev) == (host, rank, pid, cuda_dev)


def test_nccls_bracket_is_the_cuda_device_not_the_rank():
    event = one(["gpu4:100:101 [6] misc/socket.cc:1 NCCL WARN socketStartConnect: Connect to 10.1.1.1<9> failed"],
                "network_connect_error")
    assert event.cuda_dev == 6 and event.rank is None and event.host == "gpu4"


def test_launcher_rank_wins_over_the_subgroup_rank_in_the_message():
    event = one([" 2025-02-18 12:54 [rank13]:[E218 04:54:22.86 ProcessGroupNCCL.cpp:616] "
                 + WATCHDOG.format(r=1, seq=216)], "collective_timeout")
    assert event.rank == 13


def test_message_rank_is_used_when_no_prefix_names_one():
    assert one(["[E ProcessGroupNCCL.cpp:737] " + WATCHDOG.format(r=6, seq=9)], "collective_timeout").rank == 6


def test_caller_host_and_rank_win():
    events = parse_lines(["[rank2]: RuntimeError: CUDA out of memory."], host="n1", rank=9)
    assert [(e.host, e.rank) for e in events] == [("n1", 9)]


# --- ANSI, progress bars ---------------------------------------------------------------------------------

def test_ansi_sequences_and_esc_less_residue_are_removed():
    assert strip_ansi("\x1b[1;31mRuntimeError\x1b[0m: boom") == "RuntimeError: boom"
    assert strip_ansi("[0m [1;32mhello") == "hello"
    event = one(["[0m ip-1:14605:14673 [0] NCCL INFO NET/Socket : Using [0]ens5:172.31.0.137<0>"], "nccl_network")
    assert event.network == "Socket" and event.host == "ip-1" and event.text.startswith("ip-1:")
    colored = one(["\x1b[36m(pid=7, ip=10.0.0.3)\x1b[0m RuntimeError: CUDA out of memory."], "cuda_oom")
    assert colored.host == "10.0.0.3" and "\x1b" not in colored.text


def test_carriage_return_progress_bar_then_error_on_the_same_line():
    bar = "".join(f"Epoch 1: {p:3d}%|{'#' * (p // 10):10s}| {p}/100\r" for p in range(0, 100, 7))
    events = parse_lines(["start\n", bar + "RuntimeError: CUDA out of memory. Tried to allocate 2 GiB\n", "end\n"])
    assert [(e.line, e.kind) for e in events] == [(2, "cuda_oom")]
    assert events[0].text.startswith("RuntimeError")


def test_error_glued_to_a_progress_bar_without_newline():
    line = ("Preparing: 46%|####| 31/67 [29:02<35:12, 58.67s/it]slurmstepd: error: *** STEP 6053.0 ON n1 "
            "CANCELLED AT 2024-04-23T12:18:08 ***")
    assert kinds([line]) == {"slurm_cancelled"}


# --- hard wraps, interleaving ---------------------------------------------------------------------------

def _wrap(text: str, width: int) -> list[str]:
    parts = [text[i:i + width] for i in range(0, len(text), width)]
    return parts[:-1] + [parts[-1].ljust(width)]


def test_hard_wrapped_watchdog_record_is_joined_back():
    record = "[rank2]:[E513 13:25:57.71 ProcessGroupNCCL.cpp:616] " + WATCHDOG.format(r=2, seq=532339)
    lines = _wrap(record, 90) + _wrap("[rank0]:[E513 13:25:57.71 ProcessGroupNCCL.cpp:616] "
                                      + WATCHDOG.format(r=0, seq=532341), 90)
    events = [e for e in parse_lines(lines) if e.kind == "collective_timeout"]
    assert [(e.line, e.rank, e.seq, e.op, e.timeout_ms, e.elapsed_ms) for e in events] == [
        (1, 2, 532339, "ALLREDUCE", 600000, 600123), (len(_wrap(record, 90)) + 1, 0, 532341, "ALLREDUCE",
                                                      600000, 600123)]


def test_phrase_split_by_a_wrap_is_found_and_keeps_the_prefix_rank():
    record = ("[rank6]:[E429 13:55:49.38 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 6] "
              "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring.")
    cut = record.index("watchdog got") + 5  # "watch" | "dog got stuck"
    event = one([record[:cut].ljust(cut), record[cut:]], "collective_timeout")
    assert (event.line, event.rank, event.elapsed_ms) == (1, 6, 480000)


def test_long_lines_that_start_fresh_are_not_joined():
    lines = ["gpu1:1:2 [0] NCCL INFO " + "x" * 100,
             "gpu1:1:2 [0] misc/socket.cc:1 NCCL WARN Connect to 10.0.0.1<1> failed : Connection refused",
             "RuntimeError: NCCL communicator was aborted on rank 0. " + WATCHDOG.format(r=0, seq=3),
             "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 88 closing signal SIGTERM"]
    assert [(e.line, e.kind) for e in parse_lines(lines) if e.is_failure] == [
        (2, "network_connect_error"), (3, "collective_timeout"), (4, "worker_failed")]


def test_interleaved_ranks_keep_their_own_attribution():
    lines = []
    for step in range(3):
        for r in (0, 1):
            lines.append(f"[rank{r}]:[E0513 13:25:5{step}.1 ProcessGroupNCCL.cpp:1] " + WATCHDOG.format(r=r, seq=step))
    events = parse_lines(lines)
    assert [(e.rank, e.seq) for e in events] == [(r, s) for s in range(3) for r in (0, 1)]


# --- fields -----------------------------------------------------------------------------------------------

def test_init_complete_both_layouts_and_not_destroy():
    lines = ["ip-1:45332:45337 [0] NCCL INFO comm 0x7f14 rank 17 nranks 64 cudaDev 0 nvmlDev 0 - Init COMPLETE",
             "h:9:9 [3] NCCL INFO comm 0x55d3 rank 3 nranks 8 cudaDev 3 busId 1b000 - Init COMPLETE",
             "h:7:7 [1] NCCL INFO ncclCommInitRankConfig comm 0x5 rank 9 nranks 16 cudaDev 1 nvmlDev 1 busId 2d000 "
             "commId 0xab localSize 8 used 10 bytes on core 3 - Init COMPLETE",
             "h:7:7 [1] NCCL INFO comm 0x7fa2 rank 5 nranks 8 cudaDev 1 busId 46000 - Destroy COMPLETE",
             "h:8:8 [2] NCCL INFO comm 0x5 rank 1 nRanks 4 nNodes 1 localRanks 4 localRank 1 MNNVL 0"]
    events = [e for e in parse_lines(lines) if e.kind == "nccl_init_complete"]
    assert [(e.rank, e.nranks, e.cuda_dev, e.bus_id) for e in events] == [
        (17, 64, 0, None), (3, 8, 3, "1b000"), (9, 16, 1, "2d000")]


def test_init_start():
    event = one(["algo-1:18061:18137 [4] NCCL INFO ncclCommInitRank comm 0x56 rank 4 nranks 16 cudaDev 4 "
                 "nvmlDev 4 busId 901c0 commId 0x9c - Init START"], "nccl_init_start")
    assert (event.rank, event.nranks, event.cuda_dev, event.host, event.pid) == (4, 16, 4, "algo-1", 18061)


@pytest.mark.parametrize(("line", "version"), [
    ("NCCL version 2.18.3+cuda12.1", "2.18.3"),
    ("h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4", "2.21.5"),
    ("torch.distributed.DistBackendError: NCCL error in: x.cpp:1, invalid usage, NCCL version 2.19.3", "2.19.3"),
])
def test_nccl_version_is_x_y_z(line, version):
    assert one([line], "nccl_version").version == version


@pytest.mark.parametrize(("line", "network", "interfaces"), [
    ("h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ; OOB bond0:10.1.1.1<0>", "IB", ("bond0",)),
    ("h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0> [1]eth1:10.0.1.1<0>", "Socket", ("eth0", "eth1")),
    ("h:1:1 [0] NCCL INFO Using network IBext_v8", "IB", ()),
    ("h:1:1 [0] NCCL INFO Using network AWS Libfabric", "OFI", ()),
    ("h:1:1 [0] NCCL INFO Using internal Network Socket", "Socket", ()),
    ("h:1:1 [0] NCCL INFO NET/OFI Using aws-ofi-nccl 1.7.4-aws", "OFI", ()),
])
def test_networks(line, network, interfaces):
    event = one([line], "nccl_network")
    assert (event.network, event.interfaces) == (network, interfaces)


@pytest.mark.parametrize("line", [
    "h:1:1 [0] NCCL INFO NET/Plugin : Using internal network plugin.",
    "h:1:1 [0] NCCL INFO NET/IB : No device found.",
    "h:1:1 [0] NCCL INFO NET/Socket : 1 interfaces found",
    "h:1:1 [0] NCCL INFO Bootstrap : Using bond0:172.36.134.184<0>",
])
def test_not_a_network(line):
    assert "nccl_network" not in kinds([line])


def test_bootstrap_and_socket_ifname():
    boot = one(["h:1:1 [0] NCCL INFO Bootstrap : Using [0]ens5:172.31.0.137<0> [1]veth75:fe80::14%veth75<0>"],
               "nccl_bootstrap")
    assert (boot.interface, boot.interfaces, boot.address) == ("ens5", ("ens5", "veth75"), "172.31.0.137")
    ifname = one(["h:9:9 [4] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ^lo,docker0"], "nccl_socket_ifname")
    assert ifname.interface == "^lo,docker0"


def test_channels_give_transport_and_are_reported_once_per_process_and_peer():
    lines = [f"h:5:6 [0] NCCL INFO Channel {c:02d}/0 : 0[0] -> 8[0] [send] via NET/IB/{c % 2}/GDRDMA" for c in range(8)]
    lines += ["h:5:6 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
              "h:7:8 [1] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [receive] via NET/Socket/0",
              "h:9:9 [3] NCCL INFO Ring 00 : 3[b0] -> 0[80] via direct shared memory"]
    events = [e for e in parse_lines(lines) if e.kind == "nccl_channel"]
    assert [(e.rank, e.transport, e.network) for e in events] == [
        (0, "NET/IB/GDRDMA", "IB"), (0, "P2P/CUMEM/read", None), (1, "NET/Socket", "Socket"), (3, "SHM", None)]


def test_return_code_chains_are_not_events():
    chain = ["h:1:2 [0] NCCL INFO misc/socket.cc:49 -> 6", "h:1:2 [0] NCCL INFO init.cc:1 -> 3 [Async thread]"]
    assert parse_lines(chain) == []


def test_failure_table_records_carry_rank_host_exit_code_and_root_cause():
    table = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", "=" * 40, "train.py FAILED",
             "-" * 40, "Failures:", "[1]:", "  time      : 2024-07-10_14:44:36", "  host      : node155",
             "  rank      : 1 (local_rank: 1)", "  exitcode  : 1 (pid: 3054646)", "  error_file: <N/A>",
             "-" * 40, "Root Cause (first observed failure):", "[0]:", "  time      : 2024-07-10_14:44:35",
             "  host      : node154", "  rank      : 0 (local_rank: 0)", "  exitcode  : -6 (pid: 3054645)",
             "  traceback : Signal 6 (SIGABRT) received by PID 3054645", "=" * 40]
    events = parse_lines(table)
    records = [(e.kind, e.rank, e.host, e.exit_code) for e in events if e.exit_code is not None]
    assert records == [("worker_failed", 1, "node155", 1), ("worker_failed", 0, "node154", -6),
                       ("elastic_root_cause", 0, "node154", -6)]
    assert {e.kind for e in events} == {"worker_failed", "elastic_root_cause"}


def test_slurm_lines():
    events = parse_lines(["srun: error: jwc09n018: task 1: Exited with exit code 3",
                          "slurmstepd: error: *** JOB 494583 ON n1 CANCELLED AT 2024-04-20T09:09:37 DUE TO TIME "
                          "LIMIT ***",
                          "slurmstepd: error: *** STEP 6053.0 ON n1 CANCELLED AT 2024-04-23T12:18:08 ***"])
    assert [(e.kind, e.host, e.rank, e.exit_code) for e in events] == [
        ("slurm_task_exit", "jwc09n018", 1, 3), ("slurm_time_limit", None, None, None),
        ("slurm_cancelled", None, None, None)]


@pytest.mark.parametrize(("line", "kind"), [
    ("RuntimeError: NCCL error in: x.cpp:1, unhandled system error, NCCL version 2.10.3", "nccl_system_error"),
    ("ncclInternalError: Internal check failed.", "nccl_internal_error"),
    ("Duplicate GPU detected : rank 3 and rank 0 both on CUDA device f000", "nccl_invalid_usage"),
    ("RuntimeError: NCCL error in: x.cpp:1, unhandled cuda error, NCCL version 2.7.8", "nccl_cuda_error"),
    ("h:1:2 [0] include/alloc.h:1 NCCL WARN Cuda failure 'invalid device ordinal'", "nccl_cuda_error"),
    ("socketProgressOpt: Call to recv from 1.2.3.4<5> failed : Connection reset by peer", "nccl_remote_error"),
    ("h:1:2 [0] NCCL WARN Net : Call to recv from 1.2.3.4<5> failed : Broken pipe", "nccl_remote_error"),
    ("h:1:2 [0] NCCL WARN socketPollConnect poll() returned 1, no POLLOUT events", "network_connect_error"),
    ("h:1:2 [0] NCCL WARN NET/IB : Got completion from peer 1.2.3.4<5> with error 12, opcode 0",
     "ib_error"),
    ("h:1:2 [0] misc/ibvwrap.cc:1 NCCL WARN Call to ibv_modify_qp failed with error Invalid argument",
     "ib_error"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.36 GiB.", "cuda_oom"),
    ("[E108 20:04:34.46 socket.cpp:957] [c10d] The client socket has timed out after 900s while trying to "
     "connect to (33.1.1.1, 29500).", "rendezvous_error"),
    ("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError", "rendezvous_error"),
    ("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
     "rendezvous_error"),
    ("RuntimeError: The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
     "port_in_use"),
    ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:799] connect [1.2.3.4]:13195: Timeout",
     "gloo_error"),
    ("RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one.",
     "ddp_unused_parameters"),
    ("RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running inconsistent collective",
     "collective_mismatch"),
    ("[rank1]:[E1002 18:16:40.66 ProcessGroupNCCL.cpp:756] [Rank 1] Work WorkNCCL(SeqNum=2521, OpType=ALLREDUCE, "
     "Timeout(ms)=600000) timed out in blocking wait.", "collective_timeout"),
    ("[PG ID 0 PG GUID 0 Rank 2] Heartbeat monitor timed out! Process will be terminated after dumping debug info.",
     "collective_timeout"),
    ("W0227 17:39:41.93 1 api.py:766] Closing process 293866 via signal SIGTERM", "worker_failed"),
    ("[default] Worker group FAILED. 3/3 attempts left; will restart worker group", "worker_failed"),
])
def test_failure_kinds(line, kind):
    assert kind in kinds([line])


@pytest.mark.parametrize("line", [
    "[INFO] 2021-12-08 12:28:26,101 api: [default] Rendezvous'ing worker group",
    "h:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
    "[W819 07:35:29.37 ProcessGroupNCCL.cpp:4721] [PG ID 0 PG GUID 0 Rank 5]  using GPU 5 as device used by this "
    "process is currently unknown. This can potentially cause a hang.",
    "world_size: 2 backend_name: nccl nccl_debug: WARN nccl_socket_ifname: N/A find_unused_parameters: 0",
    "h:13:13 [0] NCCL INFO [Service thread] Connection closed by localRank 0",
    "  File \"/opt/conda/lib/python3.10/site-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py\"",
    "Epoch 3: 100%|##########| 500/500 [01:02<00:00, 8.01it/s, loss=0.31]",
])
def test_benign_lines_name_no_failure(line):
    assert not any(e.is_failure for e in parse_lines([line]))


def test_unrecognised_nccl_warn_is_kept_as_info():
    event = one(["h:1:2 [2] graph/rings.cc:38 NCCL WARN Error : ring 2 does not loop back to start (7 != 2)"],
                "nccl_warn")
    assert not event.is_failure


def test_every_kind_is_in_the_vocabulary():
    vocabulary = set(FAILURE_KINDS) | set(INFO_KINDS)
    assert len(FAILURE_KINDS) == 32 and not set(FAILURE_KINDS) & set(INFO_KINDS)
    for path in CORPUS.glob("*.log"):
        assert {e.kind for e in parse_lines(path.read_text(errors="replace").split("\n"))} <= vocabulary


def test_network_name_table():
    assert [network_name(n) for n in ("IB", "IBext_v8", "Socket", "AWS Libfabric", "OFI", "Plugin", "FasTrak")] == [
        "IB", "IB", "Socket", "OFI", "OFI", None, "FasTrak"]


@pytest.mark.parametrize(("text", "expected"), [
    ("E0213 12:07:20.086000 870572 api.py:869] x", ((2 * 32 + 13) * 24 + 12) * 3600 + 7 * 60 + 20.086),
    ("[E108 20:04:34.5 socket.cpp:957]", ((1 * 32 + 8) * 24 + 20) * 3600 + 4 * 60 + 34.5),
    ("[2024-04-10 16:02:56,193] x", ((4 * 32 + 10) * 24 + 16) * 3600 + 2 * 60 + 56.193),
    ("2024-12-04T05:27:42.076Z", ((12 * 32 + 4) * 24 + 5) * 3600 + 27 * 60 + 42.076),
    ("gpu4:12:34 [0] NCCL INFO no time here", None),
])
def test_timestamps(text, expected):
    got = timestamp(text)
    assert got == pytest.approx(expected) if expected is not None else got is None


def test_origin_of_a_bare_line_is_empty():
    assert origin("RuntimeError: boom") == origin("")


# --- incremental use ------------------------------------------------------------------------------------

def _feed_all(lines: list[str]) -> list[Event]:
    parser = LineParser()
    out: list[Event] = []
    for line in lines:
        out += parser.feed(line + "\n")
    return out + parser.flush()


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.log")), ids=lambda p: p.name)
def test_incremental_feed_equals_whole_file_parse(path: Path):
    lines = path.read_bytes().decode("utf-8", "replace").split("\n")
    assert _feed_all(lines) == parse_lines(lines)


def test_corpus_concatenated_in_one_stream_equals_files_parsed_alone_for_failures():
    """State from one file must not leak into the next (after a blank line)."""
    per_file, stream = [], []
    for path in sorted(CORPUS.glob("*.log")):
        lines = path.read_bytes().decode("utf-8", "replace").rstrip("\n").split("\n") + [""]
        per_file += [e.kind for e in parse_lines(lines) if e.is_failure]
        stream += lines
    assert [e.kind for e in parse_lines(stream) if e.is_failure] == per_file


def test_a_long_line_is_held_until_the_next_line_or_flush():
    parser = LineParser()
    long_error = "RuntimeError: CUDA out of memory. " + "Tried to allocate 2.00 GiB " * 4
    assert parser.feed(long_error) == []
    assert [e.kind for e in parser.flush()] == ["cuda_oom"]
    assert parser.feed(long_error) == []
    assert [e.kind for e in parser.feed("next line")] == ["cuda_oom"]


def test_events_are_frozen_and_equal_to_constructed_ones():
    event = one(["[rank1]: RuntimeError: CUDA out of memory."], "cuda_oom")
    assert event == Event(line=1, kind="cuda_oom", text="[rank1]: RuntimeError: CUDA out of memory.", rank=1)
    with pytest.raises(AttributeError):
        event.rank = 2  # type: ignore[misc]
    assert hash(event) == hash(Event(**{f: getattr(event, f) for f in event.__dataclass_fields__}))


# --- robustness -----------------------------------------------------------------------------------------

_noise = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300)
_pieces = st.sampled_from(["NCCL INFO ", "NCCL WARN ", "[rank3]:", "h:1:2 [0] ", "\r", "\x1b[31m", "[0m ",
                           "Init COMPLETE", " via NET/IB/0", " -> ", "exitcode  : ", "[7]:", "Using network ",
                           "Bootstrap : Using ", "SeqNum=", "NCCL version ", "Root Cause", "  rank : x"])
_lines = st.lists(st.one_of(_noise, st.lists(st.one_of(_pieces, _noise), max_size=6).map("".join)), max_size=30)


@settings(max_examples=300, deadline=None)
@given(_lines)
def test_arbitrary_text_never_raises_and_feed_matches_parse(lines):
    events = parse_lines(lines)
    assert all(e.kind in set(FAILURE_KINDS) | set(INFO_KINDS) for e in events)
    assert all(1 <= e.line <= max(len(lines), 1) for e in events)
    parser = LineParser()
    fed = [e for line in lines for e in parser.feed(line)] + parser.flush()
    assert fed == events
    for line in lines:
        classify(line)


# --- the cheap tests in front of the rules must never hide a match ------------------------------------------

def _reference_kinds(text: str) -> set[str]:
    """Every failure rule's regex tried on the text: no gate, no token test."""
    from cockpit.logs.parse import rules as parse_rules

    nccl = "NCCL" in text or "nccl" in text
    return {rule.kind for rule in parse_rules._RULES
            if rule.pattern.search(text) and (nccl or not rule.nccl_only)
            and (rule.unless is None or rule.unless.search(text) is None)}


def _corpus_lines() -> list[str]:
    return [line for path in sorted(CORPUS.glob("*.log"))
            for line in path.read_bytes().decode("utf-8", "replace").split("\n")]


def _gated(line: str) -> bool:
    """Lines the rules see: NCCL's own (not INFO), or other output holding one of the plain gate's words."""
    from cockpit.logs.parse import rules as parse_rules

    if "NCCL" in line or "nccl" in line:
        return " INFO " not in line
    return parse_rules._PLAIN_GATE.search(line) is not None


def test_rule_tokens_never_hide_a_failure_on_corpus_lines():
    gated = [line for line in _corpus_lines() if _gated(line)]
    assert len(gated) > 150
    for line in gated:
        found = {kind for kind, _ in classify(line) if kind in FAILURE_KINDS}
        assert found == _reference_kinds(line), line


@pytest.mark.parametrize("line", [
    "BrokenPipeError: [Errno 32] Broken pipe", "Net : Call to recv from 1.2.3.4<5> failed : Broken pipe",
    "OSError: [Errno 98] Address already in use", "CUDA out of memory. Tried to allocate 20.00 MiB",
    "*** JOB 7 ON n1 CANCELLED AT 2024-04-20T09:09:37 DUE TO TIME LIMIT ***", "Parameters which did not receive grad "
    "for rank 3: w", "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000",
    "Net : Connection closed by remote peer n2<4>", "Timed out after 901 seconds waiting for clients. 1/2 joined",
])
def test_the_plain_gate_lets_standalone_failure_lines_through(line):
    assert _gated(line) and _reference_kinds(line)
    assert {kind for kind, _ in classify(line)} == _reference_kinds(line)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([
    "unhandled system error", "ncclInternalError", "internal error", "invalid usage", "Duplicate GPU detected",
    "unhandled cuda error", "Cuda failure 'x'", "Failed to CUDA calloc", "Connection closed by remote peer",
    "Connection reset by peer", "Broken pipe", "Connection refused", "socketPollConnect",
    "Connect to 1.2.3.4<5> failed",
    "Call to ibv_reg_mr failed", "got completion with error", "CUDA out of memory", "torch.OutOfMemoryError",
    "RendezvousTimeoutError", "DistStoreError", "The client socket has timed out", "TCPStore failed",
    "Address already in use", "errno: 98", "third_party/gloo/", "did not receive grad", "mismatch between collectives",
    "ChildFailedError", "failed (exitcode: 1)", "closing signal SIGTERM", "Worker group FAILED", "DUE TO TIME LIMIT",
    "CANCELLED AT 2024", "srun: error: n1: task 0: Exited with exit code 1", "ran for 5 milliseconds before timing out",
    "watchdog got stuck for 9 seconds", "NCCL", "NCCL INFO", "NCCL WARN", " ", "x", "[rank1]:",
    "NET/IB : Got completion from peer 1.2.3.4<5> with status=12", "vendor err 129", "GID index 3 invalid",
    "Error while creating shared memory segment /dev/shm/nccl-x", "No space left on device", "/dev/shm",
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=1", "uncorrectable ECC error", "Detected 1 oom_kill event",
    "DUE TO NODE FAILURE", "DUE TO PREEMPTION", "Mismatched NCCL version detected", "Message truncated : received",
    "Received 15 death signal", "KeyboardInterrupt", "terminate called without an active exception",
    "Killing subprocess 12", "exits with return code = -9", "Read error [1.2.3.4]:5", "gloo",
    "DistNetworkError", "Failed to recv, got 0 bytes"]), max_size=5).map(
    " ".join))
def test_rule_tokens_never_hide_a_failure_on_generated_lines(line):
    found = {kind for kind, _ in classify(line) if kind in FAILURE_KINDS}
    reference = _reference_kinds(line)
    if _gated(line):
        assert found == reference, line
    else:
        assert found <= reference
