"""Findings from small hand-made logs built from corpus-like lines, and the report's JSON and text."""

from __future__ import annotations

import json
from pathlib import Path

from cockpit.logs.diagnose.engine import diagnose, resolve_ranks, summarize_file
from cockpit.logs.diagnose.model import rank_list
from cockpit.logs.diagnose.report import diagnose_paths, render_json, render_text, report_to_dict
from cockpit.logs.parse.parser import parse_lines

WATCHDOG = ("[rank{r}]:[E513 13:25:57.71 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for "
            "1800042 milliseconds before timing out.")


def run(**files: list[str]):
    """Diagnose in-memory logs: keyword = file name, value = its lines."""
    return diagnose([(name, parse_lines(lines)) for name, lines in files.items()])


def codes(report) -> list[str]:
    return [f.code for f in report.findings]


def finding(report, code: str):
    found = [f for f in report.findings if f.code == code]
    assert len(found) == 1, codes(report)
    return found[0]


def boot(host: str, pid: int, dev: int, iface: str, ip: str) -> str:
    return f"{host}:{pid}:{pid} [{dev}] NCCL INFO Bootstrap : Using {iface}:{ip}<0>"


def init(host: str, pid: int, rank: int, nranks: int, what: str = "COMPLETE") -> str:
    return (f"{host}:{pid}:{pid + 1} [{rank % 8}] NCCL INFO comm 0x7f{rank:02x} rank {rank} nranks {nranks} "
            f"cudaDev {rank % 8} busId {rank + 1}000 - Init {what}")


# --- interfaces -------------------------------------------------------------------------------------------

def test_loopback_bootstrap_on_two_hosts_is_an_error_with_the_fix():
    report = run(a=[boot("node1", 10, 0, "lo", "127.0.0.1"), boot("node2", 20, 0, "lo", "127.0.0.1")])
    f = finding(report, "local_interface")
    assert f.severity == "error" and "lo" in f.title and "2 hosts" in f.title
    assert "NCCL_SOCKET_IFNAME" in f.hint and "^lo,docker0" in f.hint
    assert f.evidence == (("a", 1), ("a", 2))


def test_docker_bridge_in_socket_ifname_counts_across_files():
    report = run(r0=["node1:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to docker0",
                     boot("node1", 1, 0, "docker0", "172.17.0.2")],
                 r1=[boot("node2", 2, 0, "eth0", "10.0.0.2")])
    assert "docker0" in finding(report, "local_interface").title


def test_veth_and_bridges_are_local_but_an_exclusion_list_is_fine():
    bad = run(a=["h1:1:1 [0] NCCL INFO NET/Socket : Using [0]veth12ab:10.0.0.1<0> [1]br-3f2a:10.0.1.1<0>",
                 boot("h2", 2, 0, "eth0", "10.0.0.9")])
    assert "veth12ab" in finding(bad, "local_interface").title
    ok = run(a=["h1:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ^lo,docker0",
                boot("h1", 1, 0, "eth0", "10.0.0.1"), boot("h2", 2, 0, "eth0", "10.0.0.2")])
    assert "local_interface" not in codes(ok)


def test_loopback_on_a_single_host_is_fine():
    lines = [f"[1,{r}]<stdout>:" + boot("box", 100 + r, r, "lo", "127.0.0.1") for r in range(4)]
    assert codes(run(a=lines)) == []


def test_distinct_bootstrap_addresses_count_as_hosts_when_hostnames_are_redacted():
    report = run(a=[boot("xxx", 1, 0, "lo", "10.0.0.1"), boot("xxx", 2, 0, "lo", "10.0.0.2")])
    assert "local_interface" in codes(report)


# --- versions, init, networks -----------------------------------------------------------------------------

def test_nccl_versions_differ_between_files():
    report = run(r0=["[1,0]<stdout>:NCCL version 2.18.3+cuda12.1"], r1=["[1,1]<stdout>:NCCL version 2.19.3+cuda12.2"])
    f = finding(report, "nccl_version_mismatch")
    assert "2.18.3" in f.title and "2.19.3" in f.title and "rank 1" in f.title
    assert f.evidence == (("r0", 1), ("r1", 1))
    assert codes(run(r0=["NCCL version 2.18.3+cuda12.1"], r1=["NCCL version 2.18.3+cuda12.1"])) == []


def test_ranks_that_started_but_never_completed_init_are_named():
    lines = [init("n1", 10 + r, r, 4, "START") for r in range(4)] + [init("n1", 10 + r, r, 4) for r in (0, 2)]
    f = finding(run(a=lines), "init_incomplete")
    assert f.severity == "error" and "Ranks 1,3" in f.title and "4 ranks" in f.title
    assert f.evidence == (("a", 2), ("a", 4))


def test_init_complete_for_all_ranks_is_quiet():
    assert codes(run(a=[init("n1", 10 + r, r, 4) for r in range(4)])) == []


def test_init_started_with_no_completion_at_all_is_a_warning():
    f = finding(run(a=[init("n1", 10 + r, r, 16, "START") for r in range(3)]), "init_incomplete")
    assert f.severity == "warning" and "0-2" in f.title


