"""Will the run finish within its time limit? A pure function of what was measured: steps done and when, the
total steps, the time limit, the time used, the GPUs held. No IO: cockpit.insight.forecast_inputs reads a run's files
and calls :func:`forecast`; ps, the run summary and the TUI print the record it returns.

Unknown is a value, never a guess: without step metrics, without a total step count, or (Slurm) without a
known time limit, ``fits`` is ``"unknown"`` and ``why`` says what is missing.

The step time is the **median of the recent step intervals** (seconds per step between consecutive metrics
records, the last ``window`` of them): the first steps (compilation, cudnn autotuning, cold caches) and one
slow interval (a checkpoint, a stall, the gap of a requeue) do not move it, where a mean over the run would.

Requeues: with ``slurm.requeue`` the ranks get USR1 ``signal_seconds`` before the limit and stop there, so an
attempt trains for ``limit - signal_seconds``; the time a resumed attempt spends loading its checkpoint and
the time back in the queue are not counted (the ETA is training time only).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

Fits = Literal["yes", "no", "unknown"]
FITS: tuple[Fits, ...] = ("yes", "no", "unknown")
NO_LIMIT = "no time limit"  # Forecast.why of a run with no time limit (a local run, a Slurm job without --time)
WINDOW = 20  # recent step intervals the median is taken over


@dataclass(frozen=True)
class Forecast:
    """What :func:`forecast` says about one run. Every number may be None: not known, never guessed."""

    fits: Fits  # finishes within its time limit (with requeues: in this attempt)
    why: str  # one line: the reason for ``fits``, or what is missing for it
    steps_done: int | None = None  # the last step in the metrics
    total_steps: int | None = None  # the step the run ends at (metrics' total_steps, else the job's)
    seconds_per_step: float | None = None  # median of the recent intervals
    remaining_s: float | None = None  # training time to the last step (None: unknown or ended)
    eta: float | None = None  # wall time of the last step if nothing stops it (queue waits not included)
    requeues: int | None = None  # requeues still needed to reach the last step (0: it fits)
    gpus: int = 0  # GPUs held (all nodes); 0: a CPU-only run
    gpu_hours: float | None = None  # GPUs x time held so far (0.0 for CPU-only)
    ended: bool = False

    def gpu_text(self) -> str:
        """``3.2 GPU-h`` or ``CPU-only``."""
        if self.gpus == 0:
            return "CPU-only"
        return "? GPU-h" if self.gpu_hours is None else f"{self.gpu_hours:.2f} GPU-h"

    def short(self) -> str:
        """The `cockpit ps` cell: ``eta 12m fits``, ``2 requeues``, ``?`` ..."""
        if self.ended:
            return f"{self.steps_done if self.steps_done is not None else '?'} steps"
        if self.fits == "unknown":
            eta = f"eta {hms(self.remaining_s)} " if self.remaining_s is not None else ""
            return f"{eta}?"
        if self.fits == "yes" and self.why == NO_LIMIT:  # nothing to fit in: "fits" would say nothing
            return f"eta {hms(self.remaining_s)}"
        if self.fits == "yes":
            return f"eta {hms(self.remaining_s)} fits"
        return f"eta {hms(self.remaining_s)} {self.requeues} requeue{'s' if self.requeues != 1 else ''}"

    def line(self) -> str:
        """The run summary's and the TUI's line."""
        steps = (f"step {self.steps_done if self.steps_done is not None else '?'}"
                 f"/{self.total_steps if self.total_steps is not None else '?'}")
        rate = f", {self.seconds_per_step:.3g} s/step" if self.seconds_per_step else ""
        if self.ended:
            if self.steps_done is None:  # a script that wrote no step metrics (not cockpit.train)
                return f"progress: no step metrics (see Will it finish? for a script's own); {self.gpu_text()}"
            return f"progress: ended at {steps}{rate}; {self.gpu_text()}"
        eta = f", {hms(self.remaining_s)} to go" if self.remaining_s is not None else ""
        if self.total_steps is None and self.steps_done is not None:  # the hint first: this line is cut at 80
            return f"forecast: {steps} (no eta: set total_steps: in the job){rate}; {self.gpu_text()}"
        return f"forecast: {steps}{rate}{eta}; fits: {self.fits} ({self.why}); {self.gpu_text()}"

    def to_dict(self) -> dict[str, object]:
        return {"fits": self.fits, "why": self.why, "steps_done": self.steps_done, "total_steps": self.total_steps,
                "seconds_per_step": self.seconds_per_step, "remaining_s": self.remaining_s, "eta": self.eta,
                "requeues": self.requeues, "gpus": self.gpus, "gpu_hours": self.gpu_hours, "ended": self.ended}

    @classmethod
    def from_dict(cls, data: object) -> Forecast:
        """The record ``to_dict`` wrote, checked: ValueError when a field is missing, extra or of another type."""
        if not isinstance(data, dict) or data.keys() != _TYPES.keys():
            raise ValueError(f"not a forecast: expected the fields {', '.join(_TYPES)}")
        for name, types in _TYPES.items():  # (type() in types first: _is_a's common case, without a call)
            if type(data[name]) not in types and not _is_a(data[name], types):
                raise ValueError(f"forecast {name}: {data[name]!r} is not {' or '.join(map(str, types))}")
        if data["fits"] not in FITS:
            raise ValueError(f"forecast fits: {data['fits']!r} is none of {', '.join(FITS)}")
        return cls(**data)


# Forecast's fields as to_dict writes them -> the types each may have (None: may be null; a float may be an int).
_TYPES: dict[str, tuple[type | None, ...]] = {
    "fits": (str,), "why": (str,), "steps_done": (int, None), "total_steps": (int, None),
    "seconds_per_step": (float, int, None), "remaining_s": (float, int, None), "eta": (float, int, None),
    "requeues": (int, None), "gpus": (int,), "gpu_hours": (float, int, None), "ended": (bool,)}


def _is_a(value: object, types: tuple[type | None, ...]) -> bool:
    """``value`` is one of ``types`` (None: null); a bool is no number here, though Python's bool is an int."""
    if type(value) in types:  # the common case (JSON's own types), at once; a bool's type is bool
        return True
    if value is None or isinstance(value, bool):
        return (None if value is None else bool) in types
    return any(t is not None and t is not bool and isinstance(value, t) for t in types)


