"""The diagnose-2 kinds, each on lines written from its producer's format string (NCCL's WARN calls, the
NVIDIA driver's Xid line, slurmstepd, torchelastic, DeepSpeed's launcher, gloo's tcp pair), plus what must NOT
be read as them. Sources: NVIDIA/nccl src/misc/shmutils.cc ("Error while %s shared memory segment %s (size
%ld), error: %s (%d)"), src/transport/net_ib.cc ("NET/IB: Got completion from peer %s with status=%s(%d)
opcode=%s(%d) vendor_err=%u ..."; older "with error %d, opcode %d, len %d, vendor err %d"), src/init.cc
("Mismatched NCCL version detected : rank %d version %d rank %d version %d"), src/transport/net_socket.cc
("message truncated : receiving %d bytes instead of %d ... mismatch in collective sizes"); slurmstepd
("Detected %u oom_kill event%s in %s", "*** JOB %u ON %s CANCELLED AT %s DUE TO NODE FAILURE ***").
"""

from __future__ import annotations

import pytest

from cockpit.logs.diagnose.engine import diagnose
from cockpit.logs.parse.parser import parse_blocks, parse_lines

KINDS2 = [
    ("h1:12:34 [0] misc/shmutils.cc:87 NCCL WARN Error while creating shared memory segment "
     "/dev/shm/nccl-Mz3k1C (size 9637888), error: No space left on device (28)", "shm_exhausted"),
    ("h1:12:34 [0] NCCL WARN Error: failed to extend /dev/shm/nccl-03v824 to 9637892 bytes", "shm_exhausted"),
    ("RuntimeError: unable to write to file </torch_1734_2964413338_1>: No space left on device (28)",
     "shm_exhausted"),
    ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
     "shm_exhausted"),
    ("h1:1:2 [3] NCCL WARN Mismatched NCCL version detected : rank 0 version 21803 rank 3 version 21903",
     "nccl_version_mismatch"),
    ("h1:1:2 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB: Got completion from peer 10.0.0.2<51224> with "
     "status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129  hca mlx5_2", "ib_error"),
    ("h1:1:2 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<51224> with status=12 opcode=0 len=0 "
     "vendor err 129 (Send) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2 hca mlx5_0", "ib_error"),
    ("h1:1:2 [0] misc/ibvwrap.cc:191 NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out, "
     "on dev mlx5_0:1, curr state INIT, next state RTR, local GID index 0, local GID ::ffff:10.0.0.1", "ib_error"),
    ("h1:1:2 [0] NCCL WARN NET/IB : Unable to query port_num 1", "ib_error"),
    ("[Mon Mar  4 10:01:02 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "gpu_xid"),
    ("NVRM: Xid (PCI:0000:18:00): 13, pid=4455, name=python, Graphics SM Warp Exception", "gpu_xid"),
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "gpu_ecc"),
    ("slurmstepd: error: Detected 1 oom_kill event in StepId=4321.0. Some of the step tasks have been OOM Killed.",
     "slurm_oom_kill"),
    ("slurmstepd: error: Detected 2 oom-kill event(s) in step 77.batch cgroup.", "slurm_oom_kill"),
    ("srun: error: gpu12: task 3: Out Of Memory", "slurm_oom_kill"),
    ("slurmstepd: error: *** JOB 88 ON gpu07 CANCELLED AT 2024-05-01T10:00:00 DUE TO NODE FAILURE, SEE SLURMCTLD "
     "LOG FOR DETAILS ***", "slurm_node_fail"),
    ("srun: error: Node failure on gpu07", "slurm_node_fail"),
    ("slurmstepd: error: *** STEP 88.0 ON gpu07 CANCELLED AT 2024-05-01T10:00:00 DUE TO PREEMPTION ***",
     "slurm_preempted"),
    ("terminate called without an active exception", "teardown_abort"),
    ("W0227 17:39:41.936000 1 site-packages/torch/distributed/elastic/agent/server/api.py:719] Received "
     "Signals.SIGTERM death signal, shutting down workers", "stop_requested"),
    ("[cockpit] stop requested", "stop_requested"),
    ("KeyboardInterrupt", "stop_requested"),
    ("h1:1:2 [0] NCCL WARN NET/Socket : peer 10.0.0.2<4431> message truncated : receiving 1048576 bytes instead "
     "of 65536. If you believe your socket network is in healthy state, there may be a mismatch in collective "
     "sizes or environment settings (e.g. NCCL_PROTO, NCCL_ALGO) between ranks", "collective_mismatch"),
    ("[2024-01-01 10:00:00,000] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 4242", "worker_failed"),
    ("[2024-01-01 10:00:00,000] [ERROR] [launch.py:321:sigkill_handler] ['python', 'train.py'] exits with return "
     "code = -9", "worker_failed"),
    ("torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. Did the "
     "remote server shutdown or crash?", "rendezvous_error"),
    ("torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has "
     "failed. See inner exception for details.", "rendezvous_error"),
    ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error [10.0.0.2]:31962: "
     "Connection reset by peer", "gloo_error"),
    ("RuntimeError: Read error [10.0.0.2]:31962: Connection reset by peer", "gloo_error"),
]


@pytest.mark.parametrize(("line", "kind"), KINDS2)
def test_each_new_kind_from_its_format(line, kind):
    kinds = {e.kind for e in parse_lines([line]) if e.is_failure}
    assert kind in kinds, kinds


