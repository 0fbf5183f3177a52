"""The preflight inside the allocation, after the job ended: what the supervisor does with its verdict.

The batch script ran one srun step on every node (cockpit.node.nodecheck) and the judge (cockpit.node.nodejudge)
before training; when the judge found a bad node the job exited PREFLIGHT_EXIT and left
``logs/preflight/<job id>/verdict.json``. Here that verdict becomes the run's note (the reason, the nodes, a
hint), and, when the job was written with ``slurm.exclude_bad_nodes: true``, one resubmission of the same
script with ``--exclude=<bad nodes>`` on sbatch's command line (it wins over the #SBATCH lines). The run's
status keeps every job id: the node record's ``job_id`` is the current job, ``earlier_jobs`` the ones before it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cockpit.launch.site import LaunchError
from cockpit.launch.slurm.submission import parse_job_id, submit_env
from cockpit.node.nodejudge import VERDICT
from cockpit.preflight import allocation
from cockpit.run import layout
from cockpit.run.store import write_private
from cockpit.slurm.command import SlurmError


def install_nodecheck(run_dir: Path) -> None:
    """The preflight's node side (cockpit.node.nodecheck, nodejudge, ifaces) into <run>/hook/: the batch script
    runs them with the job's python, which may have no cockpit."""
    node = Path(__file__).parents[2] / "node"
    for name, source in layout.NODECHECK_FILES:
        write_private(layout.hook_dir(run_dir) / name, (node / source).read_text(encoding="utf-8"))


def verdict(run_dir: Path, job_id: str) -> dict | None:
    """The judge's verdict for ``job_id``; None when the job ran no preflight (or it never finished)."""
    try:
        found = json.loads((layout.preflight_dir(run_dir, job_id) / VERDICT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def answers(run_dir: Path, job_id: str, nodes: list[str]) -> dict[str, dict | None]:
    """Each node's answer (its facts), None for a node that left none."""
    out: dict[str, dict | None] = {}
    for name in nodes:
        try:
            out[name] = json.loads((layout.preflight_dir(run_dir, job_id) / f"{name}.json").read_text("utf-8"))
        except (OSError, ValueError):
            out[name] = None
    return out


def failure_note(run_dir: Path, job_id: str, found: dict) -> str:
    """The note for a job the preflight stopped: the reason, and what to do (plus interface advice when the
    interfaces were part of it)."""
    text = f"{allocation.note(found)} (hint: {allocation.hint(found, job_id)})"
    if any("SOCKET_IFNAME" in why for reasons in (found.get("bad") or {}).values() for why in reasons) or any(
            "all-reduce" in f for f in found.get("failures") or []):
        advice = allocation.advice(answers(run_dir, job_id, list(found.get("nodes") or [])))
        text += f"; {advice}" if advice else ""
    return text


def interface_advice(run_dir: Path, job_id: str) -> str | None:
    """Interface advice from a passed preflight's facts (for a multi-node job that failed later)."""
    found = verdict(run_dir, job_id)
    if found is None or len(found.get("nodes") or []) < 2:
        return None
    return allocation.advice(answers(run_dir, job_id, list(found["nodes"])))


def resubmit(run_dir: Path, exclude: list[str], sbatch: str = "sbatch") -> str:
    """Submit the run's batch script again without ``exclude``; returns the new job id. Raises SlurmError
    with sbatch's answer (e.g. too few nodes left in the partition)."""
    argv = [sbatch, "--parsable", f"--exclude={','.join(exclude)}", str((run_dir / layout.SBATCH_SCRIPT).resolve())]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=run_dir, env=submit_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmError(f"{' '.join(argv[:3])}: {exc}") from None
    if r.returncode != 0:
        raise SlurmError(f"sbatch refused the job without {','.join(exclude)}: "
                         f"{(r.stderr or r.stdout).strip().replace(chr(10), '; ')}")
    try:
        return parse_job_id(r.stdout)
    except LaunchError as exc:
        raise SlurmError(str(exc)) from None
