"""Supervisor nodes for Slurm runs: one per Slurm job, or one per array task of a sweep.

The supervisor (cockpit.launch.supervisor) treats them like local torchruns: ``poll()`` gives the exit code
once Slurm says the job is over, ``terminate()`` is ``scancel``, ``describe()`` goes into status.json. All the
nodes of a run share one JobTracker, so a sweep of 100 trials costs one squeue call per refresh, and
refreshes back off while nothing changes (a rank's exit record makes the next one come at once).

The supervisor writes status.json when ranks end; Slurm's side (pending reason, allocation, requeues)
changes without any rank ending, so the shared ``SlurmBook`` writes it when that changes: state
``starting`` while Slurm has the job queued, ``running`` once it runs, the pending reason and the attempts
in ``note``, the job's view in ``nodes``. For a sweep it also keeps each trial's own status.json
(trial-<i>/status.json: state, ranks, first failure), so `cockpit logs RUN/trial-1` works like any run.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from cockpit.launch.slurm import attempts as slurm_attempts
from cockpit.launch.slurm import preflight as slurm_preflight
from cockpit.run import layout
from cockpit.run.records import SLURM_VIEW_KEYS, FirstFailure, NodeRecord, SlurmJob
from cockpit.run.status import final_state
from cockpit.run.store import RunStatus, first_failure, rank_exits, read_status, write_status
from cockpit.slurm import hostlist
from cockpit.slurm.command import RunCommand, SlurmError, run_command
from cockpit.slurm.query import JobView
from cockpit.slurm.scancel import cancel
from cockpit.slurm.states import UNKNOWN, lookup
from cockpit.slurm.tracker import JobTracker

MISSES_BEFORE_LOST = 3  # successful refreshes that found the job nowhere before cockpit stops waiting
GIVE_UP_AFTER_STOP = 600.0  # seconds without an answer from Slurm after a stop request before giving up
REQUEUE_SETTLE = 5.0  # a job that may requeue itself is over only when Slurm still says so this much later
# ... and this much once Slurm said it is requeueing it: the end state then lasts until every process of the
# attempt is cleaned up (KillWait, the epilog), which a loaded node stretches well past REQUEUE_SETTLE
REQUEUE_ASKED_SETTLE = 180.0


class SlurmJobUnit:
    """One Slurm job (or array task) of a run, as a supervisor node."""

    def __init__(self, entry: NodeRecord, book: SlurmBook):
        assert entry.slurm is not None and entry.slurm.job_id, entry
        self.entry = entry
        self.book = book
        self.job_id: str = entry.slurm.job_id
        self.host: str = entry.host  # "sbatch", or "trial-<i>": names logs/agent.<host>.log
        self.node_rank: int = entry.node_rank
        self.trial: int | None = entry.trial.index if entry.trial is not None else None
        self.run_dir = Path(entry.run_dir or "") if self.trial is not None else book.run_dir
        own = read_status(self.run_dir) if self.trial is not None else book.status
        self.world_size = own.world_size if own is not None else None
        self.attempts = slurm_attempts.AttemptLog(layout.agent_log(book.run_dir, self.host),
                                                  self.run_dir / layout.LOGS)
        self.view: JobView | None = None
        self.misses = 0
        self.generation = 0
        self.error: str | None = None  # the tracker's last error, as this node last reported it
        self.exits_seen = 0
        self.exit_code: int | None = None
        self.note: str | None = None
        self.history: list[slurm_attempts.Attempt] = []
        # A job that requeues itself passes through an end state (FAILED, CANCELLED "due to job requeue")
        # on its way back to PENDING; squeue or accounting can show that moment. Such a job's end is only
        # believed when it still holds REQUEUE_SETTLE seconds later with no new restart.
        script = book.run_dir / layout.SBATCH_SCRIPT
        self.requeue = script.is_file() and "#SBATCH --requeue" in script.read_text(encoding="utf-8",
                                                                                     errors="replace")
        self.final_seen: tuple[float, int] | None = None  # (when, restarts) an end was first seen
        # the job was seen allocated again (RUNNING, CONFIGURING with the raised count) after Slurm said it is
        # requeueing it: the restart count of the start the requeue ended (see _requeue_passing)
        self.back_after: int | None = None
        self.traced: tuple[str, str | None, int | None] | None = None  # the last (state, reason, restarts) logged
        # the run's attempt this job's submission started (its requeues are the next ones: the batch script's count)
        self.base_attempt = max(len(book.status.attempts) - 1, 0)
        self.preflight_failed = False  # the job ended in the preflight, before training: note says why

    @property
    def slurm(self) -> SlurmJob:
        """The entry's Slurm job: every node of this launcher has one (checked in __init__)."""
        job = self.entry.slurm
        assert job is not None, self.entry
        return job

    # -- the supervisor's interface ---------------------------------------------------------------------
    def poll(self) -> int | None:
        """The job's exit code once Slurm reports it over, else None (queries Slurm only when due)."""
        if self.exit_code is None:
            self._look()
        return self.exit_code

    def terminate(self) -> None:
        self.book.cancel()

    def describe(self) -> NodeRecord:
        v, e = self.view, self.entry
        job = replace(self.slurm, slurm_state=v.slurm_state if v else None, reason=v.reason if v else None,
                      nodes=v.nodes if v else None, source=v.source if v else None,
                      restarts=max([a.restart for a in self.history] + [v.restarts or 0 if v else 0]),
                      resumed_steps=tuple(a.resumed_step for a in self.history if a.restart > 0))
        return replace(e, state=v.state if v else None, exit_code=self.exit_code, slurm=job,
                       null_keys=e.null_keys | SLURM_VIEW_KEYS)

    def kill(self) -> int:
        """Its processes are Slurm's: scancel ends them."""
        return 0

    # -- following Slurm ----------------------------------------------------------------------------------
    def _look(self) -> None:
        exits = _exit_count(self.run_dir / layout.LOGS)
        if exits != self.exits_seen:  # a rank ended: the job may be ending, ask Slurm now
            self.exits_seen = exits
            self.book.tracker.hurry()
        tracker = self.book.tracker
        view = tracker.poll().get(self.job_id)
        if tracker.generation == self.generation:
            return  # nothing new was asked since the last look
        self.generation = tracker.generation
        if self.book.cancel_wanted and not self.book.cancelled:
            self.book.cancel()
        if self.book.stop_unanswered(tracker):
            self.exit_code = 1
            self.note = (f"stopped waiting: no answer from Slurm for {GIVE_UP_AFTER_STOP:.0f} s after the stop "
                         f"request ({tracker.error}); job {self.job_id} may still be queued: check squeue")
            self.book.changed()
            return
        self.history = self.attempts.read()
        if self.trial is None:  # a sweep's trials are runs of their own, without the run's attempts
            self.book.requeued(self)
        if tracker.error != self.error:
            self.error = tracker.error
            self.book.changed()
        if view is None and self.job_id in tracker.unseen:
            self.misses += 1
            if self.misses >= MISSES_BEFORE_LOST:
                self._lost()
        elif view is not None:
            self.misses = 0
            self._trace(view)
            if view.final and self._may_requeue(view) and not self._settled(view):
                return
            if not view.final:
                self.final_seen = None
                if (self.attempts.requeue_asked and view.slurm_state in ("RUNNING", "CONFIGURING")
                        and (view.restarts or 0) > self.attempts.last_restart):  # not PENDING (see _requeue_passing)
                    self.back_after = self.attempts.last_restart
            if view != self.view:
                self.view = view
                if view.final:
                    self._ended(view)
                self.book.changed()

    def _trace(self, view: JobView) -> None:
        """supervisor.log's line for each change of what Slurm says of the job (state, reason, restarts): what the
        requeue settling decided on, read back when a run ended otherwise than expected."""
        seen = (view.slurm_state, view.reason, view.restarts)
        if seen != self.traced:
            self.traced = seen
            waiting = " (requeue asked)" if self.attempts.requeue_asked else ""
            _stderr(f"cockpit: Slurm job {self.job_id}: {view.slurm_state}, reason {view.reason}, "
                    f"restarts {view.restarts}{waiting}")

    def _may_requeue(self, view: JobView) -> bool:
        """Whether an end state may be a requeue passing through: the job asks for requeues (#SBATCH --requeue),
        Slurm said it is requeueing it (`scontrol requeue` of any job: the cluster's JobRequeue=1, Slurm's default,
        allows it), or a node failed under it (Slurm requeues such a job where it may)."""
        return self.requeue or self.attempts.requeue_asked or view.slurm_state == "NODE_FAIL"

    def _settled(self, view: JobView) -> bool:
        """True once an end state has held REQUEUE_SETTLE seconds with no new restart (see __init__)."""
        now, restarts = self.book.tracker.clock(), view.restarts or 0
        if self.final_seen is None or self.final_seen[1] != restarts:
            self.final_seen = (now, restarts)
        waiting = self.attempts.requeue_asked and self._requeue_passing(view, restarts)
        settle = REQUEUE_ASKED_SETTLE if waiting else REQUEUE_SETTLE
        if now - self.final_seen[0] < settle:
            self.book.tracker.doubt(self.job_id)
            return False
        return True

    def _requeue_passing(self, view: JobView, restarts: int) -> bool:
        """Whether an end state seen after Slurm said it is requeueing the job (and before the job's next start
        line) is that requeue passing through rather than the job's end. It is while the restart count is still
        the attempt's; and also once the count went up, while the job was not seen allocated again (RUNNING or
        CONFIGURING with the raised count; COMPLETING is the old attempt still ending) and the end is no cancel:
        slurmctld raises the count when the requeue begins, and the killed batch shell's FAILED
        (NonZeroExitCode) can show until the attempt's processes are cleaned up, before PENDING or after it
        (both seen on the test cluster, under load: COMPLETING, FAILED for over 5 s, PENDING, RUNNING; and
        COMPLETING, PENDING, FAILED). A pending job does not fail without being allocated first; where it was
        and then failed before the batch script's start line, the end is believed after REQUEUE_SETTLE. A
        CANCELLED (an outside scancel of the requeued job), or a cancel cockpit asked for, is the end."""
        if restarts <= self.attempts.last_restart:
            return True
        back = self.back_after == self.attempts.last_restart
        return not back and view.slurm_state != "CANCELLED" and not self.book.cancel_wanted

    def _ended(self, view: JobView) -> None:
        row = lookup(view.slurm_state)
        code = view.exit_status
        found = slurm_preflight.verdict(self.run_dir, self.job_id) if row.state != "succeeded" else None
        if found is not None and not found.get("ok"):
            self._preflight_failed(found, code or 1)
            return
        self.exit_code = code if row.state == "succeeded" else (code or 1)
        self.note = f"Slurm job {self.job_id} {view.slurm_state} ({row.meaning})"
        if view.reason:
            self.note += f", reason {view.reason}"
        requeues = slurm_attempts.describe(self.history)
        if requeues:
            self.note += f"; {requeues}"
        advice = slurm_preflight.interface_advice(self.run_dir, self.job_id) if row.state == "failed" else None
        if advice:
            self.note += f"; {advice}"

    def _preflight_failed(self, found: dict, code: int) -> None:
        """The preflight stopped the job before training: say why; with slurm.exclude_bad_nodes (the verdict's
        on_bad), resubmit once without the bad nodes and follow the new job instead."""
        job = self.slurm
        self.note = slurm_preflight.failure_note(self.run_dir, self.job_id, found)
        bad = list(found.get("bad") or {})
        if found.get("on_bad") != "exclude" or not bad or job.earlier_jobs or self.trial is not None:
            self.exit_code, self.preflight_failed = code, True
            return
        try:
            new = slurm_preflight.resubmit(self.book.run_dir, bad)
        except SlurmError as exc:
            self.exit_code, self.preflight_failed = code, True
            self.note = f"{self.note}; not resubmitted: {exc}"
            return
        self.book.tracker.ids.discard(self.job_id)
        self.book.tracker.ids.add(new)
        self.entry = replace(self.entry, slurm=replace(job, job_id=new, earlier_jobs=(self.job_id,),
                                                       excluded=tuple(bad)))
        self.note = f"{self.note}; resubmitted as Slurm job {new} with --exclude={','.join(bad)}"
        self.job_id, self.view, self.final_seen, self.misses = new, None, None, 0
        self.book.tracker.hurry()

    def _lost(self) -> None:
        exits = rank_exits(self.run_dir)
        ok = self.world_size is not None and len(exits) >= self.world_size and first_failure(exits) is None
        self.exit_code = 0 if ok else 1
        self.note = (f"Slurm no longer reports job {self.job_id} and keeps no record of it (no accounting): "
                     "state worked out from the ranks' exit records")
        self.book.changed()

    def trial_status(self, parent: RunStatus) -> RunStatus:
        """This trial's own status.json (sweeps)."""
        old = read_status(self.run_dir)
        s = old or RunStatus(run_id=f"{parent.run_id}.trial-{self.trial}", name=parent.name, launcher="slurm",
                             job_file=parent.job_file, hosts=[], world_size=parent.world_size)
        exits = rank_exits(self.run_dir)
        s.ranks = {str(r): e for r, e in sorted(exits.items())}
        first = first_failure(exits, self.run_dir)
        s.first_failure = None if first is None else FirstFailure.of(first, first.describe())
        s.supervisor, s.nodes = parent.supervisor, [self.describe()]
        s.hosts = _hosts(self.view) or s.hosts
        v = self.view
        if self.exit_code is not None:
            ended_as = final_state(v.state) if v is not None and v.final and v.state != "succeeded" else None
            s.state = ended_as or ("succeeded" if self.exit_code == 0 else "failed")
            s.exit_code, s.ended = self.exit_code, s.ended or time.time()
        elif v is not None and v.state in ("starting", "running"):
            s.state = "running" if v.state == "running" else "starting"
            if v.state == "running" and s.started is None:
                s.started = time.time()
        s.note = self.note or _pending_note(self)
        return s


