"""issue 26 ("trust"): the right cause or no claim. The new kinds on lines written from their producers' format
strings, what must not be read as them, and the causal model across ranks (root causes before consequences,
the fix only for a cause configuration explains, diagnose's exit status on any failure).

Sources of the lines: torch ProcessGroupNCCL.cpp ("Timeout at NCCL work: %d, last enqueued NCCL work: %d, last
completed NCCL work: %d."; getNCCLWatchdogTimeoutErrorMsg: "Received a dump signal due to a collective timeout
from %s and we will try our best to dump the debug info."), TCPStore.cpp ("wait timeout after {}ms, keys: {}"),
Utils.hpp ("Socket Timeout"); gloo transport/tcp/pair.cc (GLOO_ENFORCE_LE(op.preamble.length, op.nbytes), torch's
copy adding "Is there a distributed collective mismatch in your code?"; "Connection closed by peer %s"); NCCL 2.4-2.7
enqueue.cc ("Mismatched collective detected, please check your collective calls at and around rank %d"),
net_ib.cc ("NET/IB : collective mismatch error local size %d remote %d"); the NVIDIA driver's NV_DEV_PRINTF
("NVRM: GPU %04x:%02x:%02x.%x: GPU has fallen off the bus."), nvidia-smi ("Unable to determine the device handle
for GPU %s: GPU is lost."); aws-ofi-nccl include/nccl_ofi_log.h ("NET/OFI " prefix) and nccl_ofi_net.cpp
("Couldn't open a fabric provider"); NCCL src/net.cc ("NET/Plugin : Plugin load (%s) returned %d : %s"); Linux
mm/oom_kill.c ("Out of memory: Killed process %d (%s) total-vm:%lukB"); c10 alloc_cpu.cpp ("DefaultCPUAllocator:
not enough memory: you tried to allocate %d bytes."); Slurm's own RPC errors ("slurm_receive_msgs: [[%s]:%d]
failed: Socket timed out on send/recv operation", persist_conn.c "failed to open persistent connection to
host:%s:%d: %m").
"""

from __future__ import annotations

import pytest

from cockpit.insight.proposals import FixContext, no_fix, proposals
from cockpit.logs.diagnose.engine import diagnose
from cockpit.logs.parse.parser import parse_lines

KINDS = [
    ("[rank1]:[E1003 18:37:01.833621509 ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank 1] Timeout at NCCL work: "
     "6463, last enqueued NCCL work: 6463, last completed NCCL work: 6462.", "collective_timeout"),
    ("[rank6]:[E703 21:51:54.112 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID 0(default_pg) Rank 6] Received a dump "
     "signal due to a collective timeout from  rank 7 and we will try our best to dump the debug info.",
     "collective_timeout"),
    ("terminate called after throwing an instance of 'gloo::EnforceNotMet'\n  what():  [enforce fail at "
     "../third_party/gloo/gloo/transport/tcp/pair.cc:456] op.preamble.length <= op.nbytes. 68 vs 4. Received data "
     "size doesn't match expected size. Is there a distributed collective mismatch in your code?",
     "collective_mismatch"),
    ("  what():  [enforce fail at ../third_party/gloo/gloo/transport/tcp/pair.cc:446] op.preamble.length <= "
     "op.nbytes. 8 vs 4", "collective_mismatch"),
    ("h1:1:2 [0] NCCL WARN Mismatched collective detected, please check your collective calls at and around "
     "rank 3. You can use NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL to see the collective logs",
     "collective_mismatch"),
    ("h1:1:2 [0] NCCL WARN NET/IB : collective mismatch error local size 4096 remote 8192 addr 7f00 rkey 1 seq 2/3",
     "collective_mismatch"),
    ("[Tue Mar  5 10:01:02 2024] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.", "gpu_lost"),
    ("Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost.  Reboot the system to recover this "
     "GPU", "gpu_lost"),
    ("NVRM: GPU 0000:af:00.0: RmInitAdapter failed! (0x26:0xffff:1477)", "gpu_lost"),
    ("torch.distributed.DistStoreError: wait timeout after 600000ms, keys: /default_pg//0//cuda//0",
     "store_timeout"),
    ("[rank0]: torch.distributed.DistNetworkError: Socket Timeout", "store_timeout"),
    ("[2145.7] Out of memory: Killed process 4242 (python) total-vm:81234kB, anon-rss:7654kB, file-rss:0kB",
     "host_oom"),
    ("RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried "
     "to allocate 1099511627776 bytes.", "host_oom"),
    ("MemoryError: Unable to allocate 8.00 GiB for an array with shape (1073741824,)", "host_oom"),
]
NOT = [  # look-alikes: another kind, or none at all
    ("[rank0]:[E ProcessGroupNCCL.cpp:1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
     "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600029 milliseconds before timing out.",
     "gpu_lost"),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "gpu_lost"),  # it is gpu_xid
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "host_oom"),
    ("slurmstepd: error: Detected 1 oom_kill event in StepId=4321.0.", "host_oom"),  # slurm_oom_kill
    ("srun: error: slurm_receive_msgs: [[gpu07]:6818] failed: Socket timed out on send/recv operation",
     "store_timeout"),
    ("srun: error: slurm_receive_msgs: [[gpu07]:6818] failed: Socket timed out on send/recv operation",
     "network_connect_error"),
    ("slurmstepd: error: slurm_persist_conn_open: failed to open persistent connection to host:db1:6819: "
     "Connection refused", "network_connect_error"),
    ("slurmstepd: error: _send_launch_resp: Failed to send RESPONSE_LAUNCH_TASKS: Connection reset by peer",
     "nccl_remote_error"),
    ("terminate called after throwing an instance of 'gloo::EnforceNotMet'\n  what():  [enforce fail at "
     "../third_party/gloo/gloo/transport/tcp/pair.cc:456] op.preamble.length <= op.nbytes. 68 vs 4. Is there a "
     "distributed collective mismatch in your code?", "gloo_error"),
]


