"""The Launcher protocol: what every launcher (local, its sweep variant, ssh, Slurm) does, so that `cockpit run`,
the supervisor, `cockpit ps` / `stop` and the TUI dispatch through cockpit.launch.registry and never test a
launcher's name themselves (tests/test_launcher_seam.py holds them to it). Adding a launcher is one package under
cockpit/launch/ (its class and whatever modules it needs, importing only launch's shared modules) and one line in
the registry.

Besides the life of a run (below), the launcher answers every question whose answer depends on it: its preflight
(``preflight``, ``here_checks``), where its job runs (``hosts``, ``render_facts``, ``shell_env``), how its ranks
are reached (``runs_here``, ``stacks``), how its runs are followed (``look_every``,
``follows_without_supervisor``), its time limits and where an attempt starts (``time_limits``,
``attempt_start``), requeue (``can_requeue``, ``requeue``), sweeps (``has_sweeps``, ``rerun_sweep``,
``rerun_trial``) and the job-file sections it reads of its own (``job_sections``).

The life of a run, as torchx splits ``submit = submit_dryrun + schedule``:

    run_dir = launcher.prepare(spec, job_path, runs_dir, extra_args, options)  # the dry run, as a value
    launcher.schedule(run_dir)                          # hand it to a scheduler (sbatch); nothing for most
    nodes = launcher.start(status, run_dir, grace)      # in the supervisor: the units of work, started;
                                                        # each node's poll()/describe() is the run's status
    note = launcher.stop(run_dir, status, grace, by, warn)          # no supervisor left: stop it ourselves
    status = launcher.recover(run_dir, status, launcher.survey(statuses, warn))  # the supervisor died

``prepare`` writes the whole run directory (the job, the rendered scripts, status.json "starting") and starts
nothing, so what will run can be read and tested before anything does. ``survey`` is one batched look for
many runs at once (one squeue for every Slurm run of `cockpit ps`), handed to each run's ``recover``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from cockpit.hang.evidence import Evidence
    from cockpit.hang.transport import TransportGather
    from cockpit.preflight.checks import Check
    from cockpit.remote import SSHOptions
    from cockpit.render.site import Site
    from cockpit.run.records import NodeRecord, Trial
    from cockpit.run.store import RunStatus
    from cockpit.spec.model import JobSpec

Warn = Callable[[str], None]


@dataclass(frozen=True)
class LaunchOptions:
    """What the user may ask of a launch beyond the job file (`cockpit run` flags). Launchers ignore what
    does not concern them: today both concern the ssh launcher only."""

    preflight: bool = True  # False: --no-preflight, launch although checks failed
    trust_new_hosts: bool = False  # --trust-new-hosts: accept and remember unknown ssh host keys


@dataclass(frozen=True)
class PreflightOptions:
    """What `cockpit doctor JOB` may hand a launcher's preflight. Launchers take what concerns them."""

    timeout: float = 20.0  # seconds for each question (a probe, sinfo, each node)
    python: str | None = None  # the interpreter on the nodes (--python; ssh)
    ssh: Callable[[], SSHOptions] | None = None  # the cluster file's SSH settings with the command's flags,
    # read only by a launcher that uses SSH (a broken cluster file does not concern a local job)


@dataclass(frozen=True)
class Preflight:
    """A launcher's preflight, as `cockpit doctor JOB` shows it: the checks; what --json prints beside them,
    in order; and text printed after the checks' lines (None: nothing, not even an empty line)."""

    checks: list[Check]
    extra: dict[str, object]
    text: str | None = None


@dataclass(frozen=True)
class TimeLimits:
    """How long a run of this job may hold its resources, for the forecast. Default: no limit."""

    time: str | None = None  # the limit in sbatch --time's form (slurm.time), None where there is none
    limited: bool = False  # a scheduler ends the run at a limit, known here or not
    requeue: bool = False  # it checkpoints before the limit and requeues itself


class Unit(Protocol):
    """One unit of work as the supervisor polls it (a local torchrun, a sweep's trial, a Slurm job, an ssh
    node). Started when the launcher's ``start`` returns it."""

    def poll(self) -> int | None:
        """The exit code once it has ended, else None."""

    def terminate(self) -> None:
        """Ask it to stop (SIGTERM, scancel, the stop script); the supervisor escalates after the grace."""

    def describe(self) -> NodeRecord:
        """Its entry in status.json's ``nodes``."""

    def kill(self) -> int:
        """SIGKILL what is left of processes it owns under a run id of its own (a local sweep's trial), at the
        end of a stop; how many needed it. 0 for a unit whose processes are the run's own (or not here)."""


@runtime_checkable
class GivesUp(Protocol):
    """A unit whose node the teardown waits for while it cannot be reached (ssh: up to Timing.give_up)."""

    def give_up(self, why: str) -> None:
        """Stop waiting for its node now, the evidence blames it (``why``); told after ``terminate``."""


