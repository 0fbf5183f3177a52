"""A run's first failure from its exit records (to the nanosecond), for cockpit.insight.diagnosis: the launcher's own
death, an early exit, a mismatch gloo aborted, else the first failing rank with its own log's words and its place
when it ended. Where a run has exit records, their finding replaces the logs' (torchelastic's table has 1-second
timestamps and takes the lowest rank on a tie)."""

from __future__ import annotations

from pathlib import Path

from cockpit.hang.words import rank_list
from cockpit.run.records import FirstFailure
from cockpit.run.store import RunStatus


def _places(logs: dict) -> dict:
    """Each rank's place when it ended (cockpit.insight.cause.place_of), for the ranks that left one."""
    from cockpit.insight.cause import place_of
    from cockpit.run.store import tail_lines

    out = {}
    for rank, (_host, path) in logs.items():
        try:
            stacks = Path(str(path)[:-len(".log")] + ".stacks").read_text(encoding="utf-8", errors="replace")
        except OSError:
            stacks = ""
        place = place_of(stacks[-200_000:], tail_lines(path, 200))
        if place is not None:
            out[rank] = place
    return out


def first_failure(findings: tuple, status: RunStatus, logs: dict, report,
                   run_dir: Path) -> tuple[tuple, object]:
    """The first-failure finding and the run's root cause (cockpit.logs.diagnose.model.Cause) from the exit
    records: the launcher's own death, an early exit, a mismatch gloo aborted, else the first failing rank with
    its own log's words. The exit records (to the nanosecond) say it better than torchelastic's table (1-second
    timestamps, the lowest rank on a tie) or the logs' order: where a run has them, their finding replaces the
    logs'."""
    from cockpit.insight.cause import LAUNCHER_HINT, launcher_death, oom_kill
    from cockpit.logs.diagnose.model import MAX_EVIDENCE, Cause, Finding
    from cockpit.logs.parse.kinds import HOST_OOM

    others = tuple(f for f in findings if f.code != "first_failure")
    death = launcher_death(status)
    if death is not None:
        host, how = death
        ended = rank_list([int(r) for r in status.ranks])
        title = f"First failure: the launcher (torchrun on {host}) was {how}; {ended} were ended with it"
        cause = Cause(f"the launcher (torchrun on {host}) was {how}", None, host, "launcher", "outside")
        return (Finding("error", "first_failure", title, LAUNCHER_HINT, ()), *others), cause
    first = status.first_failure
    if first is None or first.rank is None:
        return findings, None
    oom = oom_kill(run_dir, first)
    if oom is not None:  # the node's OOM-kill count rose as the rank died of SIGKILL: its log cannot say more
        words, hint, files = oom
        evidence = tuple((str(path), _line_count(path)) for path in files[:MAX_EVIDENCE])
        title = f"First failure (exit records): rank {first.rank} on {first.host}: {first.description}: {words}"
        return ((Finding("error", "first_failure", title, hint, evidence), *others),
                Cause(words, first.rank, first.host, HOST_OOM, "resources", evidence))
    places = _places(logs)
    if first.status == 0 or (first.teardown_abort and _peers_lost(status, logs, first.rank)):
        return _early_exit(others, status, first, logs, places)  # a rank that ended its work while others waited
    return _failed_rank(findings, first, logs, report, places)


def _peers_lost(status: RunStatus, logs: dict, rank: int) -> bool:
    """Whether every other failed rank's log says it lost its peer (cockpit.logs.diagnose.peerloss)."""
    from cockpit.logs.diagnose.peerloss import lost_a_peer
    from cockpit.run.store import tail_lines

    others = [int(r) for r, e in status.ranks.items() if e.status != 0 and int(r) != rank]
    return bool(others) and all(r in logs and lost_a_peer(tail_lines(logs[r][1], 40)) for r in others)


def _early_exit(others: tuple, status: RunStatus, first: FirstFailure, logs: dict,
                places: dict) -> tuple[tuple, object]:
    from cockpit.logs.diagnose.model import Cause, Finding
    from cockpit.logs.diagnose.peerloss import EARLY_EXIT_HINT

    rank = first.rank
    victims = sorted(int(r) for r, e in status.ranks.items() if e.status != 0 and int(r) != rank)
    from cockpit.insight.cause import places_said

    waited = places_said([v for v in victims if v in places], places, "was", "were")
    title = f"First failure (exit records): rank {rank} on {first.host}: {first.description}"
    who = rank_list(victims) if victims else "the others"
    ended = "exited with code 0" if first.status == 0 else "ended its script (then aborted in teardown)"
    words = f"rank {rank} {ended} while {who} still waited " \
            f"for it in a collective" + (f" ({waited})" if waited else "")
    log = logs.get(rank)
    evidence = ((str(log[1]), _line_count(log[1])),) if log else ()
    cause = Cause(words, rank, first.host, "early_exit", "code", evidence)
    hint = f"An early exit: {words}. Fix: {EARLY_EXIT_HINT}."
    return (Finding("error", "first_failure", title + (f"; {waited}" if waited else ""), hint, evidence),
            *others), cause