def kinds_of(text: str) -> set[str]:
    return {e.kind for e in parse_lines(text.split("\n"))}


@pytest.mark.parametrize(("line", "kind"), KINDS)
def test_each_new_wording_is_its_kind(line, kind):
    assert kind in kinds_of(line)


@pytest.mark.parametrize(("line", "kind"), NOT)
def test_look_alikes_are_not_that_kind(line, kind):
    assert kind not in kinds_of(line)


PLUGIN = [
    "h1:1:1 [0] NCCL INFO NET/Plugin : Plugin load (libnccl-net-ofi.so) returned 2 : libnccl-net-ofi.so: cannot "
    "open shared object file: No such file or directory",
    "h1:1:1 [0] NCCL INFO NET/OFI Couldn't open a fabric provider. RC: -61, ERROR: No data available",
]


def test_a_failed_ofi_plugin_then_sockets_is_a_fallback_and_no_failure():
    socket = ["h1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
              "h1:1:1 [0] NCCL INFO Using network Socket"]
    report = diagnose([("a.log", parse_lines([*PLUGIN, *socket]))])
    assert report.files[0].kinds == ("net_plugin_fallback",)
    [f] = report.findings
    assert f.severity == "error" and "sockets" in f.title and report.failed  # a slowdown to fix, no crash
    assert report.cause is None  # it explains no crash


def test_a_plugin_failure_without_sockets_after_it_or_a_missing_default_plugin_is_no_fallback():
    ofi = ["h1:1:1 [0] NCCL INFO Using network AWS Libfabric"]
    assert diagnose([("a.log", parse_lines([*PLUGIN, *ofi]))]).files[0].kinds == ()
    plain = ["h1:1:1 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
             "h1:1:1 [0] NCCL INFO NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot "
             "open shared object file", "h1:1:1 [0] NCCL INFO Using network Socket"]
    assert diagnose([("a.log", parse_lines(plain))]).files[0].kinds == ()


# --- the causal model ---------------------------------------------------------------------------------------

RANK1 = ["[rank1]: Traceback (most recent call last):", '[rank1]:   File "train.py", line 9, in <module>',
         "[rank1]: ValueError: bad batch at step 5"]
RANK0 = ["[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
         "[127.0.0.1]:51928. This is typically caused by a remote worker crashing."]