class Launcher(Protocol):
    name: str  # status.json's "launcher"
    runs_here: bool  # its ranks run on this machine: their pids, process states, interfaces and GPUs are read here
    look_every: float  # seconds between a follower's looks at the supervisor (asking nodes or Slurm costs)
    follows_without_supervisor: bool  # a follower can still see the run end without its supervisor (ssh: no)
    job_sections: frozenset[str]  # the job-file sections it reads of its own: "slurm", "node_env"
    nodes_are_torchruns: bool  # each of status.json's nodes is a torchrun it started (Slurm's: the batch job)
    has_sweeps: bool  # its runs may be sweeps, whose failed trials `cockpit sweep rerun` runs again
    replacement_hint: str  # recover:'s node policy: what a person may do instead of fixing a blamed node
    resume_instead: str | None  # None: `cockpit run --resume` continues its stopped runs; else what to do instead

    def shell_env(self, spec: JobSpec, environ: Mapping[str, str] | None = None) -> JobSpec:
        """The job as this launcher runs it from this shell: the ssh launcher adds the shell's NCCL_*/GLOO_*
        variables (nothing crosses SSH by itself); the others return it (their ranks inherit the shell)."""

    def render_facts(self, spec: JobSpec, job_path: str, run_dir: str, run_id: str, master_port: int,
                     extra_args: tuple[str, ...] = ()) -> Site:
        """What the renderers need to know about where the job runs: its node names, the ranks' python, the
        master address (cockpit.launch.site.facts_for)."""

    def preflight(self, spec: JobSpec, job_path: str, options: PreflightOptions) -> Preflight:
        """The checks `cockpit run` makes before it launches (cockpit.preflight), made now: `cockpit doctor JOB`."""

    def here_checks(self, spec: JobSpec, job_path: str) -> list[Check]:
        """What this machine can say about the job at once, starting nothing heavy (`cockpit validate`): its
        files where they are read from here, a local job's interfaces; [] where they live on its nodes."""

    def prepare(self, spec: JobSpec, job_path: str, runs_dir: Path, extra_args: tuple[str, ...],
                options: LaunchOptions) -> Path:
        """Write the run directory and return it; nothing started. LaunchError (with a hint) if it cannot run."""

    def schedule(self, run_dir: Path) -> None:
        """Hand the prepared run to an outside scheduler, before the supervisor starts (LaunchError)."""

    def start(self, status: RunStatus, run_dir: Path, grace: float | None) -> list[Unit]:
        """In the supervisor: the run's units of work, started."""

    def watched(self, status: RunStatus) -> bool:
        """Whether the supervisor's hang watchdog follows the run (not a sweep's: its trials are runs of
        their own)."""

    def summarize(self, status: RunStatus, nodes: list[Unit]) -> str | None:
        """The run's note at its end when the launcher knows better than the supervisor; None otherwise."""

    def stop(self, run_dir: Path, status: RunStatus, grace: float, by: str, warn: Warn) -> str:
        """Stop a run that has no supervisor; returns the note saying how. LaunchError if it cannot."""

    def survey(self, statuses: Iterable[RunStatus], warn: Warn) -> object:
        """One batched look at the unfinished runs of this launcher among ``statuses``, for ``recover``."""

    def recover(self, run_dir: Path, status: RunStatus, survey: object, warn: Warn) -> RunStatus:
        """The state of a run whose supervisor may have died, worked out again (and written back)."""

    def hosts(self, spec: JobSpec) -> list[str]:
        """The nodes a job runs on, known before it starts (`cockpit gpus --job`, `cockpit doctor --job`);
        cockpit.fleet.cluster.NodesError (with a hint) where the launcher learns them only then."""

    def time_limits(self, spec: JobSpec | None) -> TimeLimits:
        """The job's time limit as its launcher enforces it (``spec`` None: the job file could not be read)."""

    def attempt_start(self, run_dir: Path) -> float | None:
        """When the run's current attempt began, where the launcher restarts runs (a Slurm requeue); else None."""

    def rerun_sweep(self, old_dir: Path, new_dir: Path, rename: Callable[[str], str], failed: list[NodeRecord],
                    which: str) -> str:
        """The new sweep run of a rerun of ``failed`` trials (cockpit.launch.rerun): its own files written from
        the old run's with ``rename`` (Slurm: the array script for the failed indices); the new run's note.
        LaunchError where it has no sweeps."""

    def rerun_trial(self, old_tdir: Path, tdir: Path, rename: Callable[[str], str], trial: Trial) -> NodeRecord:
        """One failed trial laid out again in ``tdir`` (made, with its hook): its own scripts written from the
        old trial's with ``rename``; the new sweep's record of it."""

    def replacement(self, run_dir: Path, status: RunStatus, leave_out: tuple[str, ...]) -> str | None:
        """Why the run's next attempt cannot run without the nodes ``leave_out`` (recover:'s node policy), in
        words that follow "node N is to blame and"; None where it can (Slurm: sbatch --test-only --exclude)."""

    def relaunch(self, run_dir: Path, status: RunStatus, attempt: int, leave_out: tuple[str, ...]) -> str | None:
        """Make attempt ``attempt`` (>= 1) of the run ready for ``start``, without ``leave_out``; what was done
        (the command, for the run's note), None where ``start`` alone starts it again (local). Updates
        ``status`` (Slurm: the node record's new job id). Raises the launcher's error when it cannot."""

    def can_requeue(self, status: RunStatus) -> bool:
        """Whether ``requeue`` can act on this run from here (the TUI offers it only then)."""

    def requeue(self, run_dir: Path) -> str:
        """Requeue the run now; the command that did it. Raises the launcher's error (or safeio.Untrusted for
        another user's run)."""

    def stacks(self, run_dir: Path, status: RunStatus, ranks: set[int] | None = None,
               timeout: float = 5.0) -> dict[int, Evidence]:
        """Every running rank's (or ``ranks``') stack and Flight Recorder state, asked with SIGURG the way its
        ranks can be reached (cockpit.hang.gather); what answered within ``timeout``. The run goes on."""

    def links(self, run_dir: Path, status: RunStatus) -> TransportGather | None:
        """The kernel's view of the running ranks' connections (cockpit.hang.transport), read without disturbing
        them, for the slow-link watch (cockpit.hang.linkwatch); None where this launcher cannot read them."""
