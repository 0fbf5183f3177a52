"""A run that heals itself (the job's ``recover:``): when an attempt of a run ends by a failure or a stall, what
it was, and whether the supervisor starts the next attempt of the same run.

The supervisor (cockpit.launch.supervisor) owns the life of the run; this module gives it the three things it
needs between attempts, each testable alone:

- ``outcome``: one ended attempt read from the run directory: who failed first (the exit records) or stalled
  (the watchdog's finding), the first root cause in that rank's log since the attempt began (cockpit.logs:
  its words, kind and remedy) and where a Python exception was raised (the innermost frame of its traceback);
- ``decide``: pure: relaunch, or end the run now with "not retried: ..." (a cause a retry cannot fix: the
  same exception at the same place twice, a configuration error, the script cannot start, a broken node with
  no other node to use) or "gave up after N attempts: ...";
- between attempts, in the run directory (cockpit.launch.attempt_files): the ended attempt's records set
  aside, a marker line in every log, the fix written into the node scripts, each attempt accounted.

Why the same run (id, directory) and not a new one as `cockpit sweep rerun` makes: the checkpoints, the metrics
and the logs are the run's, and a relaunch resumes the run rather than repeating it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cockpit import contract
from cockpit.fs import safeio
from cockpit.launch import memblame
from cockpit.run import layout
from cockpit.run.store import RunStatus, rank_files

MARK = contract.ATTEMPT_MARK  # starts the marker line of every attempt after the first, in every log
SECTION_BYTES = 1 << 20  # what is read of a log's end to find the last attempt's part
# Exceptions that say the script cannot run as given: retrying runs the same file with the same arguments.
BAD_INPUT = ("SyntaxError", "IndentationError", "TabError", "ModuleNotFoundError", "ImportError", "NameError")
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
# argparse's usage error, python's missing script: both exit 2
_USAGE = re.compile(r"^(usage: |\S+: error: )|can't open file ")
# python's own report of a script it could not compile: no "Traceback" line above it, so exception_place finds none
_COMPILE = re.compile(r"^(SyntaxError|IndentationError|TabError): ")


@dataclass(frozen=True)
class Policy:
    """status.json's ``recover`` (cockpit.spec.recover.RecoverSpec.to_dict), as the supervisor uses it."""

    attempts: int
    on: tuple[str, ...]
    apply_fixes: bool = False

    @classmethod
    def of(cls, status: RunStatus) -> Policy | None:
        """The run's policy; None where it relaunches nothing (no recover:, or attempts: 0)."""
        rec = status.recover or {}
        attempts, on = rec.get("attempts"), rec.get("on")
        if not isinstance(attempts, int) or attempts <= 0 or not isinstance(on, list):
            return None
        return cls(attempts, tuple(str(t) for t in on), rec.get("apply_fixes") is True)


@dataclass(frozen=True)
class Outcome:
    """How one attempt ended, as the decision needs it."""

    end: str  # "failure" | "stall"
    rank: int | None  # the culprit
    host: str | None
    cause: str  # in words
    remedy: str = "unknown"  # cockpit.logs.diagnose.cause's: code, configuration, resources, hardware, outside
    place: str | None = None  # "RuntimeError at demo.py:72": a Python exception and where it was raised
    bad_input: bool = False  # the script cannot run as given (a syntax or import error, a usage error)
    fix_env: tuple[tuple[str, str], ...] = ()  # the configuration fix the diagnosis offers (variables)
    fix_unset: tuple[str, ...] = ()
    at: float | None = None  # wall time of the failure (its exit record) or of the stall's finding
    node: str | None = None  # the node the evidence blames itself (lost, its link dead, its memory taken)
    oom: str | None = None  # the kernel's OOM killer ended the rank: "node" (its node's fault) or "job" (memblame)


