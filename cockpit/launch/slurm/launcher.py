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

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.launch.site import LaunchError, interpreter, job_files

# The run side (making, submitting, requeueing, reconciling a run: cockpit.launch.slurm.job, with the run store,
# the renderers and the Slurm queries) is imported where it is used: `cockpit validate` and `render` ask this
# launcher only for its checks and facts.
if TYPE_CHECKING:
    from cockpit.hang.evidence import Evidence
    from cockpit.hang.transport import TransportGather
    from cockpit.launch.protocol import LaunchOptions, Preflight, PreflightOptions, TimeLimits, Warn
    from cockpit.preflight.checks import Check
    from cockpit.render.site import Site
    from cockpit.run.records import NodeRecord, Trial
    from cockpit.run.store import RunStatus
    from cockpit.slurm.query import JobView
    from cockpit.spec.model import JobSpec


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
    # No `cockpit requeue` command: a job still in Slurm is requeued from the TUI's run view (R: USR1 or
    # `scontrol requeue`, cockpit.launch.slurm.job.requeue); an ended one is submitted again as a new run.
    resume_instead: str | None = ("cockpit run {job} submits it again; a job still in Slurm is requeued by R in "
                                  "the TUI's run view: cockpit --run {run}")

    def shell_env(self, spec: JobSpec, environ: Mapping[str, str] | None = None) -> JobSpec:
        """sbatch exports this shell to the job."""
        return spec

    def render_facts(self, spec: JobSpec, job_path: str, run_dir: str, run_id: str, master_port: int,
                     extra_args: tuple[str, ...] = ()) -> Site:
        from cockpit.launch.slurm.submission import render_facts

        return render_facts(spec, job_path, run_dir, run_id, master_port, extra_args)

    def preflight(self, spec: JobSpec, job_path: str, options: PreflightOptions) -> Preflight:
        """What `cockpit run` checks before sbatch (cockpit.preflight.slurm, over sinfo's nodes). Slurm picks
        the nodes at run time: `doctor --job JOB` (with a nodelist) or --cluster probes them."""
        import subprocess

        from cockpit.launch.protocol import Preflight
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
        from cockpit.launch.slurm.job import prepare

        return prepare(spec, job_path, runs_dir, extra_args)

    def schedule(self, run_dir: Path) -> None:
        """sbatch here, not in the supervisor: its refusal reaches the user at once."""
        from cockpit.launch.slurm.job import submit

        submit(run_dir)

    def start(self, status: RunStatus, run_dir: Path, grace: float | None = None) -> list:
        from cockpit.launch.slurm.unit import make_slurm_nodes

        return make_slurm_nodes(status, run_dir)

    def watched(self, status: RunStatus) -> bool:
        from cockpit.run.store import is_sweep

        return not is_sweep(status)  # a sweep's array tasks are runs of their own

    def summarize(self, status: RunStatus, nodes: list) -> str | None:
        """A job the preflight stopped: its note (bad node, reason, hint) is the whole story, no rank ran."""
        from cockpit.run.store import is_sweep

        stopped = [n for n in nodes if getattr(n, "preflight_failed", False)]
        return stopped[0].note if stopped and not is_sweep(status) else None

    def stop(self, run_dir: Path, status: RunStatus, grace: float, by: str, warn: Warn) -> str:
        from cockpit.launch.slurm.job import job_ids
        from cockpit.slurm.command import SlurmError
        from cockpit.slurm.scancel import cancel

        try:
            cancel(job_ids(status))
        except SlurmError as exc:
            raise LaunchError(str(exc)) from None
        return f"cancelled with scancel by {by} (no supervisor)"

    def survey(self, statuses: Iterable[RunStatus], warn: Warn) -> dict[str, JobView]:
        """Slurm's view of every unfinished Slurm run, in one batched query (see ``job_views``)."""
        from cockpit.launch.slurm.job import job_views
        from cockpit.slurm.command import SlurmError

        statuses = list(statuses)
        if not any(s.launcher == "slurm" and not s.final for s in statuses):
            return {}
        try:
            return job_views(statuses)
        except SlurmError as exc:
            warn(f"could not ask Slurm about its jobs: {exc}")
            return {}

    def recover(self, run_dir: Path, status: RunStatus, survey: object, warn: Warn) -> RunStatus:
        from cockpit.launch.slurm.job import reconcile

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
        from cockpit.launch.protocol import TimeLimits

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
        from cockpit.slurm.command import SlurmError

        try:
            return relaunch.replacement(run_dir, status, leave_out)
        except SlurmError as exc:
            return str(exc)

    def relaunch(self, run_dir: Path, status: RunStatus, attempt: int, leave_out: tuple[str, ...]) -> str | None:
        """sbatch the run's script again into its directory, with --exclude of every node blamed so far."""
        from cockpit.launch.slurm import relaunch
        from cockpit.slurm.command import SlurmError

        try:
            return relaunch.resubmit(run_dir, status, attempt, leave_out)
        except SlurmError as exc:
            raise LaunchError(str(exc)) from None

    def can_requeue(self, status: RunStatus) -> bool:
        """Where Slurm's clients (scancel, scontrol) are installed."""
        from cockpit.launch.slurm.job import clients_installed

        return clients_installed()

    def requeue(self, run_dir: Path) -> str:
        from cockpit.launch.slurm.job import requeue

        return requeue(run_dir)

    def stacks(self, run_dir: Path, status: RunStatus, ranks: set[int] | None = None,
               timeout: float = 5.0) -> dict[int, Evidence]:
        """``scancel --signal=URG JOBID``: slurmstepd delivers it to every process of the job's steps (SIGURG is
        ignored by default, so the wrappers and anything without the hook are unharmed); the run directory is
        on the shared filesystem, so the answers are read in place, each rank's sockets with them (the hook writes
        logs/rank-R.HOST.links: cockpit.hang.ranklinks)."""
        from cockpit.hang import gather
        from cockpit.launch.slurm.job import job_ids
        from cockpit.slurm import scancel

        def by_slurm(_targets: set[int]) -> None:
            ids = job_ids(status)
            if ids:
                scancel.signal_steps(ids, "URG")

        return gather.collect(run_dir, status, ranks, timeout, signal_ranks=by_slurm, rank_links=True)

    def links(self, run_dir: Path, status: RunStatus) -> TransportGather | None:
        """The ranks' sockets are on the job's nodes, where no agent of cockpit's runs: each running rank's hook
        reads its own when asked (logs/links.req) into logs/rank-R.HOST.links (cockpit.hang.ranklinks)."""
        from cockpit.hang.ranklinks import ask_rank_links
        from cockpit.run.store import rank_exits, rank_files

        exits = rank_exits(run_dir)
        hosts = {r: h for r, (h, _p) in rank_files(run_dir, "log").items() if r not in exits}
        return ask_rank_links(run_dir, hosts) if hosts else None
