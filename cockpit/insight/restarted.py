"""What a diagnosis says of torchrun's own restarts (a job's max_restarts, cockpit.run.restarts): each restart as
an info finding, and, for a run that succeeded after them, torchrun's worker-failure messages as what they were."""

from __future__ import annotations

from dataclasses import replace

from cockpit.logs.diagnose.model import Finding
from cockpit.logs.parse.kinds import WORKER_FAILED
from cockpit.run.restarts import restart_words
from cockpit.run.status import RunStatus

RESTART_HINT = ("torchrun started every rank's script again (max_restarts): a script resumes only from what it "
                "saved (cockpit.train: from its last checkpoint)")


def torchrun_restarts(status: RunStatus) -> list[Finding]:
    """Each restart torchrun made, an info finding: which rank failed, and which restart of how many it was."""
    most = status.max_restarts or len(status.restarts)
    return [Finding("info", "torchrun_restart", restart_words(r, k, most), RESTART_HINT, ())
            for k, r in enumerate(status.restarts, 1)]


def restarted_over(status: RunStatus, findings: tuple[Finding, ...]) -> tuple[Finding, ...]:
    """A run that succeeded after torchrun restarted its workers: torchrun's worker-failure messages are those of
    the rounds it restarted from, no error of the run's."""
    if not status.restarts or status.state != "succeeded":
        return findings
    title = "torchrun stopped the workers after a rank failed, and restarted them (max_restarts)"
    return tuple(replace(f, severity="info", title=title) if f.code == WORKER_FAILED else f for f in findings)
