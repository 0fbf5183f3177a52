"""Root causes and consequences across ranks: which failure of a job started it, and what kind of remedy it needs.

A distributed job that fails prints many errors, most of them reactions: a peer that closed or reset the
connection (gloo's "Connection closed by peer", NCCL's remote error), a collective or a store read that timed out
waiting for a rank that never came, the launcher's SIGTERMs to the other workers and its failure table, a
teardown abort. Only some errors start a failure: an exception, an out-of-memory (GPU or host), a collective
mismatch, a GPU or node that broke, a network or rendezvous that could not be set up, a signal from outside.

``first_cause`` names the earliest root cause, in its own words, with the remedy it needs: ``code`` (an
exception, a mismatch: no setting fixes it), ``configuration`` (an interface, a port, /dev/shm, a fabric
setting), ``resources`` (memory), ``hardware`` (a GPU, a node), ``outside`` (the scheduler, a signal). A
configuration fix is offered only for a cause that configuration explains (``cockpit.insight.proposals``).

Pure: (path, event) pairs in, values out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cockpit.logs.diagnose.model import Cause, Located, one_process
from cockpit.logs.diagnose.peerloss import PEER_LOST
from cockpit.logs.parse.event import FAILURE_SET
from cockpit.logs.parse.kinds import (
    COLLECTIVE_MISMATCH,
    COLLECTIVE_TIMEOUT,
    CUDA_OOM,
    GLOO_ERROR,
    HOST_OOM,
    LAUNCH_FAILED,
    NCCL_REMOTE_ERROR,
    NET_PLUGIN_FALLBACK,
    PROCESS_DIED,
    PYTHON_EXCEPTION,
    RENDEZVOUS_ERROR,
    SLURM_CANCELLED,
    SLURM_TASK_EXIT,
    STOP_REQUESTED,
    STORE_TIMEOUT,
    TEARDOWN_ABORT,
    WORKER_FAILED,
)
from cockpit.logs.parse.parser import Event

CONSEQUENCE_KINDS = frozenset({NCCL_REMOTE_ERROR, COLLECTIVE_TIMEOUT, STORE_TIMEOUT, WORKER_FAILED, SLURM_TASK_EXIT,
                               SLURM_CANCELLED, STOP_REQUESTED, TEARDOWN_ABORT})
"""Kinds that only ever react to a failure elsewhere: a lost peer, a wait that timed out, the launcher's and the
scheduler's reactions, a stop, an abort at exit."""
NOT_CAUSES = frozenset({STOP_REQUESTED, TEARDOWN_ABORT, NET_PLUGIN_FALLBACK})
"""Failure-vocabulary kinds that never end a job themselves: a stop someone asked for, an abort after the work
was done, a slow network (a slowdown: its own finding, an error to fix, but no crash to explain)."""
# What a socket says when the process at the other end died: gloo (pair.cc: "Connection closed by peer",
# "Read error [a]:p: Connection reset by peer", "writev ...: Broken pipe", "Read timeout"), the store client.
_LOST = (*PEER_LOST, "Broken pipe", "Read timeout", "Write timeout", "Timed out waiting", "got 0 bytes",
         "Read error [", "Write error [", "communicator was aborted", "NCCL communicator was aborted")
_REMEDY = {
    PYTHON_EXCEPTION: "code", COLLECTIVE_MISMATCH: "code", "ddp_unused_parameters": "code",
    "nccl_invalid_usage": "code", CUDA_OOM: "resources", HOST_OOM: "resources", "slurm_oom_kill": "resources",
    "shm_exhausted": "configuration", "network_connect_error": "configuration", "port_in_use": "configuration",
    RENDEZVOUS_ERROR: "configuration", GLOO_ERROR: "configuration", "ib_error": "configuration",
    "nccl_system_error": "configuration", "nccl_internal_error": "configuration",
    "nccl_version_mismatch": "configuration", "gpu_xid": "hardware", "gpu_ecc": "hardware", "gpu_lost": "hardware",
    "nccl_cuda_error": "hardware", "slurm_node_fail": "hardware", "slurm_time_limit": "outside",
    "slurm_preempted": "outside", "no_gpu": "configuration",
}
_WORDS = {
    COLLECTIVE_MISMATCH: "called a collective its peers did not match", CUDA_OOM: "ran out of GPU memory",
    HOST_OOM: "ran out of host memory", "ddp_unused_parameters": "had parameters that received no gradient",
    "nccl_invalid_usage": "used NCCL wrongly (two ranks on one GPU?)", "gpu_xid": "had a GPU fault (Xid)",
    "gpu_ecc": "had an uncorrectable GPU memory error", "gpu_lost": "lost its GPU (gone from the bus)",
    "slurm_oom_kill": "was killed by Slurm for its memory", "shm_exhausted": "ran out of /dev/shm",
    "network_connect_error": "could not connect to its peers", "port_in_use": "found its port in use",
    RENDEZVOUS_ERROR: "could not reach the rendezvous store", GLOO_ERROR: "could not set up gloo's connections",
    "ib_error": "hit an InfiniBand error", "nccl_system_error": "hit an NCCL system error",
    "nccl_internal_error": "hit an NCCL internal error", "nccl_cuda_error": "hit a CUDA error inside NCCL",
    "nccl_version_mismatch": "ran another NCCL version than its peers", "slurm_node_fail": "lost its node",
    "slurm_time_limit": "hit the Slurm time limit", "slurm_preempted": "was preempted by Slurm",
    "no_gpu": "asked for a GPU (CUDA or NCCL) where torch sees none",
}
_GLOO_SIZES = re.compile(r"op\.preamble\.length <= op\.nbytes\. (\d+) vs (\d+)")
_RANK_PREFIX = re.compile(r"^\[[^\]]{0,40}\]:? ?")


