"""The supervisor's watch over a run's ranks: once a second, read every rank (cockpit.hang.gather), judge
(cockpit.hang.progress), keep status.json's ``progress``, ``watch``, ``findings`` and ``history`` current, and
on a stall or a stopped rank gather every rank's stacks once, write them to ``<run>/logs/stacks.<when>.txt``,
and name the culprit (cockpit.hang.finding). With ``on_stall: stop`` the run is then stopped, and its note
says why. A quiet stretch has its stacks asked shortly before its threshold (cockpit.hang.early), and is looked
at when it reaches it, not at the next whole second: the stall's finding then need not wait for 4,096 answers.

A start that goes quiet for longer than a running run may is not a stall: the ranks' stacks are gathered once
to say where they are ("starting: ..." in ``watch``), and only a start that uses up its own budget
(``start_after``) is a stall. A stall or a stopped rank that clears (the ranks make progress again) leaves the
live findings for ``history``, with when it began, how long it lasted, who and where."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from cockpit.fs import safeio
from cockpit.hang import early, finding, gather
from cockpit.hang.classes import parse_stacks
from cockpit.hang.evidence import Evidence
from cockpit.hang.linkwatch import Links, LinkWatch
from cockpit.hang.progress import START_AFTER, Monitor, Verdict
from cockpit.hang.rankdir import RankDir
from cockpit.hang.stacks import RankStack
from cockpit.run import layout
from cockpit.run.findings import LiveFinding
from cockpit.run.progress import Flag
from cockpit.run.status import Watch
from cockpit.run.store import RunStatus, request_stop

LOOK_EVERY = 1.0
START_ASK_EVERY = 10.0
HISTORY_KEEP = 20  # the last stalls that cleared (status.json is written every second: it stays small)
HANG_KINDS = ("stall", "stopped")
# Ranks read each second; a larger run is read whole less often, and probed between. Each rank costs three files
# (its log's stat, its beat's and its metrics' tails: some 35-50 us in all, every changed one read), so 640 ranks
# a second keep the watch near 3% of a core at any size (issue 32's goal: the supervisor <= 5% at 4,096 ranks;
# 1,024 a second had it at 5.4-7%). A look at a stall does not wait for it (a probe that sees no progress brings
# the whole look at once; a live hang finding keeps it every second).
WHOLE_RANKS = 640
# At most this long between whole looks, so that the figures of the last 10 s (a rank's rate and wait share:
# cockpit.hang.progress) always span two of them (from 4,480 ranks on, the watch then costs more per rank).
WHOLE_MAX_S = 7.0
# The straggler rule judges a window of at least this many whole looks (it needs three intervals of beats in it):
# at 4 s between looks its 10 s window held two, and no straggler was named above 3,400 ranks.
STRAGGLER_LOOKS = 3.5
SENTINELS = 16  # ranks a probe reads
Collect = Callable[[Path, RunStatus, set[int]], dict[int, Evidence]]


class Watchdog:
    def __init__(self, run_dir: Path, status: RunStatus, collect: Collect, runs_here: bool, grace: float = 10.0,
                 on_stall: Callable[[dict], bool] | None = None, links: Links | None = None,
                 rankdir: RankDir | None = None):
        """``collect(run_dir, status, ranks)``: the ranks' stacks as the run's launcher gets them; ``runs_here``:
        its ranks run on this machine (their process states are read too); ``on_stall(finding)``: told of each
        stall once its evidence is gathered, True when it ends the attempt itself (the job's recover:), so that
        on_stall: stop does not stop the run. ``links()``: the ranks' connections as the run's launcher reads
        them without disturbing them, for the slow-link watch (cockpit.hang.linkwatch). ``rankdir``: the run's
        logs/ as the supervisor keeps it listed (cockpit.hang.rankdir), shared with its own look at exits."""
        self.run_dir, self.status, self.grace = run_dir, status, grace
        self.runs_here = runs_here
        start_after = status.start_after if status.start_after is not None else START_AFTER
        self.monitor = Monitor(status.stall_after, start_after=start_after, dated=runs_here)
        self.collect = collect
        self.next_look = 0.0
        self.reported: set[str] = set()  # "stall" / "stopped:R": gathered once per episode
        self.start_evidence: dict | None = None  # the stacks gathered once when a start went quiet for long
        self.start_asked = 0.0
        self.pg_backend = _pg_backend(run_dir)
        self.on_stall = on_stall
        self.linkwatch = LinkWatch(links) if links is not None else None
        self.rankdir = rankdir if rankdir is not None else RankDir(run_dir)
        self.next_whole = 0.0  # when every rank is read again (whole_every)
        self.sentinels: tuple[int, ...] = ()  # the ranks a probe reads between whole looks
        self.pending_report: tuple[Path, dict, dict[int, RankStack]] | None = None  # written after the finding
        self.early = early.Early()  # the stacks asked before a quiet stretch reaches its threshold

    def tick(self) -> bool:
        """One look when due; True when status changed (the caller writes it). Sets stop_requested when the
        run stalled and the policy says stop."""
        now = time.monotonic()
        if now < self.next_look or self.status.state != "running":
            return False
        self.next_look = now + LOOK_EVERY
        s, wall = self.status, time.time()
        if self._probe(now, wall):
            return False  # a few ranks made progress, and the whole look is not due: nothing to write
        found = gather.samples(self.run_dir, s, self.runs_here, self.rankdir)
        verdict = self.monitor.look(wall, found)
        self.next_whole, self.sentinels = now + whole_every(len(found)), sentinels(verdict)
        self.monitor.rule.window = straggler_window(self.monitor.window, len(found))
        self._ask_early(verdict)
        # the look at which the quiet reaches the early ask's point or the threshold is not left to the
        # once-a-second cadence (up to a second late)
        self.next_look = min(self.next_look, now + self.early.until_due(verdict, LOOK_EVERY))
        watch = self._watch(verdict, wall)
        findings = [f for f in s.findings if f.kind in HANG_KINDS]
        episode = {"stall"} if verdict.stalled else set()
        episode |= {f"stopped:{r}" for r in verdict.stopped}
        history = s.history
        if not episode:
            if findings and _alive(verdict):  # the ranks move again: the episode is over, and remembered
                history = [*history, *(_cleared(f, wall) for f in findings)][-HISTORY_KEEP:]
                findings = []
            self.reported = set()  # (with no rank alive, the run is ending: its findings stand as they are)
        elif not episode <= self.reported:
            findings, self.reported = [self._found(verdict, wall)], episode
        if verdict.stalled:  # one episode: its length goes on
            findings = [f.with_keys(quiet_s=round(verdict.quiet, 1)) if f.kind == "stall" else f for f in findings]
        for f in findings:  # and its ranks are marked culprit or victim
            for c in f.culprits:
                _flag(verdict, c.rank, "culprit" if c.state != "stopped" else "stopped")
            for v in f.victims:
                _flag(verdict, v.rank, "waiting")
        findings += self._stragglers(verdict)
        progress = {str(r): rec for r, rec in verdict.ranks.items()}
        changed = (findings, progress, watch, history) != (s.findings, s.progress, s.watch, s.history)
        s.findings, s.progress, s.watch, s.history = findings, progress, watch, history
        return changed

    def _probe(self, now: float, wall: float) -> bool:
        """Between two whole looks of a large run, a look at its sentinel ranks only: True when one made progress
        (cockpit.hang.progress.Monitor.probe). A probe that sees none, a live hang finding, or a whole look
        that is due: False, and the whole look follows."""
        if now >= self.next_whole or not self.sentinels or any(f.kind in HANG_KINDS for f in self.status.findings):
            return False
        found = gather.samples(self.run_dir, self.status, self.runs_here, self.rankdir, self.sentinels)
        return self.monitor.probe(wall, found)

    def _ask_early(self, verdict: Verdict) -> None:
        """Ask every rank's stacks before the threshold, when due (cockpit.hang.early): a stall found then need
        not wait for them."""
        since = self.monitor.last_progress
        if since is None or not self.early.due(verdict, since, LOOK_EVERY):
            return
        seen = early.marks(verdict)
        evidence = self._evidence(set(verdict.ranks) - set(verdict.stopped), early=True)
        self.early.keep(since, seen, evidence, parse_stacks(evidence))

    def _stragglers(self, verdict: Verdict) -> list[LiveFinding]:
        """The straggler rule's finding, and a slow link's (a straggler whose wait is network), each rank of it
        flagged; one whose node the slow link names is the link's finding (the network explains it)."""
        if self.linkwatch is not None:
            running = verdict.phase == "running" and not verdict.stalled
            self.linkwatch.look(verdict.ranks, self.monitor.rule.candidate is not None, running)
        net = self.linkwatch.current() if self.linkwatch is not None and not verdict.stalled else None
        out = []
        rule = verdict.straggler if not verdict.stalled else None
        if rule is not None and (net is None or net[0].node != rule.host):
            out.append(LiveFinding.from_dict(finding.straggler_finding(rule)))
        if net is not None:
            from cockpit.hang.slowwords import network_finding

            found = network_finding(net[0], net[1], net[2], verdict.ranks, self.status.run_id)
            out.append(LiveFinding.from_dict(found))
            for rank in found["link"]["ranks"]:
                _flag(verdict, rank, "straggler")
        return out

    def _found(self, verdict: Verdict, wall: float) -> LiveFinding:
        """A new episode: every live rank's stacks (a stall's: those asked before its threshold, where they still
        hold: cockpit.hang.early), the finding, and with on_stall: stop the stop. The stacks report the finding
        names is written after status.json has the finding (``write_report``): at 4,096 ranks it took 0.2-0.7 s,
        which a user waiting for the finding need not wait."""
        s = self.status
        kind = "stall" if verdict.stalled else "stopped"
        early_asked = self.early.take(verdict, self.monitor.last_progress)
        if early_asked is not None and kind == "stall":  # asked before the threshold, and still holding
            evidence, stacks = early_asked.evidence, early_asked.stacks
        else:
            evidence = self._evidence(set(verdict.ranks) - set(verdict.stopped))  # a stopped rank cannot answer
            stacks = parse_stacks(evidence)  # each dump parsed once, for the finding and the report both
        phase = "start" if verdict.phase == "starting" else "running"
        found = finding.hang_finding(kind, verdict.quiet, verdict.ranks, evidence, time.time(), s.run_id,
                                     self.pg_backend, phase, stacks=stacks)
        found["began"] = round(wall - verdict.quiet if kind == "stall" else wall, 3)  # the last progress
        found["found"] = round(time.time(), 3)  # after the stacks came: began..found is what a user waited
        found["threshold_s"], found["rule"] = verdict.threshold, verdict.rule
        found["stacks"] = self._report_later(evidence, stacks)
        if verdict.stalled and self.on_stall is not None and self.on_stall(found):
            s.note = f"stalled: {found['text']}"
        elif verdict.stalled and s.on_stall == "stop" and not s.stop_requested:
            # stop.json first, as every stop does: followers then know the exits to come are the stop's
            request_stop(self.run_dir, self.grace, by="cockpit: on_stall: stop")
            s.stop_requested = True
            s.note = f"stopped by cockpit: stalled (on_stall: stop): {found['text']}"
        return LiveFinding.from_dict(found)  # the builder's keys, as status.json has always had them

    def _watch(self, verdict: Verdict, wall: float) -> Watch:
        """status.json's ``watch``: the phase, the stall threshold now and why, and where a slow start is."""
        starting, elapsed = None, None
        if verdict.phase == "starting" and verdict.slow_start:
            if self.start_evidence is None or self._stale(wall):  # once per quiet stretch, again for the silent
                self.start_evidence = self._evidence(set(verdict.ranks) - set(verdict.stopped))
                self.start_asked = wall
            elapsed = round(wall - (verdict.since or wall), 1)
            starting = finding.starting_text(verdict.ranks, self.start_evidence, elapsed)
        else:
            self.start_evidence = None
        threshold = None if verdict.threshold is None else round(verdict.threshold, 1)
        out: Watch = {"phase": verdict.phase, "threshold_s": threshold, "rule": verdict.rule,
                      "longest_gap_s": round(verdict.longest_gap, 1), "starting": starting, "starting_s": elapsed}
        if self.linkwatch is not None:
            out["links"] = self.linkwatch.said()
        return out

    def _stale(self, wall: float) -> bool:
        """A rank gave no stack when the start was last asked (it was still starting its interpreter): ask
        again, at most every START_ASK_EVERY seconds."""
        silent = any(not e.text for e in (self.start_evidence or {}).values()) or not self.start_evidence
        return silent and wall - self.start_asked >= START_ASK_EVERY

    def _evidence(self, ranks: set[int], early: bool = False) -> dict:
        """The ranks' stacks as the launcher gathers them; none when that fails (said in the run's note, unless
        ``early``: asked before any stall, and asked again if one comes)."""
        began = time.monotonic()
        try:
            return self.collect(self.run_dir, self.status, ranks) if ranks else {}
        except Exception as exc:  # noqa: BLE001 - no evidence must not mean no finding
            if not early:
                self.status.note = f"stacks could not be gathered: {type(exc).__name__}: {exc}"
            return {}
        finally:
            if ranks:  # how long a gathering takes here, for the next early ask's point
                self.early.took = time.monotonic() - began

    def _report_later(self, evidence: dict, stacks: dict[int, RankStack]) -> str | None:
        """The path the stacks report of a new finding will have; ``write_report`` writes it."""
        if not evidence:
            return None
        path = layout.stacks_report(self.run_dir, time.strftime('%Y%m%d-%H%M%S'))
        self.pending_report = (path, evidence, stacks)
        return str(path)

    def write_report(self) -> bool:
        """Write the stacks report of the last finding, once status.json has the finding (the supervisor calls
        this after each write of it): a reader who sees the finding finds its report there a moment later.
        True when status changed: the report could not be written, and the finding no longer names it (the
        caller writes status again)."""
        if self.pending_report is None:
            return False
        path, evidence, stacks = self.pending_report
        self.pending_report = None
        try:  # whole or not there: a reader who saw the finding may open it this instant
            safeio.write_atomic(path, finding.stacks_report(evidence, stacks=stacks), sync=False)
        except OSError:
            named = [f for f in self.status.findings if f.stacks == str(path)]
            self.status.findings = [f.with_keys(stacks=None) if f in named else f for f in self.status.findings]
            return bool(named)
        return False

def whole_every(ranks: int) -> float:
    """Seconds between two looks at every rank: each second up to WHOLE_RANKS ranks, then in proportion (6.4 s at
    4,096), so that the watch costs the same share of a core at any size, up to WHOLE_MAX_S; probes fill the
    seconds between."""
    return min(WHOLE_MAX_S, LOOK_EVERY * max(1.0, ranks / WHOLE_RANKS))


def straggler_window(window: float, ranks: int) -> float:
    """The straggler rule's window for a run of ``ranks``: ``window`` (the Monitor's, 10 s) where the run is looked
    at whole often enough, else STRAGGLER_LOOKS whole looks (22.4 s at 4,096 ranks)."""
    return max(window, STRAGGLER_LOOKS * whole_every(ranks))


def sentinels(verdict: Verdict) -> tuple[int, ...]:
    """The ranks a probe reads: SENTINELS live ranks spread evenly over the run (over its nodes, as ranks are
    numbered node by node); none for a run small enough to be looked at whole every second."""
    live = [r for r, rec in sorted(verdict.ranks.items()) if rec.state != "exited"]
    if len(verdict.ranks) <= WHOLE_RANKS or not live:
        return ()
    return tuple(dict.fromkeys(live[k * len(live) // SENTINELS] for k in range(SENTINELS)))


def _alive(verdict: Verdict) -> bool:
    return any(rec.state != "exited" for rec in verdict.ranks.values())


def _flag(verdict: Verdict, rank: int, flag: Flag) -> None:
    """Mark a rank of the finding in its progress (a rank the look did not see has none)."""
    if rank in verdict.ranks:
        verdict.ranks[rank] = replace(verdict.ranks[rank], flag=flag)


def _cleared(f: LiveFinding, wall: float) -> LiveFinding:
    """A finding whose episode ended with the ranks moving again, as the run's history keeps it."""
    began = f.began if "began" in f.keys and f.began is not None else wall
    return f.with_keys(severity="warning", cleared=round(wall, 3), lasted_s=round(wall - began, 1))


def _pg_backend(run_dir: Path) -> str | None:
    """nccl | gloo, from the node script's environment (for the finding's debug advice)."""
    for script in sorted((run_dir / layout.COMMANDS).glob("*.sh")):
        text = script.read_text(errors="replace")
        for backend in ("nccl", "gloo"):
            if f"COCKPIT_PG_BACKEND={backend}" in text:
                return backend
    return None
