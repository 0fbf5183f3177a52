"""What one log record says: the failure patterns, and the dispatch that sends NCCL lines to ``nccl``.

Pure and stdlib-only. ``classify(text)`` turns the text of one record (a line, or a hard-wrapped line
joined back) into ``(kind, fields)`` hits, kinds from ``kinds``; ``parser.LineParser`` adds line
numbers, hosts and ranks.

Speed matters (a 2M-line log should parse in seconds), so every pattern hides behind a cheap test: an
NCCL INFO line (most of a debug log) must hold one of ``_INFO_GATE``'s words, other output one of
``_PLAIN_GATE``'s, and a failure rule's regex runs only where one of its tokens is. Patterns
match literal wording printed by NCCL, PyTorch, torchelastic, gloo and Slurm; a kind is reported only where
that wording is present (an NCCL return code alone, ``-> 3``, names no kind).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cockpit.logs.parse.ends import CPP_THROW, is_exception_line, plugin_failed, process_end
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
    NCCL_WARN,
    NETWORK_CONNECT_ERROR,
    NO_GPU,
    PORT_IN_USE,
    PYTHON_EXCEPTION,
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
    WATCHDOG_DETECTED,
    WORKER_FAILED,
    Hit,
)
from cockpit.logs.parse.nccl import info_facts, nccl_facts
from cockpit.logs.parse.trie import any_word


@dataclass(frozen=True, slots=True)
class _Rule:
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


def _rule(kind: str, tokens: tuple[str, ...], pattern: str, unless: tuple[str, ...] = (), **kw: object) -> _Rule:
    words = re.compile("|".join(re.escape(w) for w in unless)) if unless else None
    return _Rule(kind, tokens, re.compile(pattern), unless=words, **kw)  # type: ignore[arg-type]


# Slurm's own programs print their RPC errors with their name in front ("srun: error: slurm_receive_msgs:
# [[n1]:6818] failed: Socket timed out on send/recv operation", "slurmstepd: error: ... Connection refused"): the
# scheduler's control connections, not the job's network (slurmstepd's cancel, OOM and exit lines still count).
_SLURM_RPC = ("srun: error: slurm_", "slurmstepd: error: slurm_", "slurmd: error", "slurmstepd: error: _",
              "srun: error: _", "slurm_send", "slurm_receive", "slurm_persist_conn", "slurm_open_msg_conn",
              "Socket timed out on send/recv", "Zero Bytes were transmitted or received",
              "Communication connection failure", "persistent connection")

_RULES: tuple[_Rule, ...] = (
    # torch's watchdog (ProcessGroupNCCL.cpp, 1.x to 2.8+) and the Flight Recorder dump a timeout triggers:
    # "Timeout at NCCL work: N, last enqueued ...", "Received a dump signal due to a collective timeout from
    # (this local rank|rank N)", "Received a global timeout from another rank".
    # The Flight Recorder's own lines when the watchdog caught a failed collective (WorkNCCL::printTraceback:
    # "Stack trace of the failed collective: ..."; dumpDebuggingInfo: "ProcessGroupNCCL preparing to dump debug
    # info."): in practice a timeout.
    _rule(COLLECTIVE_TIMEOUT, ("iming out", "imed out", "stuck", "atchdog", "Timeout at ", "collective timeout",
                               "global timeout", "failed collective", "dump debug info"),
          r"ran for \d+ milliseconds before timing out|timed out in blocking wait|watchdog got stuck for \d+ "
          r"seconds|Heartbeat monitor timed out|Watchdog caught collective operation timeout|Timeout at \w+ work: "
          r"\d+|dump signal due to a collective timeout|Received a global timeout from another rank|"
          r"Stack trace of the failed collective|ProcessGroup\w* preparing to dump debug info",
          unless=_SLURM_RPC),
    _rule(NCCL_SYSTEM_ERROR, ("ystem",), r"unhandled system error|ncclSystemError"),
    _rule(NCCL_INTERNAL_ERROR, ("nternal",), r"ncclInternalError|internal error", nccl_only=True),
    _rule(NCCL_INVALID_USAGE, ("nvalid", "Duplicate GPU"),
          r"invalid usage|ncclInvalidUsage|Duplicate GPU detected"),
    _rule(NCCL_CUDA_ERROR, ("cuda error", "CudaError", "Cuda failure", "to CUDA"),
          r"unhandled cuda error|ncclUnhandledCudaError|Cuda failure\b|Failed to CUDA \w+"),
    # gloo's tcp pair prints the same errno text ("Read error [10.0.0.1]:5: Connection reset by peer").
    _rule(NCCL_REMOTE_ERROR, ("emote", "reset by peer", "Broken pipe"),
          r"remote process exited or there was a network error|ncclRemoteError|onnection closed by remote "
          r"peer|Connection reset by peer|Broken pipe", unless=("gloo", "Gloo", "error [", *_SLURM_RPC)),
    # IB / RoCE wording (verbs calls, completions, GIDs, ports) is ib_error, however the socket call ends.
    _rule(NETWORK_CONNECT_ERROR, ("onnect", "No route", "unreachable"),
          r"Connection refused|socket\w*Connect\b|Connect to \S+ failed|No route to host|"
          r"Network is unreachable|Connection timed out", unless=("ibv_", "NET/IB", *_SLURM_RPC)),
    _rule(IB_ERROR, ("ibv_", "ompletion", "NET/IB", "GID", "vendor", "not active"),
          r"ot completion (?:from peer \S+ )?with (?:error|status)|vendor[ _]err|ibv_\w+\b[^\n]{0,40}?\b"
          r"(?:failed|error)|ailed to (?:call )?ibv_\w+|NET/IB\w*/?\w* ?:[^\n]{0,300}?(?:[Ff]ail|[Ee]rror|"
          r"[Uu]nable|GID|not active|[Cc]ould not|fatal)|GID (?:index|table)\b[^\n]{0,80}?(?:invalid|fail|"
          r"not|error|changed)|[Pp]ort \d+ (?:is )?(?:not active|down|DOWN)",
          unless=("collective mismatch error",)),
    _rule(CUDA_OOM, ("out of memory", "OutOfMemory", "OUT_OF_MEMORY", "MemoryAllocation"),
          r"(?:CUDA|Cuda|cuda|HIP)\b[^\n]{0,24}?out of memory|OutOfMemoryError|'out of memory'|"
          r"CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation"),
    # Host memory: the kernel's OOM killer (mm/oom_kill.c: "Out of memory: Killed process N (python)", "Memory
    # cgroup out of memory: Kill process", "oom-kill:constraint=", "invoked oom-killer"), torch's CPU allocator
    # (c10/core/impl/alloc_cpu.cpp: "DefaultCPUAllocator: can't allocate memory" / "not enough memory"), Python's
    # MemoryError, C++'s std::bad_alloc. Slurm's cgroup report ("oom_kill event") is slurm_oom_kill.
    _rule(HOST_OOM, ("ut of memory: Kill", "oom-kill", "oom_kill_process", "allocate memory", "not enough memory",
                     "MemoryError", "bad_alloc"),
          r"(?:Out of memory|[Mm]emory cgroup out of memory): Kill(?:ed)? process|oom-kill:constraint=|invoked "
          r"oom-killer|oom_kill_process|DefaultCPUAllocator: (?:can't allocate memory|not enough memory)|"
          r"(?<![\w.])(?:builtins\.)?MemoryError\b|std::bad_alloc", unless=("oom_kill event", "oom-kill event")),
    # A store read that timed out (TCPStore.cpp, Utils.hpp, c10d_logger): "wait timeout after 600000ms, keys:",
    # "Socket Timeout", "Timeout waiting for key", "waitForInput: socket N timed out after", "barrier timeout
    # after": a waiter; the rank that should have written the key is the cause.
    _rule(STORE_TIMEOUT, ("timeout after", "Socket Timeout", "Timeout waiting for key", "waitForInput",
                          "recvValueWithTimeout"),
          r"[Ww]ait timeout after \d+ ?ms, keys|Socket Timeout|Timeout waiting for key|waitForInput: socket "
          r"\S+ timed out|barrier timeout after \d+ ?ms|recvValueWithTimeout failed", unless=_SLURM_RPC),
    # torch's DistStoreError / DistNetworkError and torchelastic's Rendezvous*Error, the TCPStore client's
    # socket messages; a bind that failed because the port is taken is port_in_use alone.
    _rule(RENDEZVOUS_ERROR, ("endezvous", "Store", "client socket", "imed out", "DistNetwork", "got 0 bytes",
                             "C10d store"),
          r"Rendezvous\w*(?:Error|Exception)|DistStoreError|DistNetworkError|client socket has (?:timed out|"
          r"failed to connect)|TCPStore\b[^\n]{0,300}?(?:timed out|failed|[Ee]rror)|store[ _]based[ _]barrier"
          r"[^\n]{0,300}?[Tt]imed out|imed out[^\n]{0,300}?(?:store[ _]based[ _]barrier|waiting for clients)|"
          r"[Ff]ailed to recv, got 0 bytes|connection to the C10d store",
          unless=("already in use", "errno: 98", "wait timeout after", "Wait timeout after", "Socket Timeout",
                  "Timeout waiting for key", "waitForInput: socket", *_SLURM_RPC)),
    _rule(PORT_IN_USE, ("in use", "errno", "EADDRINUSE"), r"Address already in use|errno:? 98\b|EADDRINUSE"),
    # gloo's pair.cc enforces "op.preamble.length <= op.nbytes" (torch's copy adds "Is there a distributed
    # collective mismatch in your code?") and "roffset + length <= size": ranks called collectives of other sizes.
    _rule(COLLECTIVE_MISMATCH, ("ismatch", "nconsistent", "truncated", "preamble"),
          r"ismatch between collectives|running inconsistent collective|[Mm]essage truncated : receiv|"
          r"mismatch in collective sizes|distributed collective mismatch|Mismatched collective detected|"
          r"collective mismatch (?:around rank|error)|op\.preamble\.length <= op\.nbytes|"
          r"op\.preamble\.roffset \+ op\.preamble\.length <= op\.buf->size_"),
    _rule(GLOO_ERROR, ("gloo", "Gloo", "error [", "closed by peer ["),
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
    _rule(NO_GPU, ("NCCL built in", "compiled with CUDA", "accelerator device", "No CUDA GPUs", "supported with GPUs",
                   "NVIDIA driver", "'_cuda_"),
          r"doesn't have NCCL built in|Torch not compiled with CUDA enabled|Cannot access accelerator device when "
          r"none is available|No CUDA GPUs are available|ProcessGroupNCCL is only supported with GPUs|Found no "
          r"NVIDIA driver on your system|'torch\._C' has no attribute '_cuda_\w+'"),
    _rule(DDP_UNUSED_PARAMETERS, ("finished reduction", "receive grad"),
          r"Expected to have finished reduction in the prior iteration|did not receive grad"),
    _rule(NCCL_VERSION_MISMATCH, ("ismatch",), r"Mismatched NCCL version|NCCL version mismatch"),
    _rule(SHM_EXHAUSTED, ("shared memory", "shm", "unable to write"),
          r"rror while (?:creating|attaching to) shared memory segment|failed to extend \S*shm\S* to|"
          r"/dev/shm[^\n]{0,200}?No space left|No space left on device[^\n]{0,200}?/dev/shm|"
          r"unable to write to file </torch_|out of shared memory|insufficient shared memory|"
          r"shm\.h:\d+ NCCL WARN Call to posix_fallocate failed"),  # NCCL < 2.12's include/shm.h
    _rule(GPU_XID, ("Xid",), r"NVRM: Xid \([^)\n]{0,80}\): (\d+)"),
    # The driver's "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus." (no Xid on the line), "RmInitAdapter
    # failed", nvidia-smi's "Unable to determine the device handle for GPU ...: GPU is lost" / "Unknown Error",
    # NVML's "GPU_IS_LOST" and "has fallen off the bus or has otherwise become inaccessible".
    _rule(GPU_LOST, ("fallen off", "GPU is lost", "GPU_IS_LOST", "RmInitAdapter", "device handle"),
          r"fallen off the bus|GPU is lost|GPU_IS_LOST|RmInitAdapter failed|Unable to determine the device "
          r"handle for GPU", unless=("NVRM: Xid",)),
    _rule(GPU_ECC, ("ECC", "DBE"),
          r"[Uu]ncorrectable (?:ECC|ecc) error|[Uu]ncontained ECC|Contained ECC error|\(DBE\) has been detected"),
    _rule(WORKER_FAILED, ("ChildFailed", "(exitcode", "Root Cause", "signal", "group FAILED", "subprocess",
                          "return code", "died with", "non-zero exit"),
          r"ChildFailedError|failed \(exitcode: -?\d+\)|Root Cause \(first observed failure\)|closing signal "
          r"SIG\w+|Closing process \d+ via signal|Worker group FAILED|Killing subprocess \d+|exits with return "
          r"code = -?\d+|died with <Signals\.SIG\w+|returned non-zero exit status"),
    _rule(STOP_REQUESTED, ("death signal", "KeyboardInterrupt", "stop requested", "got signal"),
          r"Received (?:\d+|Signals\.SIG\w+|SIG\w+) death signal|KeyboardInterrupt|\[cockpit\] stop requested|"
          r"SignalException: Process \d+ got signal: (?:2|15)\b"),
    _rule(TEARDOWN_ABORT, ("terminate called",), r"terminate called without an active exception"),
    _rule(SLURM_OOM_KILL, ("oom_kill", "oom-kill", "Out Of Memory", "memory limit"),
          r"oom[-_]kill event|Exceeded (?:job|step) memory limit|task \S+: Out Of Memory"),
    _rule(SLURM_NODE_FAIL, ("NODE FAIL", "Node failure", "NODE_FAIL"),
          r"DUE TO NODE FAIL|Node failure on|NODE_FAIL"),
    _rule(SLURM_PREEMPTED, ("PREEMPT",), r"DUE TO PREEMPTION|PREEMPTED"),
    _rule(SLURM_TIME_LIMIT, ("TIME LIMIT",), r"DUE TO TIME LIMIT"),
    _rule(SLURM_CANCELLED, ("CANCELLED",), r"CANCELLED AT",
          unless=("DUE TO TIME LIMIT", "DUE TO NODE FAIL", "DUE TO PREEMPTION")),
    # srun's launch.c: "%s: task %s: Exited with exit code %d", or strsignal()'s words for a signal;
    # slurmstepd's mgr.c: "get_exit_code task %u died by signal: %d".
    _rule(SLURM_TASK_EXIT, ("xited with", "died by signal", "srun: error:"),
          r"srun: error: ([^\s:]+): tasks? ([\d,\-\[\]]+): (?:Exited with exit code (-?\d+)|(?:Killed|Terminated|"
          r"Segmentation fault|Aborted|Bus error|Floating point exception|Illegal instruction|Hangup|Interrupt)\b)|"
          r"get_exit_code task (\d+) died by signal: \d+"),
)
_ECC_XIDS = frozenset({48, 63, 64, 94, 95})
"""Xids NVIDIA's XID catalogue files under memory errors: DBE (48), row remapping (63, 64), contained and
uncontained ECC (94, 95)."""
# Outside NCCL's own wording every failure message also carries one of these ("RuntimeError: ...",
# "failed (exitcode: 1)", "closing signal", "timed out"): a shorter regex is a cheaper first test for the
# many lines of application output. A token a rule needs may be left out where every line it matches holds one
# of these anyway (slurmstepd's "error:", the CPU allocator's "RuntimeError"); a test tries every rule on the
# corpus without the gate.
_PLAIN_GATE = re.compile(
    r"rror|ail|AIL|imed out|onnect|signal|out of memory|Broken pipe|in use|receive grad|Duplicate GPU|CANCELLED|"
    r"Xid|ECC|shm|shared memory|oom_kill|oom-kill|Out Of Memory|OUT_OF_MEMORY|memory limit|PREEMPT|KeyboardInterrupt|"
    r"stop requested|terminate called|subprocess|return code|died with|non-zero exit|xception|truncated|"
    r"ismatch|timeout after|Timeout|fallen off|GPU is lost|GPU_IS_LOST|device handle|ut of memory: Kill|Killed|"
    r"Segmentation fault|Aborted|oint exception|Illegal instruction")
# An NCCL INFO line is an event only if it holds one of these (facts, or "Call to connect ... refused").
_INFO_GATE = re.compile(r" via | -> |Using|Init |version|NCCL_SOCKET_IFNAME|onnection|rror|ail|imed out|NET/OFI|"
                        r"Plugin load")



def trigger_words() -> tuple[str, ...]:
    """Every word ``classify`` needs to see before it can report anything: the two gates' words, every rule's
    tokens, and what ``nccl_facts`` and the watchdog line look for; and ``exitcode`` for the failure table.
    A text with none of them classifies to nothing (``gate`` relies on it; a test checks it). None holds
    a digit (``_digit_free``). Not ``_INFO_GATE``'s " -> ": it lets an INFO line through only to be told apart
    from a return-code chain (``info_facts``), and such a line gives nothing without another of these words (it
    was half of the scanner's marks on a rank log: every channel line holds it beside " via ")."""
    words = [*_PLAIN_GATE.pattern.split("|"), *(w for w in _INFO_GATE.pattern.split("|") if w != " -> "),
             *(token for rule in _RULES for token in rule.tokens),
             "version", "NCCL_SOCKET_IFNAME", "watchdog at work", "NCCL WARN", "exitcode", "NET/OFI",
             "Traceback ("]
    return tuple(dict.fromkeys(_digit_free(w) for w in words))


def _digit_free(word: str) -> str:
    """The longest piece of ``word`` without a digit: the gate tests a line's template (digits made ``0``) and
    the scanner its bytes, which agree only on words without one ("C10d store" was in neither's answer for the
    other's lines). A piece finds every line the word does, and a few more that classify to nothing."""
    return max(re.split(r"\d+", word), key=len)


_SEQ = re.compile(r"SeqNum=(\d+)")
_OP = re.compile(r"OpType=(\w+)")
_TIMEOUT_MS = re.compile(r"Timeout\(ms\)=(\d+)")
_RAN_FOR = re.compile(r"ran for (\d+) milliseconds")
_STUCK = re.compile(r"got stuck for (\d+) seconds")
_EXITCODE = re.compile(r"(?:exitcode\s*:|return code =)\s*(-?\d+)")
_WATCHDOG_WORK = re.compile(r"detected by watchdog at work(?: sequence id)?: (\d+)")


def _failure_fields(rule: _Rule, m: re.Match[str], text: str) -> dict[str, object]:
    """The parsed details of one failure hit (watchdog numbers, exit codes, Slurm task and host)."""
    kind = rule.kind
    if kind == COLLECTIVE_TIMEOUT:
        fields: dict[str, object] = {}
        for key, pattern in (("seq", _SEQ), ("timeout_ms", _TIMEOUT_MS), ("elapsed_ms", _RAN_FOR)):
            found = pattern.search(text)
            if found:
                fields[key] = int(found[1])
        op = _OP.search(text)
        if op:
            fields["op"] = op[1]
        stuck = _STUCK.search(text)
        if stuck and "elapsed_ms" not in fields:
            fields["elapsed_ms"] = int(stuck[1]) * 1000
        return fields
    if kind == GPU_XID:
        return {"xid": int(m[1])}
    if kind == WORKER_FAILED:
        code = _EXITCODE.search(text)
        return {"exit_code": int(code[1])} if code else {}
    if kind == SLURM_TASK_EXIT:
        if m[4] is not None:  # slurmstepd's "task N died by signal"
            return {"rank": int(m[4])}
        fields = {"host": m[1]}
        if m[3] is not None:
            fields["exit_code"] = int(m[3])
        if m[2].isdigit():
            fields["rank"] = int(m[2])
        return fields
    return {}


_ANY_TOKEN = any_word(list(dict.fromkeys(token for rule in _RULES for token in rule.tokens)))
"""Whether any rule's token is in a text, in one search (most records that reach the rules hold none: an NCCL
INFO line let through by "ail" of "available", a plain line by "rror" of a message no rule names)."""


def _failures(text: str, nccl: bool, hits: list[Hit]) -> None:
    if _ANY_TOKEN.search(text) is None:
        return
    for rule in _RULES:
        for token in rule.tokens:
            if token in text:
                break
        else:
            continue
        if rule.nccl_only and not nccl:
            continue
        m = rule.pattern.search(text)
        if m and (rule.unless is None or rule.unless.search(text) is None):
            hits.append((rule.kind, _failure_fields(rule, m, text)))
            if rule.kind == GPU_XID and int(m[1]) in _ECC_XIDS:
                hits.append((GPU_ECC, {}))


def classify(text: str) -> list[Hit]:
    """The kinds of event in one record's text, with their parsed fields, in a fixed order. A record with no
    failure but a Python exception's last line gives ``python_exception`` (a fact: the first-failure rule
    looks for it in a rank's own log)."""
    if "NCCL" not in text and "nccl" not in text:
        if _PLAIN_GATE.search(text) is None:
            return []
        hits: list[Hit] = []
        _failures(text, False, hits)
        if not hits:
            process_end(text, hits)
        return hits
    if " INFO " in text:
        if _INFO_GATE.search(text) is None:
            return []
        facts = info_facts(text)
        if facts is None:
            return []
        if not facts:
            _failures(text, True, facts)
            plugin_failed(text, facts)
        return facts
    hits = []
    nccl_facts(text, hits)
    if "watchdog at work" in text:
        m = _WATCHDOG_WORK.search(text)
        if m:
            hits.append((WATCHDOG_DETECTED, {"seq": int(m[1])}))
    before = len(hits)
    _failures(text, True, hits)
    plugin_failed(text, hits)
    if len(hits) == before:
        if "NCCL WARN" in text:
            hits.append((NCCL_WARN, {}))
        elif is_exception_line(text) or CPP_THROW in text:  # "RuntimeError: NCCL communicator was aborted."
            hits.append((PYTHON_EXCEPTION, {}))
    return hits
