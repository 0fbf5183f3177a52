"""Evidence -> the finding a user reads: which rank is stuck, where, and who waits for it. Pure.

Culprit vs victim: a rank blocked inside a collective is a victim; so is one waiting for the others to form
the process group (``init_process_group``, DDP's constructor). The culprits are the ranks that are stopped,
the live ranks outside any collective (stuck in their own code), and, where the Flight Recorder knows it,
the ranks that never enqueued the collective the others wait in.

Two causes are named beyond that. A rank that waits for the next batch of a DataLoader is stuck in its
worker: the worker's own frame (a Dataset's ``__getitem__``, the ``open`` in it) is the place, from the
worker's stack. And when every rank waits in a collective but not the same one, and some are still in the
training loop's collective (backward under DDP, or the one they completed last) while the others are in
another, the others ran out of data first: uneven inputs, with their fix.

The words: cockpit.hang.words.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cockpit.hang.classes import class_lines, fold, parse_stacks, what_of
from cockpit.hang.evidence import Evidence, WorkerStack
from cockpit.hang.linkwords import connections, gathered_link, link_lines, ras_ok_words
from cockpit.hang.progress import Straggler
from cockpit.hang.stacks import DDP_INIT, INIT, RankStack, without_hook
from cockpit.hang.words import finding_words, starting_words
from cockpit.run.findings import LiveFinding
from cockpit.run.progress import RankProgress

__all__ = ["evidence_of", "hang_finding", "stacks_report", "starting_text", "straggler_finding"]
WAITS_AT_START = (INIT, "new_group", DDP_INIT)
# a finding and its parts as built here: status.json's objects, which LiveFinding.from_dict checks and types
Json = dict[str, Any]


def hang_finding(kind: str, quiet: float, progress: dict[int, RankProgress], evidence: dict[int, Evidence], now: float,
                 run_ref: str = "RUN", pg_backend: str | None = None, phase: str = "running",
                 stacks: dict[int, RankStack] | None = None) -> Json:
    """``kind``: "stall" (no progress for ``quiet`` s) or "stopped" (a rank's process is stopped).
    ``phase``: "start" for a start that used up its budget (no rank has completed a step or collective).
    ``stacks``: each rank's dump parsed already (cockpit.hang.classes.parse_stacks), else parsed here."""
    seqs = {r: e.flight.enqueued for r, e in evidence.items() if e.flight and e.flight.enqueued is not None}
    top = max(seqs.values(), default=None)
    culprits: list[Json] = []
    victims: list[Json] = []
    silent: list[Json] = []
    for rank in sorted(set(progress) | set(evidence)):
        ev = evidence.get(rank)
        stack = None if ev is None or not ev.text else stacks[rank] if stacks is not None else ev.stack
        entry, role = _entry(rank, progress.get(rank), ev, stack, seqs, top, now)
        {"culprit": culprits, "victim": victims, "silent": silent}[role].append(entry)
    collective = None
    if top is not None:
        behind = [seqs[c["rank"]] for c in culprits if c["rank"] in seqs and seqs[c["rank"]] < top]
        seq = min(behind) + 1 if behind else top  # the first collective a culprit never enqueued
        op = next((e.flight.op for e in evidence.values() if e.flight and e.flight.enqueued == seq), None)
        collective = {"seq": seq, "op": op}
    uneven = _uneven(culprits, victims, evidence)
    if uneven is not None:  # the ranks that left the loop are where it went wrong; the others wait for them
        left = set(uneven["left"])
        culprits, victims = ([e for e in culprits + victims if e["rank"] in left],
                             [e for e in culprits + victims if e["rank"] not in left])
        culprits.sort(key=lambda e: e["rank"])
        victims.sort(key=lambda e: e["rank"])
    finding = {"kind": kind, "severity": "error", "phase": phase, "quiet_s": round(quiet, 1), "culprits": culprits,
               "victims": victims, "silent": [e["rank"] for e in silent], "collective": collective,
               "mismatch": uneven is None and not culprits and len({v["op"] for v in victims}) > 1,
               "uneven": uneven, "hooked": any(e.beat for e in evidence.values())}
    finding["text"], finding["hint"], finding["next"] = finding_words(finding, run_ref, pg_backend)
    gathered = next((e.link for e in evidence.values() if e.link is not None), None)
    link = gathered_link(gathered, run_ref) if gathered is not None else None
    if gathered is not None:  # every rank connection, whether or not a link is to blame
        finding["connections"] = connections(gathered)
    if link is not None:  # the node whose link stopped the collective (cockpit.hang.linkfind)
        finding["link"] = link
        finding["text"] = f"{finding['text']}; {link['text']}"
        finding["hint"] = f"{link['hint']}; {finding['hint']}"
    ok = ras_ok_words(gathered) if gathered is not None else None
    if ok and not culprits and len({v.get("op") for v in victims}) == 1:
        finding["text"] = f"{finding['text']}; {ok}"  # every rank in one collective: RAS's OK misleads there
    return finding


def _entry(rank: int, rec: RankProgress | None, ev: Evidence | None, stack: RankStack | None, seqs: dict[int, int],
           top: int | None, now: float) -> tuple[Json, str]:
    """One rank's line of the finding, and its role: culprit, victim or silent; ``stack``: its dump parsed (None
    when it gave none)."""
    host = (ev.host if ev else None) or (rec.host if rec else "?")
    state = rec.state if rec else "unknown"
    beat = (ev.beat if ev else None) or {}
    op = (stack.collective if stack else None) or beat.get("in") or (rec.collective if rec else None)
    frame = stack.user_frame if stack else None
    entry = {"rank": rank, "host": host, "state": state, "where": frame.where() if frame else None,
             "seq": seqs.get(rank), "last": beat.get("last")}
    if state in ("stopped", "not responding", "exited"):
        return entry, "culprit"
    if op is not None and not (top is not None and rank in seqs and seqs[rank] < top and op not in WAITS_AT_START):
        since = beat.get("since") or (rec.in_since if rec else None)
        entry.update(op=op, waiting_s=round(now - since, 1) if since else None)
        return entry, "victim"
    if stack is not None or (top is not None and rank in seqs):
        entry["op"] = op
        if stack is not None and stack.waits_on_loader:
            entry["loader"] = True
            entry["workers"] = [_worker(w) for w in ev.workers if _stuck(w)] if ev else []
            entry["idle_workers"] = [w.pid for w in ev.workers if not _stuck(w)] if ev else []
        return entry, "culprit"
    return entry, "silent"


def _stuck(w: WorkerStack) -> bool:
    """A worker in the job's own code (a Dataset, a collate_fn), or blocked in the kernel (state D)."""
    return w.stack.worker_frame is not None or w.state == "D"


def _worker(w: WorkerStack) -> Json:
    frame = w.stack.worker_frame
    code = w.lines.get(f"{frame.path}:{frame.line}") if frame else None
    return {"pid": w.pid, "state": w.state, "wchan": w.wchan, "where": frame.where() if frame else None,
            "code": code}


def _uneven(culprits: list[Json], victims: list[Json], evidence: dict[int, Evidence]) -> Json | None:
    """Every live rank waits in a collective, not all in the same one, and they split into ranks still in the
    training loop's collective (backward under DDP, or the one they completed last) and ranks in another:
    those ran out of data first. None when it is not so."""
    waiting = [e for e in culprits + victims if e.get("op")]
    if len(waiting) != len(culprits) + len(victims) or len({e["op"] for e in waiting}) < 2:
        return None
    if any(e["op"] in WAITS_AT_START for e in waiting):
        return None
    training = [e for e in waiting if e["op"] == "backward" or (e.get("last") and e["op"] == e["last"])]
    left = [e for e in waiting if e not in training]
    if not training or not left or len({e["op"] for e in training}) != 1:
        return None
    return {"training": [e["rank"] for e in training], "training_op": training[0]["op"],
            "training_where": training[0]["where"], "left": [e["rank"] for e in left],
            "left_ops": sorted({e["op"] for e in left}),
            "left_where": sorted({e["where"] for e in left if e["where"]})}


def starting_text(progress: dict[int, RankProgress], evidence: dict[int, Evidence], elapsed: float) -> str:
    """"starting: ..." for a run none of whose ranks has completed a step or a collective yet: where each
    rank is (from its stack), and who waits in init_process_group for whom. Not a finding: a start has a
    budget of its own (start_after)."""
    where: dict[str, list[int]] = {}
    for rank in sorted(set(progress) | set(evidence)):
        ev = evidence.get(rank)
        stack = ev.stack if ev and ev.text else None
        op = (stack.collective if stack else None) or ((ev.beat or {}).get("in") if ev else None)
        frame = stack.user_frame if stack else None
        if op is not None:
            what = f"waiting in {op}" + (f" at {frame.where()}" if frame else "")
        elif frame is not None:
            what = f"in {frame.where()}"
        else:
            what = "gave no stack yet"
        where.setdefault(what, []).append(rank)
    return starting_words(where, elapsed)


def straggler_finding(s: Straggler) -> Json:
    text = (f"rank {s.rank} ({s.host}) is a straggler: {s.compute_ms:.0f} ms of its own work per step while "
            f"the other ranks wait {s.others_wait_ms:.0f} ms per step for it in collectives "
            f"(it waits {100 * s.wait_share:.0f}% of its time, the others {100 * s.others_share:.0f}%)")
    hint = (f"look at what only rank {s.rank} does or has: its input pipeline and data shard, its host's load "
            "(other processes, CPU threads), its GPU (clocks, temperature); with GPUs, low utilisation on it "
            "reads as input-bound")
    return {"kind": "straggler", "severity": "warning", "rank": s.rank, "host": s.host,
            "compute_ms": round(s.compute_ms, 1), "others_wait_ms": round(s.others_wait_ms, 1),
            "wait_share": s.wait_share, "others_share": s.others_share, "text": text, "hint": hint}


def stacks_report(evidence: dict[int, Evidence], every: bool = True, raw: bool = False,
                  stacks: dict[int, RankStack] | None = None) -> str:
    """What `cockpit stacks` prints and the watchdog keeps: the stacks folded by signature, one class of ranks
    each with its lowest rank's stack (cockpit.hang.classes), the fewest ranks first; with ``every``, then
    every rank's own stack, grouped by host, then rank, each rank's forked workers under it (one rank: only
    that). The dumps are shown without cockpit's hook in them unless ``raw`` (cockpit.hang.stacks.without_hook);
    ``stacks``: each rank's dump parsed already (parse_stacks)."""
    stacks = stacks if stacks is not None else parse_stacks(evidence)
    one = every and len(evidence) == 1  # one rank asked (--rank N): its own stack is the whole answer
    lines = _every_rank(evidence, stacks, raw) if one else folded_lines(evidence, stacks, raw)
    if every and len(evidence) > 1:
        lines += ["", "== every rank's own stack, by host, then rank ==", *_every_rank(evidence, stacks, raw)]
    gathered = next((e.link for e in evidence.values() if e.link is not None), None)
    if gathered is not None:
        lines += ["== links ==", *link_lines(gathered)]
    return "\n".join(lines) + "\n"


def folded_lines(evidence: dict[int, Evidence], stacks: dict[int, RankStack] | None = None,
                 raw: bool = False) -> list[str]:
    """The classes of stacks (cockpit.hang.classes), each with its lowest rank's stack and workers."""
    classes = fold(evidence, stacks)
    hosts = len({e.host for e in evidence.values()})
    lines = [f"{len(evidence):,} rank{'s' if len(evidence) != 1 else ''} on {hosts:,} host{'s' if hosts != 1 else ''}"
             f": {len(classes)} different stack{'s' if len(classes) != 1 else ''}, the fewest ranks first "
             "(--rank N: that rank's own stack; --all: every rank's)"]
    for c in classes:
        e = evidence[c.example]
        lines += class_lines(c)
        if not e.text:
            continue
        lines.append(f"   the stack of rank {c.example}" + (" (the same on every rank above, thread ids aside):"
                                                             if c.count > 1 else ":"))
        lines += _dump_lines(e, c.example, "      ", raw)
    return lines


def _dump_lines(e: Evidence, rank: int, indent: str, raw: bool = False) -> list[str]:
    """A rank's dump, then its forked workers', indented; without cockpit's hook unless ``raw``."""
    shown = _shown(raw)
    lines = [indent + line for line in shown(e.text).rstrip("\n").splitlines() if line.strip()]
    for w in e.workers:
        wf = w.stack.worker_frame
        said = (f"in {wf.where()}" if wf else "idle in torch's worker loop" if w.text else "no answer")
        lines.append(f"{indent}-- worker pid {w.pid} of rank {rank} (state {w.state or '?'}"
                     + (f", kernel wait {w.wchan}" if w.wchan else "") + f"; {said})")
        lines += [f"{indent}   " + line for line in shown(w.text).rstrip("\n").splitlines() if line.strip()]
    return lines


def _shown(raw: bool) -> Callable[[str], str]:
    """A dump as shown: whole with ``raw``, else without the hook's frames and beat thread."""
    return (lambda text: text) if raw else without_hook


def _every_rank(evidence: dict[int, Evidence], stacks: dict[int, RankStack], raw: bool = False) -> list[str]:
    """Every rank's stack, grouped by host, then rank (a rank's line starts '-- rank R (': evidence_of finds it)."""
    lines = []
    by_host: dict[str, list[int]] = {}
    for rank in sorted(evidence):
        by_host.setdefault(evidence[rank].host, []).append(rank)
    for host in sorted(by_host):
        lines.append(f"== {host} ==")
        for rank in by_host[host]:
            e = evidence[rank]
            what = what_of(e, stacks[rank])
            if e.text and e.flight and e.flight.enqueued is not None:
                what += f"; flight recorder: enqueued #{e.flight.enqueued}, completed #{e.flight.completed}"
            lines.append(f"-- rank {rank} ({what})")
            lines += _dump_lines(e, rank, "   ", raw)
    return lines


def evidence_of(f: LiveFinding, run_dir: Path) -> tuple[tuple[str, int], ...]:
    """Where a finding's evidence is: the culprit's section of the stacks gathered, else its log."""
    from cockpit.run.store import rank_files

    rank = f.culprit_rank
    if f.stacks and Path(f.stacks).is_file():
        from cockpit.logs.diagnose.report import read_lines

        try:  # bounded, a regular file only, never through a link: the path comes from status.json
            at = next((i for i, line in enumerate(read_lines(f.stacks, follow=False), 1)
                       if line.startswith(f"-- rank {rank} ")), 1)
        except OSError:
            at = 1
        return ((f.stacks, at),)
    log = rank_files(run_dir, "log").get(rank) if rank is not None else None
    return ((str(log[1]), 1),) if log else ()

