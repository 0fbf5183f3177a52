"""The first-failure finding and the uncaught-exception finding: where a job's failure started, in words.

Pure; rules like those of ``rules`` (every (path, event) pair of the job in, findings out), on the
causal model of ``cause``. The first failure is named for a job whose logs show two processes or more
failing, or where torchelastic names a root cause; a single process that raised gets the exception finding.
A rank is named only where the logs decide it: torchelastic's root-cause record (the rank's own log says why
when it is there), the earliest timestamped root cause, or the one process with a root cause. A rank whose
own log says only that it lost its peer is no cause: the finding says so and offers no fix.
"""

from __future__ import annotations

from collections.abc import Sequence

from cockpit.logs.diagnose.cause import (
    ENDING_KINDS,
    earliest,
    exception_words,
    in_words,
    is_consequence,
    is_failure,
    is_root,
)
from cockpit.logs.diagnose.model import Finding, Located, evidence_of, one_process, rank_list, unit_of, world_ranks
from cockpit.logs.parse.kinds import ELASTIC_ROOT_CAUSE, LAUNCH_FAILED, PROCESS_DIED, PYTHON_EXCEPTION
from cockpit.logs.parse.parser import Event

HINT = ("Start from this process's own output: errors on the other ranks (remote errors, timeouts, the launcher's "
        "SIGTERMs) are usually consequences of it.")
VICTIM_HINT = ("This rank only lost its peer: the process at the other end of its connection ended first (a crash, "
               "an exit, a kill). Read the other ranks' own logs; no setting of this rank fixes it.")


def first_failure(located: Sequence[Located]) -> list[Finding]:
    """The rank that failed first: torchelastic's root cause (with its own log's words), else the earliest root
    cause of two or more failed processes (see the module docstring)."""
    roots = [(p, e) for p, e in located if e.kind == ELASTIC_ROOT_CAUSE]
    if roots:
        return [_elastic(located, roots)]
    failures = [(p, e) for p, e in located if e.kind in ENDING_KINDS and (e.rank is not None or e.host)]
    if len(failures) < 2:  # one process at most, without a pass over every event for the ranks
        return []
    ranks = world_ranks(e for _, e in located)
    if len({(p, *unit_of(e, ranks)) for p, e in failures}) < 2:
        return []
    causes = [loc for loc in failures if is_root(loc[1])]
    first = earliest(causes)
    if first is not None:
        path, e = first
        how = "earliest timestamp" if e.ts is not None else "the only process with a cause"
        return [Finding("error", "first_failure", f"First failure ({how}): {one_process(e)}: {_what(e)}", HINT,
                        evidence_of([first]))]
    if causes:  # several processes, nothing tells which came first: name them all, no rank
        who = rank_list(e.rank for _, e in causes if e.rank is not None)
        title = (f"Failures on ranks {who} with nothing to tell which came first" if who else
                 "Failures on several processes with nothing to tell which came first")
        return [Finding("error", "first_failure", f"{title}: {_what(causes[0][1])}", HINT, evidence_of(causes))]
    return []


def _what(e: Event) -> str:
    return exception_words(e.text) if e.kind == PYTHON_EXCEPTION else e.kind


def _elastic(located: Sequence[Located], roots: Sequence[Located]) -> Finding:
    """torchelastic's root cause (of several records, the earliest): what its own log says, where it is here."""
    timed = [loc for loc in roots if loc[1].ts is not None]
    path, root = min(timed, key=lambda loc: loc[1].ts or 0.0) if timed else roots[0]
    own = own_failures(located, path, root)
    causes = [loc for loc in own if is_root(loc[1])]
    if causes:
        p, e = causes[0]
        return Finding("error", "first_failure", f"First failure (torchelastic root cause, its own log): "
                       f"{one_process(e) or 'a worker'}: {_what(e)}", HINT, evidence_of(causes[:1]))
    code = f" with exit code {root.exit_code}" if root.exit_code is not None else ""
    lost = [loc for loc in own if is_consequence(loc[1])]
    elsewhere = earliest([(p, e) for p, e in located if is_root(e) and e.rank != root.rank]) if lost else None
    if elsewhere is not None:  # torchelastic's 1-second clock named the rank that lost its peer
        p, e = elsewhere
        return Finding("error", "first_failure", f"First failure (its own log; torchelastic named the rank that "
                       f"lost its peer): {one_process(e) or 'a worker'}: {_what(e)}", HINT,
                       evidence_of([elsewhere, (path, root)]))
    if lost:
        return Finding("error", "first_failure", f"First failure (torchelastic root cause): "
                       f"{one_process(root) or 'a worker'} exited{code} after losing its peer ({in_words(lost[0][1])})",
                       VICTIM_HINT, evidence_of([(path, root), *lost[:1]]))
    return Finding("error", "first_failure", f"First failure (torchelastic root cause): "
                   f"{one_process(root) or 'a worker'} exited{code}", HINT, evidence_of([(path, root)]))


