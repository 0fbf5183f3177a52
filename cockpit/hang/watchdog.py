"""The supervisor's watch over a run's ranks: once a second, read every rank (cockpit.hang.gather), judge
(cockpit.hang.progress), keep status.json's ``progress`` and ``findings`` current, and on a stall or a
stopped rank gather every rank's stacks once, write them to ``<run>/logs/stacks.<when>.txt``, and name the
culprit (cockpit.hang.finding). With ``on_stall: stop`` the run is then stopped, and its note says why."""

from __future__ import annotations

import time
from pathlib import Path

from cockpit.hang import finding, gather
from cockpit.hang.progress import Monitor
from cockpit.runs import RunStatus

LOOK_EVERY = 1.0


class Watchdog:
    def __init__(self, run_dir: Path, status: RunStatus, collect=gather.collect):
        self.run_dir, self.status = run_dir, status
        self.monitor = Monitor(status.stall_after or 0)
        self.collect = collect
        self.next_look = 0.0
        self.reported: set[str] = set()  # "stall" / "stopped:R": gathered once per episode

    def tick(self) -> bool:
        """One look when due; True when status changed (the caller writes it). Sets stop_requested when the
        run stalled and the policy says stop."""
        now = time.monotonic()
        if now < self.next_look or self.status.state != "running":
            return False
        self.next_look = now + LOOK_EVERY
        s, wall = self.status, time.time()
        verdict = self.monitor.look(wall, gather.samples(self.run_dir, s))
        findings = [f for f in s.findings if f["kind"] in ("stall", "stopped")]
        episode = {"stall"} if verdict.stalled else set()
        episode |= {f"stopped:{r}" for r in verdict.stopped}
        if not episode:
            findings, self.reported = [], set()
        elif not episode <= self.reported:
            kind = "stall" if verdict.stalled else "stopped"
            evidence = self._evidence(set(verdict.ranks) - set(verdict.stopped))  # a stopped rank cannot answer
            found = finding.hang_finding(kind, verdict.quiet, verdict.ranks, evidence, time.time(), s.run_id)
            found["stacks"] = self._write(evidence)
            findings, self.reported = [found], episode
            if verdict.stalled and s.on_stall == "stop" and not s.stop_requested:
                s.stop_requested = True
                s.note = f"stopped by cockpit: stalled (on_stall: stop): {found['text']}"
        if verdict.straggler is not None and not verdict.stalled:
            findings.append(finding.straggler_finding(verdict.straggler))
        changed = findings != s.findings or verdict.ranks != _ints(s.progress)
        s.findings, s.progress = findings, {str(r): rec for r, rec in verdict.ranks.items()}
        return changed

    def _evidence(self, ranks: set[int]) -> dict:
        try:
            return self.collect(self.run_dir, self.status, ranks) if ranks else {}
        except Exception as exc:  # noqa: BLE001 - no evidence must not mean no finding
            self.status.note = f"stacks could not be gathered: {type(exc).__name__}: {exc}"
            return {}

    def _write(self, evidence: dict) -> str | None:
        if not evidence:
            return None
        path = self.run_dir / "logs" / f"stacks.{time.strftime('%Y%m%d-%H%M%S')}.txt"
        try:
            path.write_text(finding.stacks_report(evidence), encoding="utf-8")
        except OSError:
            return None
        return str(path)


def _ints(progress: dict) -> dict:
    return {int(r): rec for r, rec in progress.items()}
