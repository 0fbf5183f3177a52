"""Local sweeps: a `sweep:` grid on this machine, trials side by side on disjoint GPU sets (seed 000's "run the
same model 4 times on one 8-GPU node"), or on CPU a few at a time.

The job's `gpus:` is the pool; `sweep.gpus_per_trial` (default: the whole pool) is each trial's share, so the
pool splits into slots of that many GPUs; `sweep.max_parallel` caps the slots (on CPU it is the number of slots,
default 1). Trial i runs in slot i mod P, after the trial before it in that slot ended (whatever its result): a
fixed plan, so every trial's script is written up front and `commands/` shows exactly what runs where.

    <run>/status.json           the sweep: one node per trial (a NodeRecord with its Trial: args, gpus, slot, state)
    <run>/logs/agent.trial-I.log  trial I's torchrun output (what `cockpit run` streams)
    <run>/trial-I/              trial I's own run directory: commands/node-0.sh, status.json, logs/rank-*,
                                metrics/, checkpoints/ (a local run; `cockpit logs <run>/trial-I` reads it)

Trials are independent, as Slurm array tasks are: one failing does not stop the others; the sweep fails if any
trial did. The supervisor (cockpit.launch.supervisor) polls one ``TrialUnit`` per trial; ``LocalSweepLauncher``
is the local launcher's sweep variant in cockpit.launch.registry.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from cockpit.launch import procs
from cockpit.launch.local.launcher import LocalLauncher, free_port, new_run, render_facts
from cockpit.launch.protocol import LaunchOptions
from cockpit.launch.site import LaunchError
from cockpit.render import default_kind, render
from cockpit.run import layout
from cockpit.run.records import PROCESS_KEYS, FirstFailure, NodeRecord, Trial
from cockpit.run.store import (
    RunStatus,
    first_failure,
    install_hook,
    rank_exits,
    read_status,
    write_private,
    write_status,
)
from cockpit.spec.model import JobSpec


class LocalSweepLauncher(LocalLauncher):
    """Trials side by side on disjoint GPU sets; stopped and recovered as any local run."""

    def prepare(self, spec: JobSpec, job_path: str, runs_dir: Path, extra_args: tuple[str, ...],
                options: LaunchOptions) -> Path:
        if options.preflight:
            from cockpit.launch.local import facts

            facts.check(spec, job_path)
        run_id, run_dir = new_run(spec, job_path, runs_dir)
        try:
            write_status(run_dir, prepare(spec, job_path, run_dir, run_id, extra_args, free_port))
        except LaunchError:
            shutil.rmtree(run_dir)
            raise
        return run_dir

    has_sweeps = True

    def rerun_sweep(self, old_dir: Path, new_dir: Path, rename: Callable[[str], str], failed: list[NodeRecord],
                    which: str) -> str:
        """Nothing of the sweep's own to write: each trial's script is."""
        slots = len({n.trial.slot for n in failed if n.trial is not None})
        return f"{which}, {slots} at a time"

    def rerun_trial(self, old_tdir: Path, tdir: Path, rename: Callable[[str], str], trial: Trial) -> NodeRecord:
        """The trial's script, renamed; it waits for its slot again."""
        script = layout.node_script(old_tdir, 0).read_text(encoding="utf-8")
        write_private(layout.node_script(tdir, 0), rename(script))
        return NodeRecord(layout.trial_name(trial.index), trial.index, state="pending", run_dir=str(tdir),
                          trial=Trial(trial.index, trial.args, trial.gpus, trial.slot))

    def start(self, status: RunStatus, run_dir: Path, grace: float | None = None) -> list:
        return make_trial_nodes(status, run_dir, 10.0 if grace is None else grace)

    def watched(self, status: RunStatus) -> bool:
        return False  # a sweep's trials are runs of their own

    def summarize(self, status: RunStatus, nodes: list) -> str | None:
        """How the trials ended, and which failed first (status.nodes brought up to date on the way)."""
        trials = [n for n in nodes if hasattr(n, "trial")]
        if not trials:
            return None
        status.nodes = [node.describe() for node in nodes]
        note = summarize(status)
        failed = [t for t in trials if t.info.state == "failed"]
        if failed:
            first = min(failed, key=lambda t: (t.status.ended or 0) if t.status else 0)
            ff = first.status.first_failure if first.status else None
            why = f" (rank {ff.rank} on {ff.host}: {ff.description})" if ff and ff.description else ""
            note += f"; first to fail: trial {first.trial}{why}"
        return note