@dataclass(frozen=True)
class Decision:
    retry: bool
    words: str  # what the run's note and the attempt's record say
    env: tuple[tuple[str, str], ...] = ()  # a fix to apply to the next attempt's environment
    unset: tuple[str, ...] = ()
    leave_out: tuple[str, ...] = ()  # nodes the next attempt runs without (the launcher's own way: Slurm --exclude)


def decide(policy: Policy, earlier: list[Outcome], now: Outcome, attempt: int, host_count: int = 1,
           leave_out: tuple[str, ...] = (), blocked: str | None = None,
           instead: str = "return it to service") -> Decision:
    """Whether attempt ``attempt`` (0-based), which ended as ``now``, is followed by another; ``earlier``: how the
    attempts before it ended. ``leave_out``: the nodes a launcher that replaces nodes (Slurm, ssh) would run the
    next attempt without, as ``blame`` says; ``blocked``: why it cannot (no other node fits the job, no spare is
    left); ``instead``: what else a person can do than fix the node (the launcher's ``replacement_hint``). Pure."""
    if now.end not in policy.on:
        return Decision(False, f"not retried: recover.on does not list {now.end}")
    if now.bad_input:
        return Decision(False, f"not retried: the script cannot run as given, a retry runs it the same way: "
                               f"{now.cause}")
    if now.remedy == "configuration":
        if policy.apply_fixes and (now.fix_env or now.fix_unset):
            if attempt + 1 > policy.attempts:
                return Decision(False, f"gave up after {attempt + 1} attempts: {now.cause}")
            change = " ".join([f"{k}={v}" for k, v in now.fix_env] + [f"unset {k}" for k in now.fix_unset])
            return Decision(True, f"relaunched as attempt {attempt + 1} with the fix {change} (recover.apply_fixes: "
                                  f"true): {now.cause}", now.fix_env, now.fix_unset)
        return Decision(False, f"not retried: a configuration error, which a setting fixes, not a retry: "
                               f"{now.cause} (cockpit diagnose RUN --fix; recover.apply_fixes: true relaunches "
                               "with the fix the diagnosis offers)")
    if now.oom == "job":
        return Decision(False, f"not retried: {now.cause}: the job's own ranks fill the node's memory, so any node "
                               "of its size runs out the same way (fewer ranks per node, smaller batches, fewer "
                               "DataLoader workers, or nodes with more memory)")
    other = next((o for o in earlier if o.oom == "node" and o.node != now.node), None)
    if now.oom == "node" and other is not None:
        return Decision(False, f"not retried: the kernel's OOM killer ended ranks on {other.node} and then on "
                               f"{now.node}: the job's memory, not a node's, it seems: {now.cause} (fewer ranks "
                               "per node or smaller batches; cockpit diagnose RUN)")
    if leave_out and blocked and attempt + 1 <= policy.attempts:
        node = ", ".join(leave_out)
        return Decision(False, f"not retried: node {node} is to blame and {blocked}: {now.cause} (fix node "
                               f"{node}, or {instead}, then run the job again)")
    if now.remedy == "hardware" and host_count <= 1 and not leave_out:
        return Decision(False, f"not retried: node {now.host or '?'} is to blame and the run has no other: "
                               f"{now.cause} (fix the node, then run the job again)")
    if now.place is not None:
        again = next((i for i, o in enumerate(earlier) if o.place == now.place), None)
        if again is not None:
            return Decision(False, f"not retried: the same exception at the same place in attempts {again} and "
                                   f"{attempt} ({now.place}), a retry would raise it again: {now.cause}")
    if attempt + 1 > policy.attempts:
        return Decision(False, f"gave up after {attempt + 1} attempts: {now.cause}")
    without = f" without node {', '.join(leave_out)}" if leave_out else ""
    return Decision(True, f"relaunched as attempt {attempt + 1} of {policy.attempts + 1}{without} after a "
                          f"{now.end}: {now.cause}", leave_out=leave_out)