def test_the_peer_that_closed_is_a_consequence_and_the_exception_is_the_cause():
    report = diagnose([("rank-0.log", parse_lines(RANK0)), ("rank-1.log", parse_lines(RANK1))])
    first = next(f for f in report.findings if f.code == "first_failure")
    assert "rank 1" in first.title and "ValueError: bad batch at step 5" in first.title
    assert report.cause.rank == 1 and report.cause.remedy == "code"
    assert report.cause.words == "rank 1 raised ValueError: bad batch at step 5"
    gloo = next(f for f in report.findings if f.code == "gloo_error")
    assert gloo.fix is None and "peer" in gloo.title
    assert no_fix(report) == "no configuration fix: the cause is in the code (rank 1 raised ValueError: bad batch " \
                             "at step 5)"
    assert proposals(report, {}, FixContext()) == []


def test_a_gloo_connect_failure_alone_keeps_its_interface_fix():
    line = ("RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] "
            "no error")
    report = diagnose([("rank-0.log", parse_lines([line], rank=0))])
    gloo = next(f for f in report.findings if f.code == "gloo_error")
    assert gloo.fix is not None and dict(gloo.fix.env) == {"GLOO_SOCKET_IFNAME": "?"}
    assert report.cause.remedy == "configuration" and no_fix(report) is None


def test_a_victim_named_by_torchelastic_is_not_the_cause_when_another_rank_raised():
    table = ["Root Cause (first observed failure):", "[0]:", "  time      : 2024-07-10_14:44:36", "  host      : n1",
             "  rank      : 0 (local_rank: 0)", "  exitcode  : 1 (pid: 12)"]
    files = [("agent.log", parse_lines(table)), ("rank-0.log", parse_lines(RANK0, rank=0)),
             ("rank-1.log", parse_lines(RANK1, rank=1))]
    first = next(f for f in diagnose(files).findings if f.code == "first_failure")
    assert first.title.startswith("First failure (its own log; torchelastic named the rank that lost its peer): "
                                  "rank 1")


def test_a_victim_alone_is_named_as_one_and_gets_no_fix():
    table = ["Root Cause (first observed failure):", "[0]:", "  host      : n1", "  rank      : 0 (local_rank: 0)",
             "  exitcode  : 1 (pid: 12)"]
    report = diagnose([("agent.log", parse_lines(table)), ("rank-0.log", parse_lines(RANK0, rank=0))])
    first = next(f for f in report.findings if f.code == "first_failure")
    assert "exited with exit code 1 after losing its peer" in first.title and first.fix is None
    assert report.cause is None and all(f.fix is None for f in report.findings)


def test_ranks_that_raised_with_nothing_to_order_them_name_no_rank():
    r2 = ["[rank2]: KeyError: 'label'"]
    report = diagnose([("rank-1.log", parse_lines(RANK1)), ("rank-2.log", parse_lines(r2))])
    first = next(f for f in report.findings if f.code == "first_failure")
    assert first.title.startswith("Failures on ranks 1,2 with nothing to tell which came first")
    assert report.cause is None


def test_a_waiter_that_timed_out_is_never_the_first_failure():
    waits = ["[rank0]:[E1003 18:37:01.8 ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank 0] Timeout at NCCL work: "
             "12, last enqueued NCCL work: 12, last completed NCCL work: 11.",
             "[rank1]:[E1003 18:37:01.9 ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank 1] Timeout at NCCL work: "
             "12, last enqueued NCCL work: 12, last completed NCCL work: 11."]
    report = diagnose([("a.log", parse_lines(waits))])
    assert not any(f.code == "first_failure" for f in report.findings) and report.cause is None
    assert report.failed


@pytest.mark.parametrize("lines", [
    RANK1,  # the README's failure example: one rank's log ending in its traceback
    ["Traceback (most recent call last):", '  File "t.py", line 3, in <module>', "ZeroDivisionError: division by zero"],
    ["E1127 09:00:05.176 1 api.py:1002] failed (exitcode: -6) local_rank: 0 (pid: 6968) of binary: python"],
    ["srun: error: gpu3: task 2: Exited with exit code 1"],
    ["RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried to "
     "allocate 1099511627776 bytes."],
])
def test_any_failure_makes_diagnose_fail(lines):
    report = diagnose([("x.log", parse_lines(lines))])
    assert report.failed, report.findings


@pytest.mark.parametrize("lines", [
    ["step 1 loss 0.3", "step 2 loss 0.2", "done"],
    ["srun: error: slurm_receive_msgs: [[gpu07]:6818] failed: Socket timed out on send/recv operation"],
    ["W0227 17:39:41.9 1 api.py:719] Received Signals.SIGTERM death signal, shutting down workers"],
])
def test_nothing_failed_means_diagnose_succeeds(lines):
    assert not diagnose([("x.log", parse_lines(lines))]).failed