def gpu_pool(spec: JobSpec) -> list[int]:
    """The GPU ids the sweep may use, in nvidia-smi order: the job's list, or every GPU NVML sees here."""
    if not spec.uses_gpus:
        return []
    if spec.gpu_ids is not None:
        return list(spec.gpu_ids)
    from cockpit import nvml

    report = nvml.read()
    if report.state != "ok" or not report.gpus:
        raise LaunchError(f"gpus: all, but this machine's GPUs cannot be counted: {report.reason or 'none found'} "
                          "(hint: list the ids, e.g. gpus: [0, 1, 2, 3])")
    return [g.index for g in report.gpus]


def slots(spec: JobSpec, pool: list[int]) -> list[tuple[int, ...]]:
    """The GPU set of each slot (trials running at once); on CPU, empty sets."""
    sweep = spec.sweep
    assert sweep is not None
    if not pool:
        return [()] * (sweep.max_parallel or 1)
    per = sweep.gpus_per_trial or len(pool)
    if per > len(pool):
        raise LaunchError(f"sweep.gpus_per_trial is {per} but the job has {len(pool)} GPUs "
                          f"({', '.join(map(str, pool))}) (hint: gpus_per_trial: {len(pool)} or fewer)")
    sets = [tuple(pool[k * per:(k + 1) * per]) for k in range(len(pool) // per)]
    return sets[:sweep.max_parallel] if sweep.max_parallel else sets


def prepare(spec: JobSpec, job_path: str, run_dir: Path, run_id: str, extra_args: tuple[str, ...],
            free_port) -> RunStatus:
    """Write every trial's directory and script; returns the sweep's status (not yet written)."""
    assert spec.sweep is not None
    gpu_sets = slots(spec, gpu_pool(spec))
    trials = spec.sweep.trials()
    status = RunStatus(run_id=run_id, name=spec.name, launcher="local", job_file=str(Path(job_path).resolve()),
                       hosts=[], world_size=None)  # the sweep has no ranks of its own: its trials do
    ports: set[int] = set()
    for i, args in enumerate(trials):
        slot = i % len(gpu_sets)
        gpus = gpu_sets[slot]
        tspec = replace(spec, sweep=None, args=spec.args + args, gpu_ids=gpus if gpus else spec.gpu_ids,
                        gpus_per_node=len(gpus) if gpus else spec.gpus_per_node)
        port = spec.master_port + slot if spec.master_port else free_port()
        while port in ports and not spec.master_port:
            port = free_port()
        ports.add(port)
        tdir = layout.trial_dir(run_dir, i)
        (tdir / layout.COMMANDS).mkdir(mode=0o700, parents=True)
        (tdir / layout.LOGS).mkdir(mode=0o700)
        install_hook(tdir)
        tdir.chmod(0o700)
        trun = f"{run_id}.trial-{i}"
        facts = render_facts(tspec, job_path, str(tdir.resolve()), trun, port, extra_args)
        write_private(layout.node_script(tdir, 0), render(tspec, facts, default_kind(tspec), 0))
        write_status(tdir, RunStatus(run_id=trun, name=spec.name, launcher="local", job_file=status.job_file,
                                     hosts=list(facts.node_names), world_size=tspec.world_size,
                                     note=f"trial {i} of {len(trials)}: {' '.join(args)}"))
        status.nodes.append(NodeRecord(layout.trial_name(i), i, state="pending", run_dir=str(tdir),
                                       trial=Trial(i, tuple(args), tuple(gpus), slot)))
    status.note = describe_plan(len(trials), gpu_sets)
    return status


def describe_plan(n: int, gpu_sets: list[tuple[int, ...]]) -> str:
    where = " | ".join(",".join(map(str, s)) for s in gpu_sets) if gpu_sets[0] else "CPU"
    return f"sweep of {n} trials, {len(gpu_sets)} at a time ({'GPUs ' + where if gpu_sets[0] else where})"


class TrialUnit:
    """One trial, started by the supervisor's poll once the trial before it in its slot has ended."""

    def __init__(self, run_dir: Path, node: NodeRecord, before: TrialUnit | None, grace: float):
        assert node.trial is not None and node.run_dir is not None, node
        self.run_dir, self.info, self.before, self.grace = run_dir, node, before, grace
        self.trial = node.trial.index
        self.dir = Path(node.run_dir)
        self.proc: subprocess.Popen | None = None
        self.rc: int | None = None
        self.cancelled = False  # stopped before it started: it never will
        self.terminated = False  # stopped while running
        self.failed_at: float | None = None
        self.status = read_status(self.dir)

    # -- what the supervisor calls ---------------------------------------------------------------------------
    def poll(self) -> int | None:
        if self.rc is not None:
            return self.rc
        if self.proc is None:
            if self.cancelled:
                return self._end(None)
            if self.before is None or self.before.poll() is not None:
                self._start()
            return None
        self._watch_ranks()
        rc = self.proc.poll()
        if rc is None:
            return None
        return self._end(128 - rc if rc < 0 else rc)

    def terminate(self) -> None:
        if self.proc is None:
            self.cancelled = True
        elif self.proc.poll() is None:
            self.terminated = True
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> int:
        """SIGKILL what is left of this trial's processes (found by its run id); how many needed it."""
        return procs.kill_run(self.status.run_id, grace=2.0) if self.status else 0

    def describe(self) -> NodeRecord:
        return replace(self.info, pid=self.proc.pid if self.proc else None, exit_code=self.rc,
                       null_keys=self.info.null_keys | PROCESS_KEYS)

    # -- inside ------------------------------------------------------------------------------------------------
    def _start(self) -> None:
        log = open(layout.agent_log(self.run_dir, layout.trial_name(self.trial)), "ab")  # noqa: SIM115
        trial = self.info.trial
        assert trial is not None, self.info  # checked in __init__; the record is only replaced with a state
        log.write(f"cockpit: trial {self.trial}: {' '.join(trial.args)}".encode()
                  + (f" (GPUs {','.join(map(str, trial.gpus))})" if trial.gpus else "").encode()
                  + b"\n")
        log.flush()
        self.proc = subprocess.Popen(["bash", str(layout.node_script(self.dir, 0))], stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.dir)
        log.close()
        self.info = replace(self.info, state="running")
        if self.status is not None:  # no status.json to write into: nothing is written (as in _write)
            self._write(state="running", started=time.time(),
                        supervisor=None, nodes=[NodeRecord(self.status.hosts[0], 0, pid=self.proc.pid)])

    def _watch_ranks(self) -> None:
        """A failed rank: torchrun gets ``grace`` seconds to stop the trial's other ranks, then we do."""
        if self.failed_at is None:
            if first_failure(rank_exits(self.dir)) is not None:
                self.failed_at = time.monotonic()
        elif time.monotonic() - self.failed_at > self.grace:
            self.kill()

    def _end(self, rc: int | None) -> int:
        leftover = self.kill() if self.proc is not None else 0
        exits = rank_exits(self.dir)
        first = first_failure(exits, self.dir)
        if rc is None:
            state, rc = "stopped", 0  # cancelled before it started: not a failure of the sweep
        elif rc != 0 and self.terminated:
            state = "stopped"
        else:
            state = "succeeded" if rc == 0 and first is None else "failed"
        self.rc = rc if state != "succeeded" else 0
        self.info = replace(self.info, state=state)
        note = self.status.note if self.status else None
        if leftover:
            note = (f"{note}; " if note else "") + f"{leftover} leftover processes needed SIGKILL"
        self._write(state=state, ended=time.time(), exit_code=self.rc, note=note,
                    ranks={str(r): e for r, e in sorted(exits.items())},
                    first_failure=None if first is None else FirstFailure.of(first, first.describe()),
                    stop_requested=state == "stopped")
        return self.rc

    def _write(self, **changes) -> None:
        if self.status is None:
            return
        for key, value in changes.items():
            setattr(self.status, key, value)
        write_status(self.dir, self.status)


def make_trial_nodes(status: RunStatus, run_dir: Path, grace: float) -> list[TrialUnit]:
    """One node per trial; each waits for the trial before it in its slot."""
    last: dict[int | None, TrialUnit] = {}  # slot -> its last trial
    nodes = []
    for node in status.nodes:
        slot = node.trial.slot if node.trial is not None else None
        trial = TrialUnit(run_dir, node, last.get(slot), grace)
        last[slot] = trial
        nodes.append(trial)
    return nodes


def summarize(status: RunStatus) -> str:
    """The sweep's note at its end: the plan, then how many trials ended how."""
    counts: dict[str, int] = {}
    for node in status.nodes:
        counts[node.state or "?"] = counts.get(node.state or "?", 0) + 1
    plan = (status.note or "").split(":")[0]
    return f"{plan}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
