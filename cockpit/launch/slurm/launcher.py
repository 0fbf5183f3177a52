"""The Slurm launcher: render the batch script into a run directory, submit it with ``sbatch --parsable``,
record the job id; the run's supervisor then follows the job (cockpit.launch.slurm.unit).

Run directory of a Slurm run (see cockpit.run.store for the common part):

    commands/sbatch.sh      the batch script as submitted (`cockpit render` prints the same text)
    logs/agent.sbatch.log   the batch shell's output: srun's own errors, USR1 forwarding, attempt lines
    logs/rank-R.NODE.log    each task's output through the rank wrapper, .exit when it ends
    logs/srun-T.HOST.out    srun's per-task files: what the wrapper could not capture
    logs/attempt-N/         rank exit records of attempt N, set aside when the job was requeued
    trial-<i>/              sweeps: one run directory per array task (its own logs/, checkpoints/, status.json)

The job id is kept in status.json: ``nodes`` has one entry per Slurm job or array task
({"host", "job_id", ...}; "trial" and "run_dir" for sweeps).

Every Slurm command inherits this process's environment, so SLURM_CONF (another cluster, a test cluster)
is honoured throughout.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.launch.protocol import LaunchOptions, Preflight, PreflightOptions, TimeLimits, Warn
from cockpit.launch.site import DEFAULT_MASTER_PORT, LaunchError, facts_for, interpreter, job_files
from cockpit.launch.slurm.preflight import install_nodecheck
from cockpit.launch.slurm.submission import parse_job_id, submit_env
from cockpit.launch.supervision import supervisor_alive
from cockpit.render import render
from cockpit.render.sbatch import BATCH_HOST
from cockpit.run import layout
from cockpit.run.records import NodeRecord, SlurmJob, Trial
from cockpit.run.store import (
    RunStatus,
    create_run_dir,
    install_hook,
    is_sweep,
    new_run_id,
    read_status,
    write_private,
    write_status,
)
from cockpit.run.trust import own_run
from cockpit.slurm.command import RunCommand, SlurmError, run_command
from cockpit.slurm.query import JobView, query_jobs
from cockpit.slurm.scancel import cancel
from cockpit.spec.model import JobSpec

if TYPE_CHECKING:
    from cockpit.hang.evidence import Evidence
    from cockpit.preflight.checks import Check
    from cockpit.render.site import Site

SCRIPT = Path(layout.SBATCH_SCRIPT)


class SlurmLauncher:
    """sbatch at launch; the supervisor follows the job (cockpit.launch.protocol)."""

    name = "slurm"
    runs_here = False
    look_every = 5.0  # each look asks Slurm
    follows_without_supervisor = True  # Slurm says how the job ended
    job_sections = frozenset({"slurm"})
    nodes_are_torchruns = False
    has_sweeps = True  # a sweep is a job array
    replacement_hint = "return it to service"

    def shell_env(self, spec: JobSpec, environ: Mapping[str, str] | None = None) -> JobSpec:
        """sbatch exports this shell to the job."""
        return spec

    def render_facts(self, spec: JobSpec, job_path: str, run_dir: str, run_id: str, master_port: int,
                     extra_args: tuple[str, ...] = ()) -> Site:
        return render_facts(spec, job_path, run_dir, run_id, master_port, extra_args)

    def preflight(self, spec: JobSpec, job_path: str, options: PreflightOptions) -> Preflight:
        """What `cockpit run` checks before sbatch (cockpit.preflight.slurm, over sinfo's nodes). Slurm picks
        the nodes at run time: `doctor --job JOB` (with a nodelist) or --cluster probes them."""
        from cockpit.launch.slurm import facts as slurm_facts
        from cockpit.preflight.slurm import slurm_checks

        return Preflight(slurm_checks(spec, slurm_facts.gather(spec, job_path, subprocess.run, options.timeout)), {})

    def here_checks(self, spec: JobSpec, job_path: str) -> list[Check]:
        """The workdir and the script on this submit host, as its preflight checks them."""
        from cockpit.preflight.local import file_checks

        return file_checks(spec, job_files(spec, job_path, interpreter(spec)))

    def prepare(self, spec: JobSpec, job_path: str, runs_dir: Path, extra_args: tuple[str, ...],
                options: LaunchOptions) -> Path:
        if options.preflight:
            from cockpit.launch.slurm import facts

            facts.check(spec, job_path)
        return prepare(spec, job_path, runs_dir, extra_args)

    def schedule(self, run_dir: Path) -> None:
        """sbatch here, not in the supervisor: its refusal reaches the user at once."""
        submit(run_dir)

    def start(self, status: RunStatus, run_dir: Path, grace: float | None = None) -> list:
        from cockpit.launch.slurm.unit import make_slurm_nodes

        return make_slurm_nodes(status, run_dir)

    def watched(self, status: RunStatus) -> bool:
        return not is_sweep(status)  # a sweep's array tasks are runs of their own

    def summarize(self, status: RunStatus, nodes: list) -> str | None:
        """A job the preflight stopped: its note (bad node, reason, hint) is the whole story, no rank ran."""
        stopped = [n for n in nodes if getattr(n, "preflight_failed", False)]
        return stopped[0].note if stopped and not is_sweep(status) else None

    def stop(self, run_dir: Path, status: RunStatus, grace: float, by: str, warn: Warn) -> str:
        try:
            cancel(job_ids(status))
        except SlurmError as exc:
            raise LaunchError(str(exc)) from None
        return f"cancelled with scancel by {by} (no supervisor)"

    def survey(self, statuses: Iterable[RunStatus], warn: Warn) -> dict[str, JobView]:
        """Slurm's view of every unfinished Slurm run, in one batched query (see ``job_views``)."""
        statuses = list(statuses)
        if not any(s.launcher == "slurm" and not s.final for s in statuses):
            return {}
        try:
            return job_views(statuses)
        except SlurmError as exc:
            warn(f"could not ask Slurm about its jobs: {exc}")
            return {}

    def recover(self, run_dir: Path, status: RunStatus, survey: object, warn: Warn) -> RunStatus:
        views = survey if isinstance(survey, dict) else {}  # survey(): Slurm's view by job id, or {}
        return reconcile(run_dir, status, views)

    def hosts(self, spec: JobSpec) -> list[str]:
        """The job's nodelist, expanded; NodesError where Slurm picks the nodes when the job starts."""
        from cockpit.fleet.cluster import NodesError, expand_hostlist, scontrol_hostnames

        if not spec.nodelist:
            raise NodesError(f"{spec.source}: Slurm picks this job's nodes when it starts (no nodelist); "
                             "give --nodes, or --cluster to look at the partition")
        return expand_hostlist(spec.nodelist, scontrol_hostnames())

    def time_limits(self, spec: JobSpec | None) -> TimeLimits:
        """slurm.time per attempt; Slurm ends the job at it even where it is not written in the job."""
        return TimeLimits(spec.slurm.time if spec else None, True, bool(spec and spec.slurm.requeue))

    def attempt_start(self, run_dir: Path) -> float | None:
        from cockpit.launch.slurm.attempts import attempt_start

        return attempt_start(run_dir)

    def rerun_sweep(self, old_dir: Path, new_dir: Path, rename: Callable[[str], str], failed: list[NodeRecord],
                    which: str) -> str:
        from cockpit.launch.slurm.rerun import rerun_array

        rerun_array(old_dir, new_dir, rename, [n.trial.index for n in failed if n.trial is not None])
        return which

    def rerun_trial(self, old_tdir: Path, tdir: Path, rename: Callable[[str], str], trial: Trial) -> NodeRecord:
        from cockpit.launch.slurm.rerun import rerun_trial

        return rerun_trial(old_tdir, tdir, trial)

    def replacement(self, run_dir: Path, status: RunStatus, leave_out: tuple[str, ...]) -> str | None:
        from cockpit.launch.slurm import relaunch

        try:
            return relaunch.replacement(run_dir, status, leave_out)
        except SlurmError as exc:
            return str(exc)

    def relaunch(self, run_dir: Path, status: RunStatus, attempt: int, leave_out: tuple[str, ...]) -> str | None:
        """sbatch the run's script again into its directory, with --exclude of every node blamed so far."""
        from cockpit.launch.slurm import relaunch

        try:
            return relaunch.resubmit(run_dir, status, attempt, leave_out)
        except SlurmError as exc:
            raise LaunchError(str(exc)) from None

    def can_requeue(self, status: RunStatus) -> bool:
        """Where Slurm's clients (scancel, scontrol) are installed."""
        return clients_installed()

    def requeue(self, run_dir: Path) -> str:
        return requeue(run_dir)

    def stacks(self, run_dir: Path, status: RunStatus, ranks: set[int] | None = None,
               timeout: float = 5.0) -> dict[int, Evidence]:
        """``scancel --signal=URG JOBID``: slurmstepd delivers it to every process of the job's steps (SIGURG is
        ignored by default, so the wrappers and anything without the hook are unharmed); the run directory is
        on the shared filesystem, so the answers are read in place."""
        from cockpit.hang import gather
        from cockpit.slurm import scancel

        def by_slurm(_targets: set[int]) -> None:
            ids = job_ids(status)
            if ids:
                scancel.signal_steps(ids, "URG")

        return gather.collect(run_dir, status, ranks, timeout, signal_ranks=by_slurm)


def render_facts(spec: JobSpec, job_path: str, run_dir: str, run_id: str, master_port: int,
                 extra_args: tuple[str, ...] = ()) -> Site:
    """Slurm names the nodes at run time (node0, node1, ... stand for them); python3 on the nodes unless the job
    names one."""
    return facts_for(spec, job_path, run_dir, run_id, master_port, extra_args, python=interpreter(spec),
                     master_addr=spec.hosts[0] if spec.hosts else "",
                     node_names=tuple(f"node{i}" for i in range(spec.num_nodes)))


def prepare(spec: JobSpec, job_path: str, runs_dir: Path, extra_args: tuple[str, ...] = ()) -> Path:
    """Create the run directory with the job copy, the batch script and a `starting` status (not submitted)."""
    run_id = new_run_id(spec.name)
    run_dir = create_run_dir(runs_dir, run_id)
    write_private(run_dir / "job.yaml", Path(job_path).read_text(encoding="utf-8"))
    facts = render_facts(spec, job_path, str(run_dir.resolve()), run_id, spec.master_port or DEFAULT_MASTER_PORT,
                      extra_args)
    write_private(run_dir / SCRIPT, render(spec, facts, "sbatch"))
    if spec.slurm.preflight:
        install_nodecheck(run_dir)
    trials = spec.sweep.trials() if spec.sweep else []
    # A sweep's own directory has no ranks (its trials do): no world size, so no "missing ranks" either.
    status = RunStatus(run_id=run_id, name=spec.name, launcher="slurm", job_file=str(Path(job_path).resolve()),
                       hosts=[], world_size=None if trials else spec.world_size,
                       stall_after=spec.stall_after, on_stall=spec.on_stall, start_after=spec.start_after,
                       recover=spec.recover.to_dict() if spec.recover.enabled else None)
    for i, args in enumerate(trials):
        tdir = layout.trial_dir(run_dir, i)
        (tdir / layout.LOGS).mkdir(mode=0o700, parents=True)
        tdir.chmod(0o700)
        install_hook(tdir)
        if spec.slurm.preflight:
            install_nodecheck(tdir)
        status.nodes.append(NodeRecord(layout.trial_name(i), i, run_dir=str(tdir), trial=Trial(i, tuple(args)),
                                       slurm=SlurmJob(None), null_keys=frozenset({"job_id"})))
        write_status(tdir, RunStatus(run_id=f"{run_id}.trial-{i}", name=spec.name, launcher="slurm",
                                     job_file=status.job_file, hosts=[], world_size=spec.world_size,
                                     note=f"trial {i} of {len(trials)}: {' '.join(args)}"))
    if not trials:
        status.nodes.append(NodeRecord(BATCH_HOST, 0, slurm=SlurmJob(None), null_keys=frozenset({"job_id"})))
    write_status(run_dir, status)
    return run_dir


def submit(run_dir: Path, sbatch: str = "sbatch") -> str:
    """Submit the run's batch script; record and return the job id. On refusal the run is marked failed
    with sbatch's message and LaunchError carries it."""
    status = read_status(run_dir)
    if status is None:
        raise LaunchError(f"{run_dir}: no readable status.json")
    argv = [sbatch, "--parsable", str((run_dir / SCRIPT).resolve())]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=run_dir, env=submit_env())
    except FileNotFoundError:
        _refused(run_dir, status, "sbatch is not installed here")
        raise LaunchError("sbatch is not installed here (hint: run cockpit on a login node of the cluster, "
                          "or `cockpit render JOB` to see the script)") from None
    except subprocess.TimeoutExpired:
        _refused(run_dir, status, "sbatch gave no answer within 120 s")
        raise LaunchError("sbatch gave no answer within 120 s (hint: `scontrol ping`; the job may have "
                          "been queued anyway: check squeue)") from None
    if r.returncode != 0:
        message = (r.stderr or r.stdout).strip().replace("\n", "; ")
        _refused(run_dir, status, f"sbatch refused the job: {message}")
        raise LaunchError(f"sbatch refused the job: {message} (hint: the script is {run_dir / SCRIPT}; "
                          "check partition, account, gres and time against `sinfo`)")
    job_id = parse_job_id(r.stdout)
    status.nodes = [_submitted(node, job_id) for node in status.nodes]
    status.note = f"submitted as Slurm job {job_id}"
    write_status(run_dir, status)
    return job_id