def test_an_exception_is_named_in_its_own_words():
    lines = ["Traceback (most recent call last):", "my_pkg.errors.ConfigurationProblem: no such dataset: 'imnet'"]
    report = diagnose([("x.log", parse_lines(lines))])
    [f] = report.findings
    assert f.code == "uncaught_exception" and f.severity == "error"
    assert f.title == "Uncaught exception: my_pkg.errors.ConfigurationProblem: no such dataset: 'imnet'"


@pytest.mark.parametrize("record", [
    "Nov 27 09:00:05 gpu7 kernel: NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.",
    "2024/05/01 10:00:00 worker 3 failed: torch.distributed.DistStoreError: wait timeout after 300000ms, keys: /x",
    "10:00:01.250 rank 1 MemoryError: Unable to allocate 8.00 GiB for an array",
    "ERROR torch.distributed.DistNetworkError: Socket Timeout",
])
def test_a_record_after_a_long_line_is_never_glued_onto_it(record):
    long = "epoch 3 | step 1200/5000 | loss 0.31234 | lr 2.0e-04 | grad-norm 1.234 | tokens/s 51234 | mem 41.2 GiB"
    assert len(long) >= 80
    [event] = [e for e in parse_lines([long, record]) if e.is_failure]
    assert event.text == record and event.line == 2


def test_a_real_hard_wrap_is_still_joined():
    text = ("[rank0]:[E ProcessGroupNCCL.cpp:1] [Rank 0] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600029 "
            "milliseconds before timing out.")
    lines = [text[i:i + 80] for i in range(0, len(text), 80)]
    [event] = parse_lines(lines)
    assert event.kind == "collective_timeout" and event.text == text and event.seq == 7


def test_a_cpp_throw_is_an_uncaught_exception_unless_its_what_line_names_the_failure():
    bar = "Training ━━━━━━━━╸━━━━━━━━━━━━ 19% step: 5700 loss: 0.028 :: Elapsed: 0:21:08"
    lone = [bar + "terminate called after throwing an instance of 'c10::Error'", "  what():  CUDA error: unknown error"]
    [f] = diagnose([("x.log", parse_lines(lone))]).findings
    assert f.title == "Uncaught exception: terminate called after throwing an instance of 'c10::Error'"
    gloo = ["terminate called after throwing an instance of 'gloo::EnforceNotMet'",
            "  what():  [enforce fail at ../third_party/gloo/gloo/transport/tcp/pair.cc:456] op.preamble.length <= "
            "op.nbytes. 68 vs 4. Is there a distributed collective mismatch in your code?"]
    report = diagnose([("rank-1.log", parse_lines(gloo, rank=1))])
    assert [f.code for f in report.findings] == ["collective_mismatch"]
    assert report.cause.kind == "collective_mismatch" and report.cause.remedy == "code"
    assert report.cause.words.startswith("rank 1 received 68 bytes where its collective expected 4")


@pytest.mark.parametrize("line", ["Killed", "./train.sh: line 12:  4242 Killed                  python train.py",
                                  "Segmentation fault (core dumped)", "Fatal Python error: Bus error"])
def test_a_process_killed_by_a_signal_is_a_failure(line):
    report = diagnose([("x.log", parse_lines(["step 1 loss 0.3", line]))])
    assert report.failed and [f.code for f in report.findings] == ["process_died"]


def test_the_shells_echo_of_a_teardown_abort_is_no_crash():
    lines = ["rank 0 done", "terminate called without an active exception", "Aborted (core dumped)"]
    report = diagnose([("x.log", parse_lines(lines))])
    assert [f.code for f in report.findings] == ["teardown_abort"] and not report.failed
    assert parse_lines(["Killed 3 stale workers"]) == []


@pytest.mark.parametrize("line", [
    "srun: error: Task launch for StepId=3022331.0 failed on node g1301: Invalid node name specified",
    "srun: error: Unable to create step for job 3022331: Requested node configuration is not available",
    "slurmstepd: error: execve(): torchrun: No such file or directory",
])
def test_a_step_that_failed_to_launch_is_a_failure(line):
    report = diagnose([("x.log", parse_lines([line]))])
    assert report.failed and [f.code for f in report.findings] == ["launch_failed"]
