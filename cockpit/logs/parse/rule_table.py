"""The failure rules ``rules.classify`` tries on a record: for each kind, the tokens that must be present
before its regex runs, the regex, and the words that hand a match to another kind. Pure data and stdlib-only;
moved out of cockpit.logs.parse.rules unchanged (its dispatch and gates stay there)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cockpit.logs.parse.kinds import (
    COLLECTIVE_MISMATCH,
    COLLECTIVE_TIMEOUT,
    CUDA_OOM,
    DDP_UNUSED_PARAMETERS,
    GLOO_ERROR,
    GPU_ECC,
    GPU_LOST,
    GPU_XID,
    HOST_OOM,
    IB_ERROR,
    NCCL_CUDA_ERROR,
    NCCL_INTERNAL_ERROR,
    NCCL_INVALID_USAGE,
    NCCL_REMOTE_ERROR,
    NCCL_SYSTEM_ERROR,
    NCCL_VERSION_MISMATCH,
    NETWORK_CONNECT_ERROR,
    NO_GPU,
    PORT_IN_USE,
    RENDEZVOUS_ERROR,
    SHM_EXHAUSTED,
    SLURM_CANCELLED,
    SLURM_NODE_FAIL,
    SLURM_OOM_KILL,
    SLURM_PREEMPTED,
    SLURM_TASK_EXIT,
    SLURM_TIME_LIMIT,
    STOP_REQUESTED,
    STORE_TIMEOUT,
    TEARDOWN_ABORT,
    WORKER_FAILED,
)


@dataclass(frozen=True, slots=True)
class Rule:
    kind: str
    tokens: tuple[str, ...]
    """Substrings, one of which every match of ``pattern`` contains: the cheap test before the regex. A test
    checks this against trying every rule's regex on every line."""
    pattern: re.Pattern[str]
    nccl_only: bool = False
    """Only on lines that mention NCCL (for wording other libraries use too, e.g. 'internal error')."""
    unless: re.Pattern[str] | None = None
    """Substrings that hand the line to another kind (a time-limit cancel is not a plain cancel, a gloo
    "Connection reset by peer" is no NCCL error), as one alternation, tried only on a match."""


def rule(kind: str, tokens: tuple[str, ...], pattern: str, unless: tuple[str, ...] = (), **kw: object) -> Rule:
    words = re.compile("|".join(re.escape(w) for w in unless)) if unless else None
    return Rule(kind, tokens, re.compile(pattern), unless=words, **kw)  # type: ignore[arg-type]


# Slurm's own programs print their RPC errors with their name in front ("srun: error: slurm_receive_msgs:
# [[n1]:6818] failed: Socket timed out on send/recv operation", "slurmstepd: error: ... Connection refused"): the
# scheduler's control connections, not the job's network (slurmstepd's cancel, OOM and exit lines still count).
SLURM_RPC = ("srun: error: slurm_", "slurmstepd: error: slurm_", "slurmd: error", "slurmstepd: error: _",
              "srun: error: _", "slurm_send", "slurm_receive", "slurm_persist_conn", "slurm_open_msg_conn",
              "Socket timed out on send/recv", "Zero Bytes were transmitted or received",
              "Communication connection failure", "persistent connection")