class SlurmBook:
    """What the nodes of one Slurm run share: the tracker, the run's status (the supervisor's object) and
    the knowledge of when to write it."""

    def __init__(self, status: RunStatus, run_dir: Path, runner: RunCommand = run_command, **tracker_args):
        self.status, self.run_dir, self.runner = status, run_dir, runner
        self.nodes: list[SlurmJobUnit] = []
        self.tracker = JobTracker((), runner, **tracker_args)
        self.cancel_wanted = self.cancelled = False
        self.cancel_asked_at = 0.0

    def add(self, node: SlurmJobUnit) -> SlurmJobUnit:
        self.nodes.append(node)
        self.tracker.ids.add(node.job_id)
        return node

    def cancel(self) -> None:
        """scancel every unfinished job of the run once (a sweep: its array job, all tasks at once). If
        scancel fails, the nodes try again at each refresh until it works or the jobs end."""
        if not self.cancel_wanted:
            self.cancel_wanted, self.cancel_asked_at = True, self.tracker.clock()
        if self.cancelled:
            return
        ids = sorted({n.slurm.array_job_id or n.job_id for n in self.nodes if n.exit_code is None})
        try:
            cancel(ids, self.runner)
        except SlurmError as exc:
            self.status.note = f"could not cancel yet (retrying): {exc}"
            write_status(self.run_dir, self.status)
        else:
            self.cancelled = True

    def requeued(self, node: SlurmJobUnit) -> None:
        """Each start of ``node``'s job that Slurm requeued, as an attempt of the run (written at once): so the
        goodput, ps's ATTEMPTS and the diagnosis of the last attempt count it (slurm_attempts.with_requeues)."""
        s = self.status
        found = slurm_attempts.with_requeues(s.attempts, node.base_attempt, node.history, node.job_id,
                                             s.started or s.created, lambda n: _attempt_end(self.run_dir, n))
        if found is not None:
            s.attempts = found
            self.changed()

    def stop_unanswered(self, tracker: JobTracker) -> bool:
        """A stop was asked for long ago and Slurm has not answered since (controller down, cluster gone):
        the supervisor should not wait forever."""
        since = max(self.cancel_asked_at, tracker.last_ok or 0.0)
        return self.cancel_wanted and tracker.error is not None and tracker.clock() - since > GIVE_UP_AFTER_STOP

    def changed(self) -> None:
        """Something Slurm reports changed: update and write the run's status (and the trials')."""
        s = self.status
        views = [n.view for n in self.nodes if n.view is not None]
        live = [v for v in views if not v.final]
        if not s.final and live:
            s.state = "running" if any(v.state == "running" for v in live) else "starting"
        if any(n.trial is not None for n in self.nodes):
            for node in self.nodes:
                write_status(node.run_dir, node.trial_status(s))
            s.note = _sweep_note(self.nodes)
            s.hosts = list(dict.fromkeys(h for n in self.nodes for h in _hosts(n.view)))
        else:
            node = self.nodes[0]
            s.hosts = _hosts(node.view) or s.hosts
            s.note = node.note or _pending_note(node)
            # cancelled outside cockpit: the run ends "stopped", as Slurm says. cockpit's own scancel without a
            # stop asked for is a stalled attempt ended for recover: (cockpit.launch.supervisor._stall)
            if node.view is not None and node.view.slurm_state == "CANCELLED" and not (s.stop_requested
                                                                                       or self.cancel_wanted):
                s.stop_requested = True
        s.nodes = [n.describe() for n in self.nodes]
        write_status(self.run_dir, s)