def seconds_per_step(points: Iterable[tuple[float, int]], window: int = WINDOW) -> float | None:
    """Median seconds per step over the last ``window`` intervals of ``points`` ((time, step) pairs, any
    order; a step seen twice, as after a resume, counts by its last time). None with fewer than 2 steps."""
    last: dict[int, float] = {}
    for t, step in points:
        last[step] = max(t, last.get(step, t))
    ordered = sorted(last.items())
    per = [(t1 - t0) / (s1 - s0) for (s0, t0), (s1, t1) in zip(ordered, ordered[1:], strict=False) if t1 > t0]
    if not per:
        return None
    from statistics import median  # (with fractions and decimal: ~10 ms of every start that never needs it)

    return median(per[-window:])


def forecast(*, points: Iterable[tuple[float, int]], total_steps: int | None, now: float,
             elapsed: float | None, gpus: int, time_limit: float | None = None, limited: bool = False,
             attempt_elapsed: float | None = None, requeue: bool = False, signal_seconds: float = 0.0,
             ended: bool = False) -> Forecast:
    """The forecast of one run.

    ``points``: (time, step) from its metrics; ``total_steps``: where it ends; ``elapsed``: seconds it has held
    its GPUs (start to now, or to its end); ``time_limit``: seconds per attempt (Slurm's --time), ``limited``:
    the run has a limit even if it is not known here (a Slurm job without slurm.time); ``attempt_elapsed``:
    seconds into the current attempt (default ``elapsed``); ``requeue``: it checkpoints ``signal_seconds``
    before the limit and requeues itself.
    """
    points = list(points)
    done = max((s for _, s in points), default=None)
    sps = seconds_per_step(points)
    hours = None if elapsed is None else gpus * max(0.0, elapsed) / 3600
    base = Forecast("unknown", "", steps_done=done, total_steps=total_steps, seconds_per_step=sps, gpus=gpus,
                    gpu_hours=hours)
    if ended:
        return replace(base, why="the run has ended", ended=True)
    if done is None:
        return replace(base, why="no step metrics yet")
    if total_steps is None:
        return replace(base, why="total steps unknown: set total_steps: in the job, or use cockpit.train")
    if sps is None:
        return replace(base, why="one step measured so far")
    remaining = max(0, total_steps - done) * sps
    base = replace(base, remaining_s=remaining, eta=now + remaining)
    if time_limit is None:
        if limited:
            return replace(base, why="time limit unknown (hint: set slurm.time)")
        return replace(base, fits="yes", why=NO_LIMIT, requeues=0)
    used = elapsed if attempt_elapsed is None else attempt_elapsed
    if used is None:  # no start time recorded: unknown, not a guess
        return replace(base, why="time used unknown (the run has no start time)")
    usable = time_limit - (signal_seconds if requeue else 0.0)
    left = max(0.0, usable - used)
    if remaining <= left:
        return replace(base, fits="yes", why=f"{hms(left - remaining)} to spare", requeues=0)
    more = math.ceil((remaining - left) / usable) if usable > 0 else None
    if not requeue:
        at = done + int(left / sps)
        return replace(base, fits="no", why=f"the limit ends it near step {at}; {more} more attempt(s) needed: "
                       "slurm.requeue", requeues=more)
    return replace(base, fits="no", why=f"needs {more} requeue(s) of {hms(time_limit)}", requeues=more)


def slurm_seconds(text: str | None) -> float | None:
    """sbatch --time (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in seconds; None for none, UNLIMITED
    or text that is none of these."""
    if not text or text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    days, _, rest = text.rpartition("-") if "-" in text else ("0", "", text)
    try:
        parts = [int(p) for p in rest.split(":")]
        d = int(days)
    except ValueError:
        return None
    if "-" in text:  # D-HH, D-HH:MM, D-HH:MM:SS
        h, m, s = (parts + [0, 0])[:3]
    elif len(parts) == 3:
        h, m, s = parts
    else:  # MM, MM:SS
        h, m, s = 0, parts[0], parts[1] if len(parts) > 1 else 0
    return float(((d * 24 + h) * 60 + m) * 60 + s)


def hms(seconds: float | None) -> str:
    """``45s``, ``12m``, ``3h05m``, ``2d04h``; ``?`` for None."""
    if seconds is None:
        return "?"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s" if s < 600 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"