def blame(now: Outcome) -> tuple[str, ...]:
    """The node the diagnosis blames for ``now``: the node the evidence names itself (``node``: lost, or its link
    dead), else its culprit's host when the cause is the hardware's (a GPU Xid, an ECC error, a GPU off the bus,
    NODE_FAIL, the kernel's OOM killer there); () when the cause is not a node's or the host is unknown."""
    if now.node:
        return (now.node,)
    return (now.host,) if now.remedy == "hardware" and now.host else ()


def section(path: Path) -> list[str]:
    """The lines of a log since the last attempt's marker (the whole end read, for the first attempt)."""
    try:
        data, _whole = safeio.tail_bytes(path, SECTION_BYTES)
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    at = max((i for i, line in enumerate(lines) if line.startswith(MARK)), default=-1)
    return lines[at + 1:]


def failure_outcome(run_dir: Path, status: RunStatus) -> Outcome:
    """A failed attempt: its first failure (the exit records) and the first root cause in that rank's log."""
    ff = status.first_failure
    rank, host = (ff.rank, ff.host) if ff is not None else (None, None)
    logs = rank_files(run_dir, "log")
    if rank is None or rank not in logs:
        words = ff.description if ff is not None else "the launcher failed before any rank reported an exit"
        return Outcome("failure", rank, host, words, at=ff.time if ff is not None else None,
                       node=lost_node(status))
    # the failing rank's log on its own host: a relaunch on another node (Slurm --exclude) writes a second log
    # for the same rank, and rank_files keeps one of them at random
    own = layout.rank_file(run_dir, rank, host, "log") if host else None
    path = own if own is not None and own.is_file() else logs[rank][1]
    lines = section(path)
    found = _root_cause(str(path), lines, host, rank)
    words, remedy, fix_env, fix_unset = found or (f"rank {rank} was {ff.description}" if ff else "?", "unknown",
                                                   (), ())
    place = exception_place(lines)
    bad = place is not None and place.split(" at ", 1)[0].rsplit(".", 1)[-1] in BAD_INPUT
    bad = bad or (ff is not None and ff.status == 2 and any(_USAGE.search(line) for line in lines[-5:]))
    bad = bad or (place is None and any(_COMPILE.match(line) for line in lines[-5:]))
    failed = slurm_failed_node(run_dir, status)
    if failed is not None and (found is None or remedy == "unknown"):  # the rank's end follows from its node's
        return Outcome("failure", rank, host, f"Slurm lost node {failed} (srun: Node failure on {failed}), and "
                       f"{words}", "hardware", at=ff.time if ff else None, node=failed)
    oom = memblame.oom_verdict(run_dir, rank, host) if ff is not None and host and ff.signal == 9 else None
    if oom is not None:  # the beats show it: stronger than a "Killed" in the log
        return Outcome("failure", rank, host, oom.words(rank), "resources", at=ff.time if ff else None,
                       node=host if oom.blame == "node" else None, oom=oom.blame)
    return Outcome("failure", rank, host, words + (f" at {place.split(' at ', 1)[1]}" if place else ""), remedy,
                   place, bad, fix_env, fix_unset, ff.time if ff is not None else None)


def lost_node(status: RunStatus) -> str | None:
    """The node whose own end was the first failure and which cockpit lost (ssh: unreachable when its script was
    to start, or its launch shell vanished without an exit record: a reboot, a crash): the node, not the job."""
    ff = status.first_failure
    if ff is None or not ff.agent or ff.rank is not None:
        return None
    lost = any(n.host == ff.host and n.state == "lost" for n in status.nodes)
    return ff.host if lost else None


_NODE_FAILURE = re.compile(r"srun: error: Node failure on (\S+)")