def _submitted(node: NodeRecord, job_id: str) -> NodeRecord:
    """The node with sbatch's job id: an array task's own id, "<array>_<task>", for a sweep's trial."""
    job = node.slurm or SlurmJob(None)
    if node.trial is not None:
        return replace(node, slurm=replace(job, job_id=f"{job_id}_{node.trial.index}", array_job_id=job_id))
    return replace(node, slurm=replace(job, job_id=job_id))


def _refused(run_dir: Path, status: RunStatus, why: str) -> None:
    status.state, status.exit_code, status.note = "failed", 1, why
    write_status(run_dir, status)


def job_ids(status: RunStatus) -> list[str]:
    """The Slurm job (or array task) ids of a run, from its status.json."""
    return [n.slurm.job_id for n in status.nodes if n.slurm is not None and n.slurm.job_id]


@functools.cache
def clients_installed() -> bool:
    """scancel and scontrol are on PATH (looked for once: the TUI asks at every redraw of its keys)."""
    return shutil.which("scancel") is not None and shutil.which("scontrol") is not None


def requeue(run_dir: Path, runner: RunCommand = run_command) -> str:
    """Requeue a Slurm run now (the TUI's requeue); returns the command that did it. A job written with
    ``slurm.requeue: true`` traps USR1 in its batch shell: it gets USR1 exactly as before its time limit, so
    the ranks checkpoint, the job requeues itself and resumes where it stopped. Any other job is requeued by
    ``scontrol requeue`` (it starts over, from its last checkpoint if the script keeps one). Raises SlurmError;
    safeio.Untrusted for a run of another user (whose status.json names the job ids)."""
    own_run(run_dir, "requeue", "requeue")
    status = read_status(run_dir)
    if status is None:  # no readable status.json: no job ids to requeue
        raise SlurmError(f"run {run_dir.name}: no readable status.json in {run_dir}: nothing to requeue")
    ids = job_ids(status)
    if not ids or status.final:
        raise SlurmError(f"run {status.run_id} is {status.state}: nothing to requeue")
    script = run_dir / SCRIPT
    text = script.read_text(encoding="utf-8") if script.exists() else ""
    if "#SBATCH --requeue" in text and "trap forward_usr1 USR1" in text:
        argv = ["scancel", "--batch", "--signal=USR1", *ids]
    else:
        argv = ["scontrol", "requeue", *ids]
    r = runner(argv)
    if r.returncode != 0:
        raise SlurmError(f"{' '.join(argv)} exited {r.returncode}: {r.stderr.strip()}")
    return " ".join(argv)


