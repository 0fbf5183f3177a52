"""Many Slurm jobs followed over time: one batched query (cockpit.slurm.query) per refresh, with backoff while
nothing changes; what the Slurm launcher's supervisor polls."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from cockpit.slurm.command import RunCommand, SlurmError, run_command
from cockpit.slurm.query import History, JobView, finished, read_history, squeue


class JobTracker:
    """Many jobs followed with one squeue call per refresh, backing off while nothing changes.

    ``poll()`` is cheap to call often (the supervisor does, 5 times a second): it queries only when due.
    The interval starts at ``min_interval``, grows 1.5x after each refresh that changed nothing (up to
    ``max_interval``), goes back to ``min_interval`` on a change or ``hurry()``, and doubles after an error
    (``error`` says which). Final jobs are no longer asked about; ``unseen`` holds the ids the last refresh
    found nowhere (not in squeue, not in the cluster's history).
    """

    def __init__(self, job_ids: Iterable[str] = (), runner: RunCommand = run_command, *, min_interval: float = 1.0,
                 max_interval: float = 15.0, clock: Callable[[], float] = time.monotonic):
        self.runner, self.clock = runner, clock
        self.min_interval, self.max_interval = min_interval, max_interval
        self.interval = min_interval
        self.ids: set[str] = set(job_ids)
        self.views: dict[str, JobView] = {}
        self.unseen: set[str] = set()  # asked about in the last refresh and found nowhere
        self.error: str | None = None
        self.history: History | None = None
        self.generation = 0  # refreshes so far: a reader can tell whether anything new was asked
        self.last_ok: float | None = None  # clock() of the last refresh Slurm answered
        self.next_at = clock()

    def hurry(self) -> None:
        """Refresh at the next poll (something local suggests a change, e.g. a rank ended)."""
        self.interval, self.next_at = self.min_interval, self.clock()

    def doubt(self, job_id: str) -> None:
        """Ask about ``job_id`` again at the next poll even though its last view was final (a job that
        requeues itself passes through an end state)."""
        if job_id in self.views and self.views[job_id].final:
            del self.views[job_id]
        self.hurry()

    def poll(self) -> dict[str, JobView]:
        """The latest views, refreshed first when due."""
        if self.clock() >= self.next_at:
            self.refresh()
        return self.views

    def refresh(self) -> dict[str, JobView]:
        self.generation += 1
        pending = {j for j in self.ids if not (j in self.views and self.views[j].final)}
        try:
            fresh = squeue(pending, self.runner) if pending else {}
            missing = {j for j in pending if j not in fresh}
            if missing:
                self.history = self.history or read_history(self.runner)
                fresh.update(finished(missing, self.history, self.runner))
        except SlurmError as exc:
            self.error = str(exc)
            self.interval = min(max(self.interval * 2, self.min_interval), self.max_interval)
        else:
            self.error, self.last_ok = None, self.clock()
            gone = missing - set(fresh)
            changed = any(self.views.get(k) != v for k, v in fresh.items()) or bool(gone - self.unseen)
            self.views.update(fresh)
            for job_id in gone:
                self.views.pop(job_id, None)
            self.unseen = gone
            self.interval = self.min_interval if changed else min(self.interval * 1.5, self.max_interval)
        self.next_at = self.clock() + self.interval
        return self.views