def _failed_rank(findings: tuple, first, logs: dict, report, places: dict) -> tuple[tuple, object]:
    from cockpit.insight.cause import mismatch, read_source
    from cockpit.logs.diagnose.cause import cause_of, is_root
    from cockpit.logs.diagnose.model import Cause, Finding
    from cockpit.logs.parse.kinds import COLLECTIVE_MISMATCH

    rank = first.rank
    log = logs.get(rank)
    own = [(f.path, e) for f in report.files for e in f.events
           if log is not None and Path(f.path) == log[1] and is_root(e)]
    aborted = {r: e.text for f in report.files for e in f.events if e.kind == COLLECTIVE_MISMATCH
               for r, (_h, p) in logs.items() if Path(f.path) == p}
    found = mismatch(places, aborted, read_source) if aborted else None
    named = [f for f in findings if f.code == "first_failure"]
    if found is not None:
        ev = next(((p, e.line) for p, e in own if e.kind == COLLECTIVE_MISMATCH), None)
        cause = Cause(found.words, found.uneven if found.uneven is not None else rank, first.host,
                      "uneven_inputs" if found.uneven is not None else COLLECTIVE_MISMATCH, "code",
                      (ev,) if ev else ())
        mine = Finding("error", "first_failure", f"First failure (exit records): rank {rank} on {first.host}: "
                       f"{first.description}: {found.words}", found.hint, (ev,) if ev else ())
        code = "uneven_inputs" if found.uneven is not None else COLLECTIVE_MISMATCH
        rest = [f for f in findings if f.code not in ("first_failure", COLLECTIVE_MISMATCH)]
        detail = Finding("error", code, found.title, found.hint, (ev,) if ev else ())
        return (mine, detail, *rest), cause
    cause = cause_of(*own[0]) if own else Cause(f"rank {rank} was {first.description}", rank, first.host,
                                                 "signal" if first.signal else "exit", "unknown")
    if not named and (log is None or first.description.startswith("killed by SIGTERM")):
        return findings, cause  # no agent table (a script that spawns its ranks, Slurm): name a rank with a log
    evidence = ((str(log[1]), line_of(log[1], "Traceback")),) if log else ()
    hint = named[0].hint if named else ("the other ranks' errors follow from this one: read its log from the "
                                        "evidence line and fix it first")
    said = _exception_of(report, log[1]) if log and report is not None else None
    if said is None and log and not first.signal and first.description.startswith("exit code") \
            and not _has(log[1], "Traceback"):
        said = "no traceback: the script exited by itself (sys.exit, os._exit); its last lines say why"
    mine = Finding("error", "first_failure", f"First failure (exit records): rank {rank} on {first.host}: "
                   f"{first.description}" + (f": {said}" if said else ""), hint, evidence)
    return (mine, *(f for f in findings if f.code != "first_failure")), cause


def _exception_of(report, path: Path) -> str | None:
    """The last line of the first Python exception in ``path`` as the report parsed it, in its own words (one a
    kind names, such as no_gpu's "RuntimeError: Distributed package doesn't have NCCL built in", included)."""
    from cockpit.logs.diagnose.cause import exception_words
    from cockpit.logs.parse.ends import is_exception_line
    from cockpit.logs.parse.kinds import NO_GPU, PYTHON_EXCEPTION

    for f in report.files:
        if Path(f.path) == path:
            e = next((e for e in f.events if e.kind == PYTHON_EXCEPTION
                      or (e.kind == NO_GPU and is_exception_line(e.text))), None)
            if e is not None:
                return exception_words(e.text)
    return None


def _line_count(path: Path) -> int:
    """The number of the log's last line (1 for an empty or unreadable log)."""
    try:
        with open(path, "rb") as f:
            return max(sum(1 for _ in f), 1)
    except OSError:
        return 1


def _has(path: Path, text: str) -> bool:
    """Whether a line of the log holds ``text`` (an unreadable log: True, nothing is claimed of it)."""
    from cockpit.logs.diagnose.report import read_lines

    try:
        return any(text in line for line in read_lines(path, follow=False))
    except OSError:
        return True


def line_of(path: Path, text: str) -> int:
    """The line number of the last line holding ``text``; where none does, the log's last line (a rank that
    ended without a traceback, by sys.exit or os._exit, stopped there), 1 for an empty or unreadable log."""
    from cockpit.logs.diagnose.report import read_lines

    found, n = None, 0
    try:
        for n, line in enumerate(read_lines(path, follow=False), 1):  # bounded, regular files only
            if text in line:
                found = n
    except OSError:
        pass
    return found or max(n, 1)