def job_views(statuses: Iterable[RunStatus], runner: RunCommand = run_command) -> dict[str, JobView]:
    """Slurm's view of every unfinished Slurm run among ``statuses``, in ONE squeue call (plus accounting or
    the job-completion file for jobs that left the queue): what `cockpit ps` needs for many runs at once.
    Keyed by job id (array tasks as "<array>_<task>"). Raises SlurmError when squeue fails."""
    ids = [j for s in statuses if s.launcher == "slurm" and not s.final for j in job_ids(s)]
    return query_jobs(ids, runner) if ids else {}


def reconcile(run_dir: Path, status: RunStatus, views: dict[str, JobView]) -> RunStatus:
    """Fix the state of a Slurm run whose supervisor died, from ``views`` (see ``job_views``); written back
    once the job is over. A run with a live supervisor, or one Slurm says nothing about, is left alone."""
    mine = [views[j] for j in job_ids(status) if j in views]
    if status.final or supervisor_alive(status) or not mine:
        return status
    if not all(v.final for v in mine):
        status.state = "running" if any(v.state == "running" for v in mine) else "starting"
        status.note = "the supervisor is gone; Slurm still has the job (cockpit stop cancels it)"
        return status
    states = {v.state for v in mine}
    status.state = "stopped" if states == {"stopped"} else ("succeeded" if states == {"succeeded"} else "failed")
    status.exit_code = next((v.exit_status or 1 for v in mine if v.state != "succeeded"), 0)
    status.ended = status.ended or time.time()
    status.note = ("the supervisor died; state from Slurm: "
                   + ", ".join(f"job {v.job_id} {v.slurm_state}" for v in mine))
    write_status(run_dir, status)
    return status