def test_ib_on_some_ranks_socket_on_others():
    lines = []
    for r, host in enumerate(("a1", "a2", "b1")):
        net = "Socket" if host == "b1" else "IB"
        lines += [init(host, 100 + r, r, 3), f"{host}:{100 + r}:{100 + r} [0] NCCL INFO Using network {net}"]
    f = finding(run(log=lines), "ib_fallback")
    assert "InfiniBand on ranks 0,1" in f.title and "TCP sockets on rank 2" in f.title
    assert f.evidence == (("log", 6),) and "NCCL_IB_HCA" in f.hint


def test_channel_lines_count_as_the_network_when_no_using_line_is_there():
    lines = ["g1:5:6 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
             "g2:7:8 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [receive] via NET/Socket/0"]
    assert "ib_fallback" in codes(run(a=lines))


# --- failures ---------------------------------------------------------------------------------------------

def test_watchdog_names_op_seqnum_laggard_and_silent_ranks():
    lines = [init("n1", 10 + r, r, 4) for r in range(4)]
    lines += [WATCHDOG.format(r=2, seq=532339, op="BROADCAST"), WATCHDOG.format(r=1, seq=532339, op="BROADCAST"),
              WATCHDOG.format(r=0, seq=532341, op="_ALLGATHER_BASE")]
    f = finding(run(a=lines), "collective_timeout")
    assert "BROADCAST SeqNum 532339 on ranks 1,2" in f.title
    assert "_ALLGATHER_BASE SeqNum 532341 on rank 0" in f.title
    assert "Lowest SeqNum 532339 on ranks 1,2" in f.title and "ranks 3 of 4 reported no timeout" in f.title
    assert f.evidence[:2] == (("a", 5), ("a", 6)) and "lowest SeqNum" in f.hint


def test_heartbeat_timeout_without_seqnum_still_reports():
    line = ("[rank6]:[E429 13:55:49.38 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 6] "
            "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress")
    assert finding(run(a=[line]), "collective_timeout").title == "NCCL watchdog timed out on rank 6"


def test_port_in_use_names_the_port():
    line = ("RuntimeError: The server socket has failed to listen on any local network address. The server socket "
            "has failed to bind to [::]:29500 (errno: 98 - Address already in use).")
    f = finding(run(a=[line]), "port_in_use")
    assert f.title == "Port 29500 is already in use" and "MASTER_PORT" in f.hint


def test_first_failure_is_the_earliest_timestamp_across_files():
    r0 = ["[rank0]:[E0513 13:26:10.0 x.cpp:1] [Rank 0] RuntimeError: NCCL error: remote process exited or there "
          "was a network error, NCCL version 2.18.3"]
    r3 = ["[rank3]:[E0513 13:25:57.0 x.cpp:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB"]
    report = run(r0=r0, r3=r3)
    f = finding(report, "first_failure")
    assert "rank 3" in f.title and "cuda_oom" in f.title and f.evidence == (("r3", 1),)
    assert codes(report)[0] == "first_failure"


def test_first_failure_without_timestamps_goes_by_order_and_skips_reactions():
    lines = ["WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 8 closing signal SIGTERM",
             "gpu2:11:12 [1] misc/socket.cc:1 NCCL WARN Connect to 10.0.0.1<4> failed : Connection refused",
             "gpu1:21:22 [0] misc/socket.cc:1 NCCL WARN Net : Connection closed by remote peer gpu2<5>"]
    f = finding(run(a=lines), "first_failure")
    assert "gpu2 (pid 11, GPU 1)" in f.title and f.evidence == (("a", 2),)


def test_torchelastic_root_cause_wins():
    table = ["Root Cause (first observed failure):", "[5]:", "  time      : 2024-07-10_14:44:36",
             "  host      : node7", "  rank      : 5 (local_rank: 1)", "  exitcode  : -9 (pid: 1)"]
    f = finding(run(a=table), "first_failure")
    assert f.title == "First failure (torchelastic root cause): rank 5 on node7 exited with exit code -9"


def test_generic_kinds_get_a_hint_and_consequences_sort_last():
    lines = ["srun: error: n1: task 0: Exited with exit code 1",
             "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one.",
             "slurmstepd: error: *** JOB 1 ON n1 CANCELLED AT 2024-04-20T09:09:37 DUE TO TIME LIMIT ***"]
    report = run(a=lines)
    assert codes(report) == ["ddp_unused_parameters", "slurm_time_limit", "slurm_task_exit"]
    assert "find_unused_parameters=True" in report.findings[0].hint
    assert [f.severity for f in report.findings] == ["error", "error", "error"]  # a task that failed is a failure


def test_clean_log_has_no_findings():
    lines = [boot("n1", 1, 0, "eth0", "10.0.0.1"), "NCCL version 2.18.3+cuda12.1",
             "n1:1:2 [0] NCCL INFO Using network IB", init("n1", 1, 0, 1)]
    assert run(a=lines).findings == ()


