"""A Slurm run's job, on the submit host: the run directory made with its batch script (``prepare``), the
script submitted (``submit``), requeued (``requeue``), Slurm asked about many runs at once (``job_views``) and a
run whose supervisor died set right from Slurm's view (``reconcile``). cockpit.launch.slurm.launcher is the
launcher object over these; it loads this module only when a run is made, followed or stopped, so `cockpit
validate` and `render` of a Slurm job load no run store, no Slurm queries and no subprocess.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from cockpit.launch import submitter
from cockpit.launch.site import DEFAULT_MASTER_PORT, Ended, LaunchError
from cockpit.launch.slurm.preflight import install_nodecheck
from cockpit.launch.slurm.submission import parse_job_id, render_facts, submit_env
from cockpit.launch.slurm.waiting import Interrupted, interruptible, said_after
from cockpit.launch.supervision import supervisor_alive
from cockpit.render import render
from cockpit.render.sbatch import BATCH_HOST
from cockpit.run import layout
from cockpit.run.records import NodeRecord, SlurmJob, Trial
from cockpit.run.store import (
    RunStatus,
    create_run_dir,
    install_hook,
    new_run_id,
    read_status,
    write_private,
    write_status,
)
from cockpit.run.trust import own_run
from cockpit.slurm.command import RunCommand, SlurmError, run_command
from cockpit.slurm.query import JobView, query_jobs
from cockpit.spec.model import JobSpec

SCRIPT = Path(layout.SBATCH_SCRIPT)
SBATCH_TIMEOUT = 120.0  # seconds sbatch is given to answer

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
                       recover=spec.recover.to_dict() if spec.recover.enabled else None,
                       submitter=submitter.this_process())
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
    """Submit the run's batch script; record and return the job id. On refusal the run is marked unsubmitted
    with sbatch's message and LaunchError carries it; a cockpit ended while sbatch is slow to answer (SIGINT,
    SIGTERM, SIGHUP) marks it unsubmitted too and raises Ended."""
    status = read_status(run_dir)
    if status is None:
        raise LaunchError(f"{run_dir}: no readable status.json")
    argv = [sbatch, "--parsable", str((run_dir / SCRIPT).resolve())]
    try:
        with said_after("sbatch to submit the job: the Slurm controller is slow to answer (up to 120 s; Ctrl-C "
                        "gives up, the run is then not submitted)"), interruptible():
            r = subprocess.run(argv, capture_output=True, text=True, timeout=SBATCH_TIMEOUT, cwd=run_dir,
                               env=submit_env())
    except Interrupted as exc:
        why = (f"not submitted: cockpit was ended ({exc}) while sbatch was submitting the job (if sbatch had "
               f"reached the controller, squeue --me --name {status.name} shows the job)")
        _refused(run_dir, status, why)
        raise Ended(why, exc.signum) from None
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
    """Nothing was submitted: the run is ``unsubmitted`` (no rank ran: not failed), with why; a sweep's trials
    (each a run of its own, trial-<i>/status.json) too, or they would stay ``starting`` for ever."""
    status.state, status.exit_code, status.note = "unsubmitted", 1, why
    status.ended = time.time()
    write_status(run_dir, status)
    for node in status.nodes:
        if node.trial is None or not node.run_dir:
            continue
        trial_dir = Path(node.run_dir)
        trial = read_status(trial_dir)
        if trial is not None and trial.state == "starting":
            trial.state, trial.exit_code, trial.ended = "unsubmitted", 1, status.ended
            trial.note = f"{trial.note}; {why}" if trial.note else why
            write_status(trial_dir, trial)


SUBMIT_WITHIN = SBATCH_TIMEOUT + 60.0  # seconds from a run's creation in which its submitter records sbatch's answer


def _never_submitted(run_dir: Path, status: RunStatus, now: float | None = None) -> RunStatus:
    """A run with no job id and no supervisor: ``unsubmitted`` (written back) once the cockpit that was submitting
    it is gone (killed while sbatch waited: SIGKILL, the OOM killer, a reboot), or, where this host cannot look at
    that process, once the time sbatch is given has long passed; else left as it is (sbatch may still answer)."""
    dead = submitter.gone(status.submitter)
    if dead is False:
        return status
    now = time.time() if now is None else now
    if dead is None and now - status.created < SUBMIT_WITHIN:
        return status
    sub = status.submitter or {}
    who = f"cockpit (pid {sub.get('pid')} on {sub.get('host')})" if dead else "the cockpit that was submitting it"
    how = ("ended without recording sbatch's answer (killed: SIGKILL, the OOM killer or a reboot)" if dead else
           f"recorded no answer from sbatch within {SUBMIT_WITHIN:.0f} s of the run's creation")
    _refused(run_dir, status, f"not submitted: {who} {how} (if sbatch had reached the controller, "
                              f"squeue --me --name {status.name} shows the job)")
    return status


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
    if status.final or supervisor_alive(status):
        return status
    if not job_ids(status):
        return _never_submitted(run_dir, status)
    mine = [views[j] for j in job_ids(status) if j in views]
    if not mine:
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
