"""A sweep's trial table: per trial its arguments, state, steps and last loss, and its forecast; the sweep's
GPU-hours. What `cockpit sweep show` prints and the TUI's run view shows for a sweep run. Reads each trial's
status.json and the tail of its rank-0 metrics (cockpit.insight.forecast_inputs); the job once for all trials.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from cockpit.insight.forecast import Forecast
from cockpit.insight.forecast_inputs import job_spec, read_metrics, run_forecast
from cockpit.run.store import RunStatus, read_status
from cockpit.spec.model import JobSpec

SORT_KEYS = ("trial", "loss", "state", "steps")
FAILED_STATES = ("failed", "lost")  # what `cockpit sweep rerun --failed` reruns


@dataclass(frozen=True)
class TrialRow:
    index: int
    args: tuple[str, ...]
    state: str  # the trial's own state (pending before it starts)
    steps: int | None
    last_loss: float | None
    forecast: Forecast
    run_dir: Path
    job_id: str | None = None  # Slurm: "<array>_<task>"

    def to_dict(self) -> dict:
        return {"trial": self.index, "args": list(self.args), "state": self.state, "steps": self.steps,
                "last_loss": self.last_loss, "job_id": self.job_id, "run_dir": str(self.run_dir),
                "forecast": self.forecast.to_dict()}


def trial_rows(run_dir: Path, status: RunStatus, now: float | None = None,
               spec: JobSpec | None = None) -> list[TrialRow]:
    """One row per trial of the sweep ``status`` (of ``run_dir``), in trial order; ``spec``: its job, when
    the caller has it already."""
    spec = spec if spec is not None else job_spec(run_dir)
    rows = []
    for node in status.nodes:
        t = node.trial
        if t is None:
            continue
        tdir = Path(node.run_dir) if node.run_dir else run_dir / f"trial-{t.index}"
        own = read_status(tdir)
        metrics = read_metrics(tdir)
        state = (own.state if own is not None and own.state != "starting" else None) or node.state or "pending"
        fc = run_forecast(tdir, own, spec=spec, now=now, trial_gpus=t.gpus, metrics=metrics) if own else \
            Forecast("unknown", "no status yet")
        rows.append(TrialRow(t.index, t.args, state, metrics.step, metrics.last_loss, fc, tdir,
                             node.slurm.job_id if node.slurm is not None else None))
    return rows


def sort_rows(rows: list[TrialRow], key: str) -> list[TrialRow]:
    """Rows by ``key`` (SORT_KEYS); by loss: lowest first, trials without a loss (or NaN) last."""
    if key == "loss":
        return sorted(rows, key=lambda r: (r.last_loss is None or math.isnan(r.last_loss),
                                           r.last_loss if r.last_loss is not None else 0.0, r.index))
    if key == "state":
        return sorted(rows, key=lambda r: (r.state, r.index))
    if key == "steps":
        return sorted(rows, key=lambda r: (-(r.steps or 0), r.index))
    return sorted(rows, key=lambda r: r.index)


def sweep_gpu_hours(rows: list[TrialRow]) -> float | None:
    """GPU-hours of all trials so far (0.0 for a CPU-only sweep; None when no trial has started)."""
    hours = [r.forecast.gpu_hours for r in rows if r.forecast.gpu_hours is not None]
    return sum(hours) if hours else None


def table(rows: list[TrialRow]) -> str:
    """The plain-text table `cockpit sweep show` prints."""
    out = [f"{'TRIAL':>5}  {'STATE':<10} {'STEPS':>11} {'LOSS':>10}  {'FORECAST':<18} {'GPU-H':>7}  ARGS"]
    for r in rows:
        total = r.forecast.total_steps
        steps = "-" if r.steps is None else f"{r.steps}/{total}" if total else str(r.steps)
        loss = "-" if r.last_loss is None else f"{r.last_loss:.4g}"
        gpu = "cpu" if r.forecast.gpus == 0 else ("-" if r.forecast.gpu_hours is None
                                                   else f"{r.forecast.gpu_hours:.2f}")
        fc = "-" if r.forecast.ended or r.state == "pending" else r.forecast.short()
        out.append(f"{r.index:>5}  {r.state:<10} {steps:>11} {loss:>10}  {fc:<18} {gpu:>7}  {' '.join(r.args)}")
    return "\n".join(out)