def lost_peer(text: str) -> bool:
    """Whether a failure's text says the other end of a connection went away or never answered."""
    return any(words in text for words in _LOST)


def is_consequence(e: Event) -> bool:
    """A failure that reacts to another: a lost peer, a timeout while waiting, the launcher's reaction."""
    if e.kind in CONSEQUENCE_KINDS:
        return True
    return e.kind in (GLOO_ERROR, RENDEZVOUS_ERROR, PYTHON_EXCEPTION) and lost_peer(e.text)


ENDING_KINDS = (FAILURE_SET - NOT_CAUSES) | {PYTHON_EXCEPTION, PROCESS_DIED, LAUNCH_FAILED}
"""The kinds of ``is_failure``: a set test where a rule looks at every event of a job."""


def is_failure(e: Event) -> bool:
    """An event that ends a job: a failure kind other than ``NOT_CAUSES``, or an uncaught exception's last line
    (a KeyboardInterrupt is a stop)."""
    return e.kind in ENDING_KINDS


def is_root(e: Event) -> bool:
    """A failure that can start a job's failure on its own."""
    return is_failure(e) and not is_consequence(e)


def exception_words(text: str, limit: int = 120) -> str:
    """The exception's own words ("ValueError: bad batch at step 5"), without a launcher prefix, cut short."""
    words = _RANK_PREFIX.sub("", " ".join(text.split()))
    at = words.find("terminate called after throwing")  # a C++ throw, maybe glued to a progress bar
    words = words[at:] if at > 0 else words
    return words if len(words) <= limit else words[:limit - 1] + "…"


def in_words(e: Event) -> str:
    """What the process did, as a verb phrase: 'raised ValueError: x', 'ran out of GPU memory'."""
    if e.kind == PYTHON_EXCEPTION:
        return "raised " + exception_words(e.text)
    if e.kind == PROCESS_DIED:
        return "was killed by a signal: " + exception_words(e.text)
    if e.kind == LAUNCH_FAILED:
        return "failed to launch: " + exception_words(e.text)
    if e.kind == COLLECTIVE_MISMATCH:
        sizes = _GLOO_SIZES.search(e.text)
        if sizes:
            return (f"received {sizes[1]} bytes where its collective expected {sizes[2]}: its peer called "
                    "another collective (gloo aborted)")
    return _WORDS.get(e.kind, e.kind)


def cause_of(path: str, e: Event) -> Cause:
    """The root cause one event states ('rank 1 raised ValueError: x'; the host is a field of its own)."""
    who = f"rank {e.rank}" if e.rank is not None else one_process(e)
    return Cause(words=(f"{who} " if who else "") + in_words(e), rank=e.rank, host=e.host, kind=e.kind,
                 remedy=_REMEDY.get(e.kind, "unknown"), evidence=((path, e.line),))


def earliest(roots: Sequence[Located]) -> Located | None:
    """The root cause that came first: the earliest timestamp; without timestamps, the only process with one
    (several processes with no timestamps between them: None, no guess)."""
    if not roots:
        return None
    timed = [loc for loc in roots if loc[1].ts is not None]
    if timed:
        first = min(timed, key=lambda loc: loc[1].ts or 0.0)
        tied = {_unit(e) for _, e in timed if e.ts == first[1].ts}
        return first if len(tied) == 1 else None
    return roots[0] if len({_unit(e) for _, e in roots}) == 1 else None


def _unit(e: Event) -> tuple[object, ...]:
    return (e.rank,) if e.rank is not None else (e.host, e.pid)


def first_cause(located: Sequence[Located]) -> Cause | None:
    """The job's earliest root cause (see the module docstring); None where the logs show none, or several
    processes failed with nothing to tell which came first."""
    found = earliest([(p, e) for p, e in located if e.kind in ENDING_KINDS and is_root(e)])
    return cause_of(*found) if found is not None else None
