"""How runs look on a plain terminal: `[host:rank]` prefixes (coloured when stdout is a terminal and
NO_COLOR is unset), the end-of-run summary, the `cockpit ps` table."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.insight.diagnosis import duration, health, history_line
from cockpit.run.store import UNREADABLE, FirstFailure, RankExit, RunStatus, is_sweep, rank_files
from cockpit.run.trust import owner

if TYPE_CHECKING:
    from cockpit.insight.forecast import Forecast

FOLD_OVER = 32  # a summary of more ranks than this folds its table: a row per way the ranks ended
_COLORS = ("36", "33", "35", "32", "34", "31", "96", "93", "95", "92", "94", "91")


def use_color(stream=sys.stdout) -> bool:
    """https://no-color.org: NO_COLOR (any value) turns colour off; so does a non-terminal or TERM=dumb."""
    return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


class Painter:
    def __init__(self, color: bool):
        self.color = color

    def paint(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    def prefix(self, source: tuple) -> str:
        host, rank = source
        label = f"[{host}:{rank}]"
        if not self.color:
            return label
        code = "2" if rank == "agent" else _COLORS[int(rank) % len(_COLORS)]
        return self.paint(label, code)


def last_lines(path: Path, n: int) -> list[str]:
    """The last ``n`` lines of a run's log, read from its end (cockpit.logs.bounded.tail: bounded on a 2 GiB
    log or a line of 512 MB); [] when it cannot be read or is no regular file (a FIFO, /dev/zero)."""
    from cockpit.logs.bounded import tail

    try:
        return tail(path, n)
    except OSError:
        return []


def summary(run_dir: Path, status: RunStatus, painter: Painter, tail: int = 20, exit_code: int | None = None) -> str:
    """The end-of-run report: per-rank exit and duration; on failure the first failing rank and its
    last lines. ``exit_code``: the one the command printing it exits with (`run` stopped by its own Ctrl-C:
    130), where it is not the run's own."""
    state_code = {"succeeded": "32", "failed": "31", "stopped": "33", "lost": "31", "unsubmitted": "33"}.get(
        status.state, "0")
    took = duration((status.ended or time.time()) - (status.started or status.created))
    start = status.started or status.created
    stopped = status.stop_requested and status.state == "stopped"
    out = [painter.paint(f"== {status.name} ({status.run_id}): {status.state} in {took}, "
                         f"exit code {status.exit_code if exit_code is None else exit_code} ==", state_code)]
    missing = [r for r in range(status.world_size or 0) if str(r) not in status.ranks]
    if status.ranks or (stopped and missing):
        rows: list[tuple[int, str, str, float | None]] = []
        for rank, r in sorted(status.ranks.items(), key=lambda kv: int(kv[0])):
            how = _describe(r, status.stopped_at if stopped else None)
            if how == "ok" and status.first_failure and status.first_failure.rank == r.rank:
                how = "exit code 0, early: others waited"  # an early exit (cockpit.logs.diagnose.peerloss)
            rows.append((int(rank), r.host, how, r.time - start))
        if stopped:  # killed together with their wrapper: the stop did it all the same
            host = status.hosts[0] if len(status.hosts) == 1 else "?"
            rows += [(rank, host, "stopped (no exit record)", None) for rank in missing]
        out += _exit_rows(rows) if len(rows) <= FOLD_OVER else _folded_exit_rows(rows)
    if missing and not stopped:
        out.append(f"  {len(missing)} rank(s) left no exit record (never started, or killed with their wrapper)")
    ff = status.first_failure
    from cockpit.insight.cause import launcher_death

    death = launcher_death(status)
    if ff and death:  # torchrun itself was killed: its ranks' SIGTERMs only follow from it
        out.append(painter.paint(f"first failure: the launcher (torchrun on {death[0]}) was {death[1]}; its ranks "
                                 f"were ended with it, {duration(ff.time - start)} after start", "1;31"))
    elif ff:
        out.append(painter.paint(f"first failure: rank {ff.rank} on {ff.host}: {ff.description}, "
                                 f"{duration(ff.time - start)} after start{_victim_note(status, ff)}", "1;31"))
        if ff.teardown_abort:
            from cockpit.logs.diagnose.teardown import HINT

            out.append(f"  hint: {HINT}")
        log = rank_files(run_dir, "log").get(ff.rank) if ff.rank is not None else None
        if log:
            out.append(f"last {tail} lines of {log[1]}:")
            out += [f"  | {line}" for line in last_lines(log[1], tail)]
    out += restart_lines(status, painter)
    for f in status.findings:  # cockpit.hang: stalled, stopped or straggling ranks
        out.append(painter.paint(f"{f.kind}: {f.text}", "1;31" if f.severity == "error" else "1;33"))
        out.append(f"  hint: {f.hint}")
        if f.next and not status.final:
            out.append(f"  next: {f.next}")
        if f.stacks:
            out.append(f"  every rank's stack: {f.stacks}")
    for h in status.history:  # cockpit.hang: stalls that cleared, kept with when and how long
        out.append(painter.paint(history_line(h, status.started), "1;33"))
    out.append(_forecast_line(run_dir, status))
    out += attempts_lines(status)
    if status.note:
        out.append(f"note: {status.note}")
    out.append(f"run directory: {run_dir}")
    return "\n".join(out)


def restart_lines(status: RunStatus, painter: Painter) -> list[str]:
    """torchrun's own restarts (max_restarts): each with the failure it followed (cockpit.run.restarts)."""
    from cockpit.run.restarts import restart_words

    start = status.started or status.created
    most = status.max_restarts or len(status.restarts)
    return [painter.paint(f"restart: {restart_words(r, k, most)}, {duration(r.time - start)} after start", "1;33")
            for k, r in enumerate(status.restarts, 1)]


def _exit_rows(rows: list[tuple[int, str, str, float | None]]) -> list[str]:
    """The summary's table, a row per rank: rank, host, how it ended, when."""
    out = [f"  {'rank':>4}  {'host':<16} {'ended':<34} {'after':>9}"]
    return out + [f"  {rank:>4}  {host:<16} {how:<34} {duration(after) if after is not None else '-':>9}"
                  for rank, host, how, after in rows]


def _folded_exit_rows(rows: list[tuple[int, str, str, float | None]]) -> list[str]:
    """The table of a run of more than FOLD_OVER ranks: a row per way of ending (the ranks as ranges, their
    hosts as a hostlist, the first and last exit), the fewest ranks first; `cockpit ps --json` has each rank."""
    from cockpit.hang.words import hosts_text, spans

    groups: dict[str, list[tuple[int, str, str, float | None]]] = {}
    for row in rows:
        groups.setdefault(row[2], []).append(row)
    out = [f"  {'ranks':>6}  {'ended':<34} {'after':>19}  which (hosts)"]
    for how, same in sorted(groups.items(), key=lambda kv: (len(kv[1]), kv[1][0][0])):
        times = [t for *_, t in same if t is not None]
        after = "-" if not times else duration(min(times)) if len(set(map(duration, times))) == 1 else (
            f"{duration(min(times))}..{duration(max(times))}")
        which = f"{spans([r for r, *_ in same], ',')} ({hosts_text([h for _, h, *_ in same])})"
        out.append(f"  {len(same):>6,}  {how:<34} {after:>19}  {which}")
    return out


def _forecast_line(run_dir: Path, status: RunStatus) -> str:
    """Will it finish in time, and the GPU-hours (a sweep: its trials' sum); cockpit.insight.forecast."""
    if is_sweep(status):
        from cockpit.insight.sweep_table import sweep_gpu_hours, trial_rows

        rows = trial_rows(run_dir, status)
        hours = sweep_gpu_hours(rows)
        from cockpit.launch.rerun import rerun_of

        gpus = "CPU-only" if all(r.forecast.gpus == 0 for r in rows) else f"{hours or 0.0:.2f} GPU-h"
        which = rerun_of(run_dir)
        return (f"sweep: {len(rows)} trial{'s' if len(rows) != 1 else ''}{f' ({which})' if which else ''}, {gpus} "
                f"(cockpit sweep show {status.run_id} --sort loss)")
    from cockpit.insight.forecast_inputs import run_forecast

    return run_forecast(run_dir, status).line()


def _victim_note(status: RunStatus, ff: FirstFailure) -> str:
    """After a stall, the first rank to fail is often one that timed out waiting: say whom it waited for."""
    for f in status.findings:
        victims = {v.rank for v in f.victims}
        culprits = [c.rank for c in f.culprits]
        if ff.rank in victims and culprits:
            from cockpit.hang.words import rank_list

            return (f" (a victim of the stall: it waited in a collective for {rank_list(culprits)}, "
                    f"{'the culprit' if len(culprits) == 1 else 'the culprits'})")
    return ""


def _describe(rank: RankExit, stopped_at: float | None = None) -> str:
    """How a rank ended, for the summary's table; ``stopped_at``: when cockpit stopped the run (exits from
    then on are the stop's doing)."""
    if rank.status == 0:
        return "ok"
    if rank.teardown_abort:
        return "aborted in teardown (SIGABRT)"
    how = f"exit code {rank.status}"
    if rank.signal:
        import signal

        try:
            how = signal.Signals(rank.signal).name
        except ValueError:
            how = f"signal {rank.signal}"
    if stopped_at is not None and rank.time >= stopped_at:
        return f"stopped ({how})"
    return how if how.startswith("exit") else f"killed by {how}"


def _forecast_cells(run_dir: Path, status: RunStatus, now: float, stored: Forecast | None = None) -> str:
    """ps's FORECAST and GPU-H cells: ``eta 12m fits`` / ``2 requeues`` / ``?``, GPU-hours or ``cpu``; from
    ``stored``, a finished run's forecast (cockpit.run.summary), where there is one."""
    if status.state == UNREADABLE:
        return f"{'-':<16} {'-':>6}"
    if is_sweep(status):
        from cockpit.insight.sweep_table import sweep_gpu_hours, trial_rows

        rows = trial_rows(run_dir, status, now)
        hours = sweep_gpu_hours(rows)
        gpu = "cpu" if all(r.forecast.gpus == 0 for r in rows) else f"{hours or 0.0:.2f}"
        return f"{'-':<16} {gpu:>6}"
    if (fc := stored) is None:
        from cockpit.insight.forecast_inputs import run_forecast

        fc = run_forecast(run_dir, status, now=now)
    gpu = "cpu" if fc.gpus == 0 else ("-" if fc.gpu_hours is None else f"{fc.gpu_hours:.2f}")
    if not fc.ended and any(f.kind in ("stall", "stopped") for f in status.findings):
        return f"{'? no progress':<16} {gpu:>6}"  # an eta from the rate before it stalled would promise an end
    return f"{('-' if fc.ended else fc.short())[:16]:<16} {gpu:>6}"


def attempts_cell(s: RunStatus) -> str:
    """The ATTEMPTS column: attempts made of those the job's recover: allows ("2/4"); without recover:, the attempts
    made where there were several (a Slurm requeue, `cockpit run --resume`), else "-"."""
    allowed = (s.recover or {}).get("attempts")
    if not s.attempts:
        return "-"
    if not isinstance(allowed, int):
        return str(len(s.attempts)) if len(s.attempts) > 1 else "-"
    return f"{len(s.attempts)}/{allowed + 1}"


def attempts_lines(s: RunStatus) -> list[str]:
    """The summary's account of a run that relaunched itself: each attempt, and the goodput."""
    from cockpit.run.attempts import paused_seconds, restart_latencies

    if len(s.attempts) < 2 and s.goodput is None:
        return []
    start = s.started or s.created
    out = [f"attempts: {len(s.attempts)}" + (f", goodput {s.goodput:.0%} (the share of the wall time that trained "
                                                 "steps that were kept)" if s.goodput is not None else "")]
    latencies = [None, *restart_latencies(s.attempts)]
    ends = [None, *(a.end for a in s.attempts[:-1])]
    for a, latency, before in zip(s.attempts, latencies, ends, strict=True):
        span = f"{duration(max(a.started - start, 0.0))}..{duration((a.ended or time.time()) - start)}"
        steps = f"steps {a.resumed_from or 0}..{a.step}" if a.step is not None else "no step"
        after = {"stopped": "the stop", "stall": "the stall", "requeued": "the requeue"}.get(before or "",
                                                                                              "the failure")
        again = f", first step {latency:.1f} s after {after}" if latency is not None else ""
        who = f" (rank {a.culprit_rank} on {a.culprit_host})" if a.culprit_rank is not None else ""
        out.append(f"  {a.attempt}: {span}, {steps}{again}: {a.end or 'running'}{who}")
    lost: dict[str, float] = {}
    for a in s.attempts:
        if a.lost_s is not None and a.end is not None:
            lost[a.end] = lost.get(a.end, 0.0) + a.lost_s
    if lost:
        plural = {"stopped": "stops", "succeeded": "successes", "requeued": "Slurm's requeues"}
        out.append("  lost: " + ", ".join(f"{duration(v)} to {plural.get(k, k + 's')}" for k, v in sorted(lost.items()))
                   + " (steps made again, detection, teardown, restart)")
    if paused := paused_seconds(s.attempts):
        out.append(f"  stopped (by user): {duration(paused)} between the end and `cockpit run --resume`: neither "
                   "training nor lost, left out of the goodput's wall time")
    return out


def _frozen(status: RunStatus) -> tuple[int, str] | None:
    from cockpit.launch.control import frozen_supervisor  # a run still going: its supervisor may be frozen

    return frozen_supervisor(status)


def ps_table(rows: list[tuple[Path, RunStatus]], stored: Mapping[Path, Forecast] | None = None) -> str:
    """The ps table; ``stored``: the forecasts of finished runs, by run directory (cockpit.insight.listing)."""
    return table_of([(run_dir, s, stored.get(run_dir) if stored else None) for run_dir, s in rows])


def table_of(rows: Iterable[tuple[Path, RunStatus, Forecast | None]]) -> str:
    """The ps table of (run directory, status, its stored forecast or None) rows: `cockpit ps`'s own, which has
    each run's forecast at hand (not a mapping by path: hashing thousands of paths twice)."""
    out = [f"{'RUN':<38} {'STATE':<11} {'LAUNCHER':<8} {'NODES':<20} {'RANKS':>5} {'ATTEMPTS':>8} {'AGE':>9}  "
           f"{'FORECAST':<16} {'GPU-H':>6}  HEALTH"]
    now = time.time()
    for run_dir, s, forecast in rows:
        nodes = ",".join(s.hosts)
        if len(nodes) > 20:  # many nodes: as a hostlist (n[000-511]), not the first three names
            from cockpit.hang.words import hosts_text

            nodes = hosts_text(list(s.hosts))
        frozen = None if s.final else _frozen(s)
        out.append(f"{s.run_id:<38} {s.state:<11} {s.launcher:<8} {nodes[:20]:<20} "
                   f"{s.world_size if s.world_size is not None else '?':>5} {attempts_cell(s):>8} "
                   f"{duration(now - s.created):>9}  "
                   f"{_forecast_cells(run_dir, s, now, forecast)}  {health(s, frozen)}")
        # Sweeps: one indented row per trial (a Slurm array task), with its own state and arguments.
        for node in s.nodes:
            if (t := node.trial) is not None:
                job = node.slurm.job_id if node.slurm is not None else None
                where = (f"job {job}" if job else  # Slurm array task
                         f"GPUs {','.join(map(str, t.gpus))}" if t.gpus else
                         f"slot {t.slot}" if t.slot is not None else "job -")  # local sweep
                out.append(f"  trial {t.index:<30} {node.state or '?':<11} {where:<16} {' '.join(t.args)}")
        if s.note and not s.final:
            out.append(f"  note: {s.note}")
        if (who := owner(run_dir)) is not None:
            out.append(f"  owner: {who} (another user's run: shown read-only; cockpit stop and stacks refuse it)")
    return "\n".join(out)