@pytest.mark.parametrize(("line", "kinds"), [
    # gloo's errno text is no NCCL error
    ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error [10.0.0.2]:31962: "
     "Connection reset by peer", {"gloo_error"}),
    # an IB verbs call timing out is the fabric, not a socket connect
    ("h1:1:2 [0] misc/ibvwrap.cc:191 NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out",
     {"ib_error"}),
    # a bind that failed because the port is taken is port_in_use, not also a rendezvous error
    ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
     "port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use", {"port_in_use"}),
    ("slurmstepd: error: *** JOB 88 ON gpu07 CANCELLED AT 2024-05-01T10:00:00 DUE TO PREEMPTION ***",
     {"slurm_preempted"}),
    ("NVRM: Xid (PCI:0000:3b:00): 48, pid=1, An uncorrectable double bit error (DBE) has been detected",
     {"gpu_xid", "gpu_ecc"}),
    ("terminate called after throwing an instance of 'std::runtime_error'", set()),
    ("The room is bloom-filtered; shutting down the download", set()),
])
def test_exact_kinds(line, kinds):
    assert {e.kind for e in parse_lines([line]) if e.is_failure} == kinds


def test_the_xid_number_is_a_field():
    event = next(e for e in parse_lines(["NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."])
                 if e.kind == "gpu_xid")
    assert event.text.startswith("NVRM") and event.line == 1


def test_fast_and_stdlib_gates_agree_on_the_new_lines():
    block = ("\n".join(line for line, _ in KINDS2) + "\n").encode()
    fast = parse_blocks([block])
    slow = parse_blocks([block], scan=False)
    assert [(e.line, e.kind) for e in fast] == [(e.line, e.kind) for e in slow]
    assert {kind for _, kind in KINDS2} <= {e.kind for e in slow}


def _report(*files: tuple[str, list[str]]):
    return diagnose([(path, parse_lines(lines)) for path, lines in files])


def test_two_nccl_versions_in_one_log_are_a_mismatch():
    report = _report(("job.log", ["h1:1:2 [0] NCCL INFO NCCL version 2.18.3+cuda12.1",
                                  "h2:1:2 [0] NCCL INFO NCCL version 2.19.3+cuda12.2"]))
    assert "nccl_version_mismatch" in report.files[0].kinds
    assert [f.code for f in report.findings].count("nccl_version_mismatch") == 1


def test_a_teardown_abort_after_a_crash_is_the_crash_not_a_teardown():
    crashed = _report(("rank-0.log", ["Traceback (most recent call last):", '  File "t.py", line 3',
                                      "ValueError: bad shape", "terminate called without an active exception"]))
    clean = _report(("rank-0.log", ["step 100 done", "terminate called without an active exception"]))
    assert "teardown_abort" not in crashed.files[0].kinds
    assert clean.files[0].kinds == ("teardown_abort",)


def test_a_bare_connection_reset_is_nccls_only_where_nccl_speaks():
    """The socket errno text every library prints: NCCL's in an NCCL job, gloo's in a gloo job, nothing more
    where the file already says what failed (a rendezvous store that went away)."""
    reset = "RuntimeError: Connection reset by peer"
    nccl = _report(("r.log", ["h1:1:2 [0] NCCL INFO NCCL version 2.18.3+cuda12.1", reset])).files[0].kinds
    gloo = _report(("r.log", ["RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection "
                              "closed by peer [10.0.0.2]:5112", reset])).files[0]
    store = _report(("r.log", ["torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was "
                               "likely closed.", reset])).files[0].kinds
    alone = _report(("r.log", [reset])).files[0].kinds
    assert "nccl_remote_error" in nccl
    assert "gloo_error" in gloo.kinds and "nccl_remote_error" not in gloo.kinds
    assert "rendezvous_error" in store and "nccl_remote_error" not in store
    assert alone == ("nccl_remote_error",)  # nothing else explains it: as before


def test_the_root_cause_ranks_own_exception_beats_the_failure_table():
    table = ["[0]:", "  time      : 2024-01-01_10:00:00", "  host      : n1", "  rank      : 1 (local_rank: 1)",
             "  exitcode  : 1 (pid: 12)", "  error_file: <N/A>",
             "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"]
    agent = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", "Failures:", "  <NO_OTHER_FAILURES>",
             "Root Cause (first observed failure):", *table]
    rank1 = ["step 1", "Traceback (most recent call last):", "RuntimeError: boom in the data loader"]
    files = [("agent.log", parse_lines(agent)), ("rank-1.log", parse_lines(rank1, rank=1))]
    first = next(f for f in diagnose(files).findings if f.code == "first_failure")
    assert first.evidence == (("rank-1.log", 3),), first


@pytest.mark.parametrize(("line", "code", "fix"), [
    (KINDS2[0][0], "shm_exhausted", {"container": {"shm-size": "16g"}}),
    (KINDS2[7][0], "ib_error", {"env": {"NCCL_IB_GID_INDEX": "3"}}),
    (KINDS2[15][0], "slurm_node_fail", {"slurm": {"exclude": "gpu07"}}),
    (KINDS2[12][0], "slurm_oom_kill", {"slurm": {"mem": "?"}}),
])
def test_findings_carry_a_fix_as_data(line, code, fix):
    finding = next(f for f in _report(("job.log", [line])).findings if f.code == code)
    got = finding.fix.as_dict()
    assert {key: got[key] for key in fix} == fix and finding.hint