def own_failures(located: Sequence[Located], root_path: str, root: Event) -> list[Located]:
    """The failures in the root-cause rank's own output (another file than the launcher's table, or lines of
    that rank in a merged log), first first: its exception or failure says why, where the table only says
    that it exited."""
    if root.rank is None:
        return []
    return [(path, e) for path, e in located if e.rank == root.rank and is_failure(e)
            and e.kind not in ("worker_failed", ELASTIC_ROOT_CAUSE) and (path != root_path or e.line != root.line)]


def _on(e: Event) -> str:
    who = one_process(e)
    return f" on {who}" if who else ""


def uncaught_exception(located: Sequence[Located]) -> list[Finding]:
    """A Python exception that ended a process, one finding for all of them (the first in its own words): an
    exception of any type is a failure, even one no other rule names."""
    raised = [(p, e) for p, e in located if e.kind == PYTHON_EXCEPTION]
    if not raised:
        return []
    causes = [loc for loc in raised if is_root(loc[1])]
    if not causes:  # "NCCL communicator was aborted", a lost peer: the job failed, its cause is elsewhere
        _, e = raised[0]
        return [Finding("error", "uncaught_exception", f"Uncaught exception{_on(e)}: {exception_words(e.text)}",
                        "This exception only reports an earlier failure (a communicator aborted after an error or a "
                        "timeout, a peer that went away): the cause is on this or another rank, before these lines.",
                        evidence_of(raised))]
    raised = causes
    _, e = raised[0]
    who = one_process(e)
    title = f"Uncaught exception{' on ' + who if who else ''}: {exception_words(e.text)}"
    others = len({exception_words(x.text) for _, x in raised}) - 1
    if others > 0:
        title += f" (and {others} other exception{'s' if others > 1 else ''})"
    return [Finding("error", "uncaught_exception", title,
                    "The traceback above this line says where it was raised: fix it in the code (no setting "
                    "changes it). Errors of other ranks after it are usually consequences.", evidence_of(raised))]


def process_died(located: Sequence[Located]) -> list[Finding]:
    """A shell's or faulthandler's report that a process was killed by a signal ("Killed", "Segmentation fault
    (core dumped)"): the job failed, even where nothing else says why."""
    died = [(p, e) for p, e in located if e.kind == PROCESS_DIED]
    if not died:
        return []
    _, e = died[0]
    return [Finding("error", "process_died", f"A process was killed by a signal{_on(e)}: {exception_words(e.text)}",
                    "'Killed' (SIGKILL) is usually the kernel's OOM killer or a scheduler (dmesg | grep -i 'killed "
                    "process' on the node); a segmentation fault or bus error is a crash in native code (a driver, an "
                    "extension; SIGBUS also a full /dev/shm).", evidence_of(died))]


def launch_failed(located: Sequence[Located]) -> list[Finding]:
    """A Slurm step or task that never started: the job failed before any of its code ran."""
    failed = [(p, e) for p, e in located if e.kind == LAUNCH_FAILED]
    if not failed:
        return []
    _, e = failed[0]
    return [Finding("error", "launch_failed", f"A Slurm step or task failed to launch: {exception_words(e.text)}",
                    "Nothing of the job ran there: check the program exists in the step's environment (module, "
                    "container, PATH for execve), the node named, and `scontrol show job` for the step's state.",
                    evidence_of(failed))]