def make_slurm_nodes(status: RunStatus, run_dir: Path, runner: RunCommand = run_command,
                     **tracker_args) -> list[SlurmJobUnit]:
    """The supervisor's nodes for a submitted Slurm run (its status.json has the job ids); ``tracker_args``
    go to the shared JobTracker (min_interval, max_interval, clock)."""
    missing = [n for n in status.nodes if n.slurm is None or not n.slurm.job_id]
    if missing or not status.nodes:
        raise SystemExit(f"cockpit supervisor: {run_dir} was never submitted (no Slurm job id in status.json)")
    book = SlurmBook(status, run_dir, runner, **tracker_args)
    return [book.add(SlurmJobUnit(entry, book)) for entry in status.nodes]


def _stderr(text: str) -> None:
    """To supervisor.log (the supervisor's stderr)."""
    with contextlib.suppress(OSError, ValueError):
        print(text, file=sys.stderr, flush=True)


def _attempt_end(run_dir: Path, attempt: int) -> float | None:
    """When attempt ``attempt``'s ranks ended: the latest of its exit records, which the batch script set aside
    in logs/attempt-<N>/ at the requeued start; None where there is none."""
    aside = run_dir / layout.LOGS / f"attempt-{attempt}"
    try:
        names = os.listdir(aside)
    except OSError:
        return None
    files = {p[0]: (p[1], aside / name) for name in names if (p := layout.parse_rank_file(name)) and p[2] == "exit"}
    return max((e.time for e in rank_exits(aside, files).values()), default=None)


