"""Slurm job states -> cockpit run states: the one table, with an explicit UNKNOWN.

Pure. Slurm spells a state the same way in squeue (%T / -O State), sacct (State, sometimes "CANCELLED by 0"
or cut to "CANCELLED+") and scontrol (JobState=), so ``cockpit_state`` normalises first. A state Slurm adds
in a later version maps to UNKNOWN: cockpit then keeps the run's last known state and says so in the note,
rather than guessing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

# the run states a Slurm state maps to (cockpit.run.status's, and unknown: keep the last known one)
CockpitState = Literal["starting", "running", "succeeded", "failed", "stopped", "unknown"]
UNKNOWN: Final = "unknown"


@dataclass(frozen=True)
class SlurmState:
    state: CockpitState
    final: bool  # Slurm will not run this job again by itself
    meaning: str  # one line for notes and the TUI


# Slurm's job states (slurm/slurm.h: job_states and the JOB_* flags squeue prints as states), 22.05 - 24.x.
TABLE: dict[str, SlurmState] = {
    "PENDING": SlurmState("starting", False, "waiting in the queue"),
    "CONFIGURING": SlurmState("starting", False, "nodes allocated, booting or being configured"),
    "REQUEUED": SlurmState("starting", False, "put back in the queue; it starts again"),
    "REQUEUE_FED": SlurmState("starting", False, "put back in the queue by the federation"),
    "REQUEUE_HOLD": SlurmState("starting", False, "requeued and held: `scontrol release` lets it start"),
    "RESV_DEL_HOLD": SlurmState("starting", False, "held: its reservation was deleted"),
    "RUNNING": SlurmState("running", False, "running"),
    "COMPLETING": SlurmState("running", False, "ending: processes are being cleaned up"),
    "RESIZING": SlurmState("running", False, "changing size"),
    "SIGNALING": SlurmState("running", False, "being signalled"),
    "STAGE_OUT": SlurmState("running", False, "staging out files"),
    "SUSPENDED": SlurmState("running", False, "suspended (an admin or preemption); it resumes later"),
    "STOPPED": SlurmState("running", False, "stopped with SIGSTOP; it resumes later"),
    "COMPLETED": SlurmState("succeeded", True, "finished with exit code 0"),
    "FAILED": SlurmState("failed", True, "ended with a non-zero exit code"),
    "TIMEOUT": SlurmState("failed", True, "killed at its time limit"),
    "NODE_FAIL": SlurmState("failed", True, "a node of the job failed"),
    "BOOT_FAIL": SlurmState("failed", True, "a node failed to boot"),
    "OUT_OF_MEMORY": SlurmState("failed", True, "killed for using more memory than it asked for"),
    "DEADLINE": SlurmState("failed", True, "killed at its deadline"),
    "PREEMPTED": SlurmState("failed", True, "preempted and not requeued"),
    "SPECIAL_EXIT": SlurmState("failed", True, "held after a special exit code (RequeueExitHold)"),
    "REVOKED": SlurmState("stopped", True, "revoked: a sibling cluster of the federation runs it"),
    "CANCELLED": SlurmState("stopped", True, "cancelled (scancel)"),
}
UNKNOWN_STATE = SlurmState(UNKNOWN, False, "a state this cockpit does not know")


def normalise(raw: str) -> str:
    """'CANCELLED by 0' -> 'CANCELLED'; 'CANCELLED+' (sacct's cut) -> 'CANCELLED'; ' running' -> 'RUNNING'."""
    words = raw.strip().split()
    return words[0].rstrip("+").upper() if words else ""


def lookup(raw: str) -> SlurmState:
    """The row for a Slurm state as any Slurm command prints it; UNKNOWN_STATE when not in the table."""
    return TABLE.get(normalise(raw), UNKNOWN_STATE)


def cockpit_state(raw: str) -> CockpitState:
    """The cockpit state for a Slurm state, or UNKNOWN."""
    return lookup(raw).state