# --- summaries --------------------------------------------------------------------------------------------

def test_pid_of_an_init_line_gives_the_rank_to_that_process_other_lines():
    lines = [boot("n1", 42, 3, "eth0", "10.0.0.1"), init("n1", 42, 11, 16), init("n1", 42, 1, 2),
             "n1:42:43 [3] misc/socket.cc:1 NCCL WARN Connect to 10.0.0.2<1> failed : Connection refused"]
    events = resolve_ranks(parse_lines(lines))
    assert [e.rank for e in events] == [11, 11, 1, 11]


def test_file_summary_per_rank():
    lines = [boot("n1", 42, 3, "eth0", "10.0.0.1"), "n1:42:42 [3] NCCL INFO Using network IB", init("n1", 42, 3, 8),
             "n1:42:50 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/CUMEM/read",
             "n1:42:50 [3] NCCL INFO Channel 00/0 : 3[3] -> 11[3] [send] via NET/IB/0/GDRDMA",
             "NCCL version 2.18.3+cuda12.1",
             "n1:42:43 [3] misc/socket.cc:1 NCCL WARN Connect to 10.0.0.2<1> failed : Connection refused"]
    summary = summarize_file("x.log", parse_lines(lines))
    assert (summary.nccl_version, summary.networks, summary.kinds, summary.init_complete_ranks) == (
        "2.18.3", ("IB",), ("network_connect_error",), (3,))
    (rank,) = [r for r in summary.ranks if r.rank == 3]
    assert (rank.host, rank.pid, rank.networks, rank.interface, rank.init_state) == (
        "n1", 42, ("IB",), "eth0", "complete")
    assert rank.transports == ("P2P", "NET", "GDRDMA", "CUMEM")
    assert rank.first_error is not None and rank.first_error.kind == "network_connect_error"


def test_rank_list():
    assert rank_list([7, 0, 1, 2, 3, 6, 9, 10]) == "0-3,6,7,9,10"
    assert rank_list([]) == ""


# --- report -----------------------------------------------------------------------------------------------

def test_json_shape_round_trips_with_exact_keys(tmp_path: Path):
    log = tmp_path / "rank0.log"
    log.write_bytes(b"NCCL version 2.18.3+cuda12.1\n" + WATCHDOG.format(r=0, seq=7, op="ALLREDUCE").encode()
                    + b"\nprogress 10%\rprogress 20%\rRuntimeError: CUDA out of memory.\n\xff\xfe bad bytes\n")
    report = diagnose_paths([str(log)])
    data = json.loads(render_json(report))
    assert data == report_to_dict(report)
    assert list(data) == ["files", "findings", "cause"]
    (entry,) = data["files"]
    assert list(entry) == ["path", "nccl_version", "networks", "kinds", "init_complete_ranks", "events"]
    assert (entry["path"], entry["nccl_version"], entry["kinds"]) == (
        str(log), "2.18.3", ["collective_timeout", "cuda_oom"])
    assert [list(e) for e in entry["events"]] == [["line", "kind", "rank", "host", "text"]] * 3
    assert [(e["line"], e["kind"], e["rank"]) for e in entry["events"]] == [
        (1, "nccl_version", None), (2, "collective_timeout", 0), (3, "cuda_oom", None)]
    for f in data["findings"]:
        assert list(f) == ["severity", "code", "title", "hint", "evidence", "fix"]
        assert all(list(ev) == ["path", "line"] for ev in f["evidence"])


def test_text_puts_findings_first_with_evidence_and_hint_then_files():
    report = run(**{"logs/r0.log": [WATCHDOG.format(r=0, seq=7, op="ALLREDUCE")],
                    "logs/r1.log": ["NCCL version 2.18.3+cuda12.1"]})
    text = render_text(report, color=False)
    assert "\x1b" not in text
    lines = text.splitlines()
    assert lines[0].startswith("ERROR") and "Collective timeout: ALLREDUCE SeqNum 7 on rank 0" in lines[0]
    assert lines[1].strip() == "at logs/r0.log:1" and lines[2].strip().startswith("hint:")
    assert text.index("Files") > text.index("hint:")
    assert "logs/r1.log  NCCL 2.18.3" in text
    colored = render_text(report, color=True)
    assert "\x1b[1;31mERROR" in colored and colored.count("\x1b[0m") >= 2


def test_text_of_a_clean_report():
    assert render_text(run(a=["hello"])).startswith("No problems found.")


def test_read_lines_splits_on_newline_only_across_any_block_size(tmp_path: Path):
    from cockpit.logs.diagnose.report import read_lines

    data = "é1\nprogress 5%\rRuntimeError: x\n\n€ last".encode() + b"\xff"
    log = tmp_path / "x.log"
    log.write_bytes(data)
    expected = ["é1", "progress 5%\rRuntimeError: x", "", "€ last\ufffd"]
    for block in (1, 2, 3, 5, 7, 1 << 20):
        assert list(read_lines(log, block=block)) == expected
