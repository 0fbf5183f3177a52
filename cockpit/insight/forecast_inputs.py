"""A run's forecast from its files: the metrics' steps and times, the job's limits, the status's times, handed
to the pure cockpit.insight.forecast. Read-only and cheap (the tail of one metrics file, the job copy, the tail of
one agent log), so `cockpit ps` can ask it for every run.

Where each input comes from:

* steps and their times, the last loss, ``total_steps``: rank 0's metrics (``metrics/rank-0.jsonl``, the last
  64 KiB), as cockpit.train writes them; any script may append ``{"step": N, "time": T}`` lines there itself.
  A run without that file: rank 0's points from the other sources of cockpit.plot.sources (its framework's
  files, its TensorBoard event files, its printed progress lines: the last MiB of its log), read as the charts
  read them.
* ``total_steps`` otherwise, the time limit, requeue, GPUs: the job (``job.yaml`` of the run, or of the sweep a
  trial belongs to).
* the time limit, whether a scheduler ends the run at it, requeue: the run's launcher (Slurm's ``slurm.time``).
* time held: status.json's ``started`` to ``ended`` (or now); the current attempt starts where the run's
  launcher says (a Slurm job: the last ``cockpit: start restart=N ... time=T`` line of its batch log).

A run that has ended needs none of the launcher's answers and no clock (``ended_forecast``): its forecast is
the same at any later time, so cockpit.insight.listing stores it in the run's summary.json, once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.fs import safeio
from cockpit.insight.forecast import Forecast, forecast, slurm_seconds
from cockpit.run import layout
from cockpit.run.store import RunStatus, tail_lines

if TYPE_CHECKING:
    from cockpit.spec.model import JobSpec

TAIL_BYTES = 65536


@dataclass(frozen=True)
class MetricsTail:
    """What the end of rank 0's metrics says: (time, step) points, the last loss, the run's total steps."""

    points: tuple[tuple[float, int], ...] = ()
    last_loss: float | None = None
    total_steps: int | None = None

    @property
    def step(self) -> int | None:
        return max((s for _, s in self.points), default=None)


def read_metrics(run_dir: Path, rank: int = 0) -> MetricsTail:
    """The tail of a rank's metrics file; an empty tail when there is none. A line that is not a record
    (a half-written last line, text) is skipped."""
    points, loss, total = [], None, None
    for line in tail_lines(layout.metrics_file(run_dir, rank), 10_000, TAIL_BYTES):
        try:
            rec = safeio.loads(line)  # nested too deep: a bad record like any other
            if not isinstance(rec, dict):  # (indexing one would raise TypeError: skipped the same)
                continue
            step, t = rec["step"], float(rec["time"])
        except (ValueError, KeyError, TypeError):
            continue
        if not isinstance(step, int) or isinstance(step, bool):
            continue
        points.append((t, step))
        if isinstance(rec.get("loss"), (int, float)):
            loss = float(rec["loss"])
        if isinstance(rec.get("total_steps"), int):
            total = rec["total_steps"]
    return MetricsTail(tuple(points), loss, total) if points else _other_sources(run_dir, rank)


def _other_sources(run_dir: Path, rank: int) -> MetricsTail:
    """A rank's points from what its framework or its prints left (no metrics file of cockpit's), in the
    precedence of cockpit.plot.sources.ORDER; its prints from the last TAIL bytes of its log."""
    from cockpit.plot.framework_files import framework_sources
    from cockpit.plot.sources import printed_tail

    points = []
    for source in framework_sources(run_dir) if rank == 0 else ():
        points = source.poll(()).get(rank, ([], True))[0]
        if points:
            break
    points = points or _tensorboard_points(run_dir, rank) or printed_tail(run_dir, rank)
    if not points:
        return MetricsTail()
    last = {step: (time, loss) for step, time, loss in points}  # a step printed twice: its last line
    losses = [loss for _, loss in last.values() if loss is not None]
    return MetricsTail(tuple((time, step) for step, (time, _) in sorted(last.items())), losses[-1] if losses else None)


TENSORBOARD_POLLS = 4  # x cockpit.plot.tensorboard_files.MAX_EVENTS: the events a forecast reads of a file


def _tensorboard_points(run_dir: Path, rank: int) -> list[tuple[int, float, float | None]]:
    """A rank's points from its TensorBoard event files, read whole; [] when they are longer than
    TENSORBOARD_POLLS reads (their first steps are no forecast of the run's end: unknown, not a guess)."""
    from cockpit.plot.tensorboard_files import TensorBoardFiles

    source = TensorBoardFiles(run_dir)
    points: list[tuple[int, float, float | None]] = []
    try:
        for _ in range(TENSORBOARD_POLLS):
            found, replace = source.poll(()).get(rank, ([], False))
            points = found if replace else points + found
            if source.at_end():
                return points
        return []
    finally:
        source.close()


def job_spec(run_dir: Path) -> JobSpec | None:
    """The job a run (or the sweep of a trial) was launched with; None when its copy cannot be read."""
    from cockpit.spec import jobfile
    from cockpit.spec.model import SpecError, parse_spec
    from cockpit.spec.yamlpos import LoadError

    for where in (run_dir, run_dir.parent):
        path = where / layout.JOB
        if path.is_file():
            try:
                return parse_spec(jobfile.read_text(path), str(path))  # bounded, a regular file only
            except (OSError, SpecError, LoadError):
                return None
    return None


def gpus_held(spec: JobSpec | None, status: RunStatus, trial_gpus: tuple[int, ...] | None = None) -> int:
    """GPUs the run holds on all its nodes: a local trial's own set, else the job's GPUs per node x nodes
    (``gpus: all``: one rank per GPU, so the world size)."""
    if trial_gpus:
        return len(trial_gpus)
    if spec is None or not spec.uses_gpus:
        return 0
    if spec.gpus_per_node:
        return spec.gpus_per_node * spec.num_nodes
    return status.world_size or 0


def ended_forecast(run_dir: Path, status: RunStatus, *, spec: JobSpec | None = None,
                   trial_gpus: tuple[int, ...] | None = None, metrics: MetricsTail | None = None) -> Forecast | None:
    """The forecast of a run that has ended: its steps, rate and GPU-hours, the same at any later time. None
    for a run still going, and for an ended one with a start but no end time (its GPU-hours would run on
    with the clock): ``run_forecast`` answers for those. What cockpit.run.summary stores of a finished run."""
    if not status.final or (status.started is not None and not status.ended):
        return None
    spec = spec if spec is not None else job_spec(run_dir)
    metrics = metrics if metrics is not None else read_metrics(run_dir)
    elapsed = None if status.started is None else (status.ended or 0.0) - status.started
    return forecast(points=metrics.points, total_steps=metrics.total_steps or (spec.total_steps if spec else None),
                    now=status.ended or 0.0, elapsed=elapsed, gpus=gpus_held(spec, status, trial_gpus), ended=True)


def run_forecast(run_dir: Path, status: RunStatus, *, spec: JobSpec | None = None, now: float | None = None,
                 trial_gpus: tuple[int, ...] | None = None, metrics: MetricsTail | None = None) -> Forecast:
    """The forecast of one run (or one trial); ``spec`` saves reading the job again for many trials."""
    spec = spec if spec is not None else job_spec(run_dir)
    metrics = metrics if metrics is not None else read_metrics(run_dir)
    if (ended := ended_forecast(run_dir, status, spec=spec, trial_gpus=trial_gpus, metrics=metrics)) is not None:
        return ended  # no launcher, no clock
    from cockpit.launch import registry  # (a run still going: its launcher's limits; not paid by a finished one)
    from cockpit.launch.protocol import TimeLimits

    now = time.time() if now is None else now
    started = status.started
    elapsed = None if started is None else (status.ended or now) - started
    launcher = registry.known_for_run(status)  # a launcher this version does not know: no limit, as local
    limits = launcher.time_limits(spec) if launcher else TimeLimits()
    begun = launcher.attempt_start(run_dir) if launcher and not status.final else None
    return forecast(
        points=metrics.points, total_steps=metrics.total_steps or (spec.total_steps if spec else None), now=now,
        elapsed=elapsed, gpus=gpus_held(spec, status, trial_gpus),
        time_limit=slurm_seconds(limits.time), limited=limits.limited,
        attempt_elapsed=None if begun is None else now - begun, requeue=limits.requeue,
        signal_seconds=spec.slurm.signal_seconds if spec else 0.0, ended=status.final)
