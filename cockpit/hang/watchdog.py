"""The supervisor's watch over a run's ranks: once a second, read every rank (cockpit.hang.gather), judge
(cockpit.hang.progress), keep status.json's ``progress`` and ``findings`` current, and on a stall or a
stopped rank gather every rank's stacks once, write them to ``<run>/logs/stacks.<when>.txt``, and name the
culprit (cockpit.hang.finding). With ``on_stall: stop`` the run is then stopped, and its note says why."""

from __future__ import annotations

import time
from pathlib import Path

from cockpit import run_layout as layout
from cockpit.hang import finding, gather
from cockpit.hang.progress import Monitor
from cockpit.runs import RunStatus, request_stop

LOOK_EVERY = 1.0


class Watchdog:
    def __init__(self, run_dir: Path, status: RunStatus, collect=gather.collect, grace: float = 10.0):
        self.run_dir, self.status, self.grace = run_dir, status, grace
        self.monitor = Monitor(status.stall_after or 0)
        self.collect = collect
        self.next_look = 0.0
        self.reported: set[str] = set()  # "stall" / "stopped:R": gathered once per episode
        self.pg_backend = _pg_backend(run_dir)

    def tick(self) -> bool:
        """One look when due; True when status changed (the caller writes it). Sets stop_requested when the
        run stalled and the policy says stop."""
        now = time.monotonic()
        if now < self.next_look or self.status.state != "running":
            return False
        self.next_look = now + LOOK_EVERY
        s, wall = self.status, time.time()
        verdict = self.monitor.look(wall, gather.samples(self.run_dir, s))
        findings = [dict(f) for f in s.findings if f["kind"] in ("stall", "stopped")]
        episode = {"stall"} if verdict.stalled else set()
        episode |= {f"stopped:{r}" for r in verdict.stopped}
        if not episode:
            findings, self.reported = [], set()
        elif not episode <= self.reported:
            kind = "stall" if verdict.stalled else "stopped"
            evidence = self._evidence(set(verdict.ranks) - set(verdict.stopped))  # a stopped rank cannot answer
            found = finding.hang_finding(kind, verdict.quiet, verdict.ranks, evidence, time.time(), s.run_id,
                                         self.pg_backend)
            found["stacks"] = self._write(evidence)
            findings, self.reported = [found], episode
            if verdict.stalled and s.on_stall == "stop" and not s.stop_requested:
                # stop.json first, as every stop does: followers then know the exits to come are the stop's
                request_stop(self.run_dir, self.grace, by="cockpit: on_stall: stop")
                s.stop_requested = True
                s.note = f"stopped by cockpit: stalled (on_stall: stop): {found['text']}"
        for f in findings:  # one episode: its length goes on, and its ranks are marked culprit or victim
            if f["kind"] == "stall":
                f["quiet_s"] = round(verdict.quiet, 1)
            for c in f.get("culprits", ()):
                verdict.ranks.get(c["rank"], {})["flag"] = "culprit" if c["state"] != "stopped" else "stopped"
            for v in f.get("victims", ()):
                verdict.ranks.get(v["rank"], {})["flag"] = "waiting"
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
        path = layout.stacks_report(self.run_dir, time.strftime('%Y%m%d-%H%M%S'))
        try:
            path.write_text(finding.stacks_report(evidence), encoding="utf-8")
        except OSError:
            return None
        return str(path)


def _pg_backend(run_dir: Path) -> str | None:
    """nccl | gloo, from the node script's environment (for the finding's debug advice)."""
    for script in sorted((run_dir / layout.COMMANDS).glob("*.sh")):
        text = script.read_text(errors="replace")
        for backend in ("nccl", "gloo"):
            if f"COCKPIT_PG_BACKEND={backend}" in text:
                return backend
    return None


def _ints(progress: dict) -> dict:
    return {int(r): rec for r, rec in progress.items()}