def slurm_failed_node(run_dir: Path, status: RunStatus) -> str | None:
    """The node srun said failed during this attempt (the job's NODE_FAIL: Slurm set the node DOWN, or its slurmd
    stopped answering), from the batch log since the attempt's marker; None for another launcher or no such line.
    Measured on the test Slurm (slurmd stopped, node set DOWN, sbatch --no-requeue): the rank on it is SIGTERMed
    and its log says nothing; srun prints this line into the batch log."""
    from cockpit.launch import registry

    launcher = registry.known_for_run(status)
    if launcher is None or launcher.nodes_are_torchruns:  # srun's words are in the batch log of a Slurm job
        return None
    for line in section(layout.agent_log(run_dir, "sbatch")):
        if m := _NODE_FAILURE.search(line):
            return m.group(1)
    return None


def _root_cause(path: str, lines: list[str], host: str | None, rank: int):
    """(words, remedy, fix env, fix unset) of the first root cause in ``lines``; None where they show none."""
    from cockpit.logs.diagnose.cause import cause_of, is_root
    from cockpit.logs.diagnose.engine import diagnose
    from cockpit.logs.parse.parser import parse_lines

    events = parse_lines(lines, host=host, rank=rank)
    root = next((e for e in events if is_root(e)), None)
    if root is None:
        return None
    cause = cause_of(path, root)
    from cockpit.logs.diagnose.model import CHOOSE

    # only a fix whose values the diagnosis states: one cockpit must choose (an interface, a size) waits for a person
    fix = next((f.fix for f in diagnose([(path, events)]).findings if f.fix and (f.fix.env or f.fix.unset)
                and all(v != CHOOSE for _k, v in f.fix.env)), None)
    return cause.words, cause.remedy, fix.env if fix else (), fix.unset if fix else ()


def exception_place(lines: list[str]) -> str | None:
    """"ExcType at file.py:LINE" of the last Python traceback in ``lines`` (its innermost frame); None: none."""
    start = max((i for i, line in enumerate(lines) if "Traceback (most recent call last)" in line), default=-1)
    if start < 0:
        return None
    frame, exc = None, None
    for line in lines[start + 1:start + 400]:
        if (m := _FRAME.search(line)) is not None:
            frame = (m[1].rsplit("/", 1)[-1], m[2])
        elif frame is not None and line.strip() and not line.startswith((" ", "\t")):
            word = re.sub(r"^\[[^\]]{0,40}\]:? ?", "", line).split(":", 1)[0].strip()
            if re.fullmatch(r"[A-Za-z_][\w.]*", word):
                exc = word
                break
    return f"{exc} at {frame[0]}:{frame[1]}" if frame and exc else None


def stall_outcome(found: dict) -> Outcome:
    """A stalled attempt, from the watchdog's finding (cockpit.hang.finding): its culprit and its words."""
    culprits = found.get("culprits") or []
    first = culprits[0] if culprits and isinstance(culprits[0], dict) else {}
    rank, host = first.get("rank"), first.get("host")
    stacks = f" (stacks: {found['stacks']})" if found.get("stacks") else ""
    at = found.get("found")
    return Outcome("stall", rank if isinstance(rank, int) else None, host if isinstance(host, str) else None,
                   f"stalled: {found.get('text', '?')}{stacks}", at=at if isinstance(at, (int, float)) else None,
                   node=link_node(found.get("link")))


# the link finding kinds that name a node to leave out (cockpit.hang.linkfind.LinkFinding.kind): a slow link is not
BLAMING_LINKS = ("dead_link", "unreachable", "ras_missing")


def link_node(link: object) -> str | None:
    """The node a stall's link finding (cockpit.hang.linkwords.link_dict) blames: its link is dead (its peers'
    sockets toward it are stuck), it did not answer at all, or NCCL's RAS names a missing or dead process on it
    alone (ras_missing: the sockets showed nothing); None where no single node is to blame."""
    if not isinstance(link, dict) or link.get("kind") not in BLAMING_LINKS:
        return None
    node = link.get("node")
    return node if isinstance(node, str) and node else None
