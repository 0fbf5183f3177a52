"""The torch + gloo teardown abort: a rank that did all its work, then died of SIGABRT at interpreter exit
with libstdc++'s "terminate called without an active exception" (gloo's threads are still joinable when
Python tears the process group down; seen with torch 2.x on CPU in about 1 run in 4). Pure: exit status
and the last lines of the rank's log in, a verdict out."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # model is imported when a finding is made: the exit-status check needs none of it
    from cockpit.logs.diagnose.model import Finding

ABORT_LINE = "terminate called without an active exception"
SIGABRT_STATUS = 134  # 128 + SIGABRT, as the rank wrapper records it
DESCRIBE = "finished its work, then aborted in teardown (torch gloo at interpreter exit)"
HINT = ("end the script with os._exit(0) after dist.destroy_process_group() (cockpit.train's rt.finish() does), "
        "or ignore it: the rank's work was done; cockpit still counts the run as failed, as torchrun does")


def is_teardown_abort(status: int, last_lines: list[str]) -> bool:
    """SIGABRT with libstdc++'s line among the log's last lines (only a faulthandler dump may follow it), and
    no Python traceback before it there: a rank that crashed while working shows one."""
    window = last_lines[-40:]
    at = next((i for i in range(len(window) - 1, -1, -1) if ABORT_LINE in window[i]), None)
    if status != SIGABRT_STATUS or at is None:
        return False
    return not any("Traceback (most recent call last)" in line for line in window[:at])


def teardown_finding(rank: int, evidence: tuple[tuple[str, int], ...]) -> Finding:
    """The diagnosis finding for a rank that aborted in teardown (first in a report: it explains the rest)."""
    from cockpit.logs.diagnose.model import Finding

    return Finding("warning", "teardown_abort", f"Rank {rank} {DESCRIBE}", HINT, evidence)


STOP_ECHOES = frozenset({"worker_failed", "first_failure"})  # what a stop looks like to the log parser


def without_stop(findings: Iterable[Finding], real_failure: bool) -> tuple[Finding, ...]:
    """A stopped run's findings without the stop's own echoes (torchrun's worker_failed, the root cause it
    names for the ranks cockpit SIGTERMed) — unless a real failure came before the stop."""
    return tuple(findings) if real_failure else tuple(f for f in findings if f.code not in STOP_ECHOES)