RULES: tuple[Rule, ...] = (
    # torch's watchdog (ProcessGroupNCCL.cpp, 1.x to 2.8+) and the Flight Recorder dump a timeout triggers:
    # "Timeout at NCCL work: N, last enqueued ...", "Received a dump signal due to a collective timeout from
    # (this local rank|rank N)", "Received a global timeout from another rank".
    # The Flight Recorder's own lines when the watchdog caught a failed collective (WorkNCCL::printTraceback:
    # "Stack trace of the failed collective: ..."; dumpDebuggingInfo: "ProcessGroupNCCL preparing to dump debug
    # info."): in practice a timeout.
    rule(COLLECTIVE_TIMEOUT, ("iming out", "imed out", "stuck", "atchdog", "Timeout at ", "collective timeout",
                               "global timeout", "failed collective", "dump debug info"),
          r"ran for \d+ milliseconds before timing out|timed out in blocking wait|watchdog got stuck for \d+ "
          r"seconds|Heartbeat monitor timed out|Watchdog caught collective operation timeout|Timeout at \w+ work: "
          r"\d+|dump signal due to a collective timeout|Received a global timeout from another rank|"
          r"Stack trace of the failed collective|ProcessGroup\w* preparing to dump debug info",
          unless=SLURM_RPC),
    rule(NCCL_SYSTEM_ERROR, ("ystem",), r"unhandled system error|ncclSystemError"),
    rule(NCCL_INTERNAL_ERROR, ("nternal",), r"ncclInternalError|internal error", nccl_only=True),
    rule(NCCL_INVALID_USAGE, ("nvalid", "Duplicate GPU"),
          r"invalid usage|ncclInvalidUsage|Duplicate GPU detected"),
    rule(NCCL_CUDA_ERROR, ("cuda error", "CudaError", "Cuda failure", "to CUDA"),
          r"unhandled cuda error|ncclUnhandledCudaError|Cuda failure\b|Failed to CUDA \w+"),
    # gloo's tcp pair prints the same errno text ("Read error [10.0.0.1]:5: Connection reset by peer").
    rule(NCCL_REMOTE_ERROR, ("emote", "reset by peer", "Broken pipe"),
          r"remote process exited or there was a network error|ncclRemoteError|onnection closed by remote "
          r"peer|Connection reset by peer|Broken pipe", unless=("gloo", "Gloo", "error [", *SLURM_RPC)),
    # IB / RoCE wording (verbs calls, completions, GIDs, ports) is ib_error, however the socket call ends.
    rule(NETWORK_CONNECT_ERROR, ("onnect", "No route", "unreachable"),
          r"Connection refused|socket\w*Connect\b|Connect to \S+ failed|No route to host|"
          r"Network is unreachable|Connection timed out", unless=("ibv_", "NET/IB", *SLURM_RPC)),
    rule(IB_ERROR, ("ibv_", "ompletion", "NET/IB", "GID", "vendor", "not active"),
          r"ot completion (?:from peer \S+ )?with (?:error|status)|vendor[ _]err|ibv_\w+\b[^\n]{0,40}?\b"
          r"(?:failed|error)|ailed to (?:call )?ibv_\w+|NET/IB\w*/?\w* ?:[^\n]{0,300}?(?:[Ff]ail|[Ee]rror|"
          r"[Uu]nable|GID|not active|[Cc]ould not|fatal)|GID (?:index|table)\b[^\n]{0,80}?(?:invalid|fail|"
          r"not|error|changed)|[Pp]ort \d+ (?:is )?(?:not active|down|DOWN)",
          unless=("collective mismatch error",)),
    rule(CUDA_OOM, ("out of memory", "OutOfMemory", "OUT_OF_MEMORY", "MemoryAllocation"),
          r"(?:CUDA|Cuda|cuda|HIP)\b[^\n]{0,24}?out of memory|OutOfMemoryError|'out of memory'|"
          r"CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation"),
    # Host memory: the kernel's OOM killer (mm/oom_kill.c: "Out of memory: Killed process N (python)", "Memory
    # cgroup out of memory: Kill process", "oom-kill:constraint=", "invoked oom-killer"), torch's CPU allocator
    # (c10/core/impl/alloc_cpu.cpp: "DefaultCPUAllocator: can't allocate memory" / "not enough memory"), Python's
    # MemoryError, C++'s std::bad_alloc. Slurm's cgroup report ("oom_kill event") is slurm_oom_kill.
    rule(HOST_OOM, ("ut of memory: Kill", "oom-kill", "oom_kill_process", "allocate memory", "not enough memory",
                     "MemoryError", "bad_alloc"),
          r"(?:Out of memory|[Mm]emory cgroup out of memory): Kill(?:ed)? process|oom-kill:constraint=|invoked "
          r"oom-killer|oom_kill_process|DefaultCPUAllocator: (?:can't allocate memory|not enough memory)|"
          r"(?<![\w.])(?:builtins\.)?MemoryError\b|std::bad_alloc", unless=("oom_kill event", "oom-kill event")),
    # A store read that timed out (TCPStore.cpp, Utils.hpp, c10d_logger): "wait timeout after 600000ms, keys:",
    # "Socket Timeout", "Timeout waiting for key", "waitForInput: socket N timed out after", "barrier timeout
    # after": a waiter; the rank that should have written the key is the cause.
    rule(STORE_TIMEOUT, ("timeout after", "Socket Timeout", "Timeout waiting for key", "waitForInput",
                          "recvValueWithTimeout"),
          r"[Ww]ait timeout after \d+ ?ms, keys|Socket Timeout|Timeout waiting for key|waitForInput: socket "
          r"\S+ timed out|barrier timeout after \d+ ?ms|recvValueWithTimeout failed", unless=SLURM_RPC),
    # torch's DistStoreError / DistNetworkError and torchelastic's Rendezvous*Error, the TCPStore client's
    # socket messages; a bind that failed because the port is taken is port_in_use alone.
    rule(RENDEZVOUS_ERROR, ("endezvous", "Store", "client socket", "imed out", "DistNetwork", "got 0 bytes",
                             "C10d store"),
          r"Rendezvous\w*(?:Error|Exception)|DistStoreError|DistNetworkError|client socket has (?:timed out|"
          r"failed to connect)|TCPStore\b[^\n]{0,300}?(?:timed out|failed|[Ee]rror)|store[ _]based[ _]barrier"
          r"[^\n]{0,300}?[Tt]imed out|imed out[^\n]{0,300}?(?:store[ _]based[ _]barrier|waiting for clients)|"
          r"[Ff]ailed to recv, got 0 bytes|connection to the C10d store",
          unless=("already in use", "errno: 98", "wait timeout after", "Wait timeout after", "Socket Timeout",
                  "Timeout waiting for key", "waitForInput: socket", *SLURM_RPC)),
    rule(PORT_IN_USE, ("in use", "errno", "EADDRINUSE"), r"Address already in use|errno:? 98\b|EADDRINUSE"),
    # gloo's pair.cc enforces "op.preamble.length <= op.nbytes" (torch's copy adds "Is there a distributed
    # collective mismatch in your code?") and "roffset + length <= size": ranks called collectives of other sizes.
    rule(COLLECTIVE_MISMATCH, ("ismatch", "nconsistent", "truncated", "preamble"),
          r"ismatch between collectives|running inconsistent collective|[Mm]essage truncated : receiv|"
          r"mismatch in collective sizes|distributed collective mismatch|Mismatched collective detected|"
          r"collective mismatch (?:around rank|error)|op\.preamble\.length <= op\.nbytes|"
          r"op\.preamble\.roffset \+ op\.preamble\.length <= op\.buf->size_"),
    rule(GLOO_ERROR, ("gloo", "Gloo", "error [", "closed by peer ["),
          r"gloo/transport/|third_party/gloo/|Gloo connectFullMesh failed|gloo::\w*(?:Error|Exception)|"
          r"EnforceNotMet[^\n]{0,300}gloo|enforce fail at [^\n]{0,300}gloo|"
          r"ProcessGroupGloo[^\n]{0,300}?(?: failed|Error|timed out)|(?:Read|Write) error \[[^\]\n]{1,80}\]|"
          r"Connection closed by peer \[",
          unless=("distributed collective mismatch", "op.preamble.", "Socket Timeout")),
    # A script written for GPUs where torch sees none, in torch's own words: distributed_c10d.py ("Distributed
    # package doesn't have NCCL built in", a CPU build), torch/cuda/__init__.py ("Torch not compiled with CUDA
    # enabled"), the accelerator API ("Cannot access accelerator device when none is available."), c10/cuda
    # ("No CUDA GPUs are available", "Found no NVIDIA driver on your system"), ProcessGroupNCCL.cpp
    # ("ProcessGroupNCCL is only supported with GPUs, no GPUs found!"); and a CPU build's torch.cuda.set_device,
    # which raises "module 'torch._C' has no attribute '_cuda_setDevice'" (torch 2.13.0+cpu).
    rule(NO_GPU, ("NCCL built in", "compiled with CUDA", "accelerator device", "No CUDA GPUs", "supported with GPUs",
                   "NVIDIA driver", "'_cuda_"),
          r"doesn't have NCCL built in|Torch not compiled with CUDA enabled|Cannot access accelerator device when "
          r"none is available|No CUDA GPUs are available|ProcessGroupNCCL is only supported with GPUs|Found no "
          r"NVIDIA driver on your system|'torch\._C' has no attribute '_cuda_\w+'"),
    rule(DDP_UNUSED_PARAMETERS, ("finished reduction", "receive grad"),
          r"Expected to have finished reduction in the prior iteration|did not receive grad"),
    rule(NCCL_VERSION_MISMATCH, ("ismatch",), r"Mismatched NCCL version|NCCL version mismatch"),
    rule(SHM_EXHAUSTED, ("shared memory", "shm", "unable to write"),
          r"rror while (?:creating|attaching to) shared memory segment|failed to extend \S*shm\S* to|"
          r"/dev/shm[^\n]{0,200}?No space left|No space left on device[^\n]{0,200}?/dev/shm|"
          r"unable to write to file </torch_|out of shared memory|insufficient shared memory|"
          r"shm\.h:\d+ NCCL WARN Call to posix_fallocate failed"),  # NCCL < 2.12's include/shm.h
    rule(GPU_XID, ("Xid",), r"NVRM: Xid \([^)\n]{0,80}\): (\d+)"),
    # The driver's "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus." (no Xid on the line), "RmInitAdapter
    # failed", nvidia-smi's "Unable to determine the device handle for GPU ...: GPU is lost" / "Unknown Error",
    # NVML's "GPU_IS_LOST" and "has fallen off the bus or has otherwise become inaccessible".
    rule(GPU_LOST, ("fallen off", "GPU is lost", "GPU_IS_LOST", "RmInitAdapter", "device handle"),
          r"fallen off the bus|GPU is lost|GPU_IS_LOST|RmInitAdapter failed|Unable to determine the device "
          r"handle for GPU", unless=("NVRM: Xid",)),
    rule(GPU_ECC, ("ECC", "DBE"),
          r"[Uu]ncorrectable (?:ECC|ecc) error|[Uu]ncontained ECC|Contained ECC error|\(DBE\) has been detected"),
    rule(WORKER_FAILED, ("ChildFailed", "(exitcode", "Root Cause", "signal", "group FAILED", "subprocess",
                          "return code", "died with", "non-zero exit"),
          r"ChildFailedError|failed \(exitcode: -?\d+\)|Root Cause \(first observed failure\)|closing signal "
          r"SIG\w+|Closing process \d+ via signal|Worker group FAILED|Killing subprocess \d+|exits with return "
          r"code = -?\d+|died with <Signals\.SIG\w+|returned non-zero exit status"),
    rule(STOP_REQUESTED, ("death signal", "KeyboardInterrupt", "stop requested", "got signal"),
          r"Received (?:\d+|Signals\.SIG\w+|SIG\w+) death signal|KeyboardInterrupt|\[cockpit\] stop requested|"
          r"SignalException: Process \d+ got signal: (?:2|15)\b"),
    rule(TEARDOWN_ABORT, ("terminate called",), r"terminate called without an active exception"),
    rule(SLURM_OOM_KILL, ("oom_kill", "oom-kill", "Out Of Memory", "memory limit"),
          r"oom[-_]kill event|Exceeded (?:job|step) memory limit|task \S+: Out Of Memory"),
    rule(SLURM_NODE_FAIL, ("NODE FAIL", "Node failure", "NODE_FAIL"),
          r"DUE TO NODE FAIL|Node failure on|NODE_FAIL"),
    rule(SLURM_PREEMPTED, ("PREEMPT",), r"DUE TO PREEMPTION|PREEMPTED"),
    rule(SLURM_TIME_LIMIT, ("TIME LIMIT",), r"DUE TO TIME LIMIT"),
    rule(SLURM_CANCELLED, ("CANCELLED",), r"CANCELLED AT",
          unless=("DUE TO TIME LIMIT", "DUE TO NODE FAIL", "DUE TO PREEMPTION")),
    # srun's launch.c: "%s: task %s: Exited with exit code %d", or strsignal()'s words for a signal;
    # slurmstepd's mgr.c: "get_exit_code task %u died by signal: %d".
    rule(SLURM_TASK_EXIT, ("xited with", "died by signal", "srun: error:"),
          r"srun: error: ([^\s:]+): tasks? ([\d,\-\[\]]+): (?:Exited with exit code (-?\d+)|(?:Killed|Terminated|"
          r"Segmentation fault|Aborted|Bus error|Floating point exception|Illegal instruction|Hangup|Interrupt)\b)|"
          r"get_exit_code task (\d+) died by signal: \d+"),
)
ECC_XIDS = frozenset({48, 63, 64, 94, 95})
"""Xids NVIDIA's XID catalogue files under memory errors: DBE (48), row remapping (63, 64), contained and
uncontained ECC (94, 95)."""