def _exit_count(logs: Path) -> int:
    try:
        return sum(1 for e in os.scandir(logs) if e.name.endswith(".exit"))
    except OSError:
        return 0


def _hosts(view: JobView | None) -> list[str]:
    if view is None or not view.nodes:
        return []
    try:
        return hostlist.expand(view.nodes)
    except hostlist.HostlistError:
        return [view.nodes]


def _pending_note(node: SlurmJobUnit) -> str | None:
    v = node.view
    if node.error:
        return f"cannot ask Slurm about job {node.job_id} (retrying): {node.error}"
    if v is None:
        return f"Slurm job {node.job_id}: not seen in squeue yet"
    row = lookup(v.slurm_state)
    text = f"Slurm job {node.job_id} {v.slurm_state}"
    if row.state == UNKNOWN:
        text += " (a Slurm state cockpit does not know; the run's state is left as it was)"
    elif v.reason and v.state == "starting":
        text += f" ({row.meaning}; reason {v.reason})"
    elif v.nodes:
        text += f" on {v.nodes}"
    requeues = slurm_attempts.describe(node.history)
    return f"{text}; {requeues}" if requeues else text


def _sweep_note(nodes: list[SlurmJobUnit]) -> str:
    counts: dict[str, int] = {}
    for n in nodes:
        state = "succeeded" if n.exit_code == 0 else ("failed" if n.exit_code else
                                                      (n.view.state if n.view else "submitted"))
        counts[state] = counts.get(state, 0) + 1
    array = nodes[0].slurm.array_job_id or "?"
    return f"sweep of {len(nodes)} trials, Slurm array job {array}: " + ", ".join(
        f"{k} {v}" for k, v in sorted(counts.items()))
