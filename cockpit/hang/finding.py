"""Evidence -> the finding a user reads: which rank is stuck, where, and who waits for it. Pure.

Culprit vs victim: a rank blocked inside a collective is a victim. The culprits are the ranks that are
stopped, the live ranks outside any collective (stuck in their own code), and, where the Flight Recorder
knows it, the ranks that never enqueued the collective the others wait in.
"""

from __future__ import annotations

from pathlib import Path

from cockpit.hang.evidence import Evidence
from cockpit.hang.progress import Straggler


def _rank_list(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def hang_finding(kind: str, quiet: float, progress: dict[int, dict], evidence: dict[int, Evidence], now: float,
                 run_ref: str = "RUN", pg_backend: str | None = None) -> dict:
    """``kind``: "stall" (no progress for ``quiet`` s) or "stopped" (a rank's process is stopped)."""
    culprits, victims, silent = [], [], []
    seqs = {r: e.flight.enqueued for r, e in evidence.items() if e.flight and e.flight.enqueued is not None}
    top = max(seqs.values(), default=None)
    for rank in sorted(set(progress) | set(evidence)):
        rec, ev = progress.get(rank, {}), evidence.get(rank)
        host = (ev.host if ev else None) or rec.get("host", "?")
        state = rec.get("state", "unknown")
        stack = ev.stack if ev and ev.text else None
        beat = (ev.beat if ev else None) or {}
        op = (stack.collective if stack else None) or beat.get("in") or rec.get("in")
        frame = stack.user_frame if stack else None
        entry = {"rank": rank, "host": host, "state": state, "where": frame.where() if frame else None,
                 "seq": seqs.get(rank)}
        if state in ("stopped", "not responding", "exited"):
            culprits.append(entry)
        elif op is not None and not (top is not None and rank in seqs and seqs[rank] < top):
            since = beat.get("since") or rec.get("in_since")
            entry.update(op=op, waiting_s=round(now - since, 1) if since else None)
            victims.append(entry)
        elif stack is not None or (top is not None and rank in seqs):
            entry["op"] = op
            culprits.append(entry)
        else:
            silent.append(entry)
    collective = None
    if top is not None:
        behind = [seqs[c["rank"]] for c in culprits if c["rank"] in seqs and seqs[c["rank"]] < top]
        seq = min(behind) + 1 if behind else top  # the first collective a culprit never enqueued
        op = next((e.flight.op for e in evidence.values() if e.flight and e.flight.enqueued == seq), None)
        collective = {"seq": seq, "op": op}
    finding = {"kind": kind, "severity": "error", "quiet_s": round(quiet, 1), "culprits": culprits,
               "victims": victims, "silent": [e["rank"] for e in silent], "collective": collective,
               "mismatch": not culprits and len({v["op"] for v in victims}) > 1,
               "hooked": any(e.beat for e in evidence.values())}
    finding["text"], finding["hint"], finding["next"] = _words(finding, run_ref, pg_backend)
    return finding


def _words(f: dict, run_ref: str, pg_backend: str | None) -> tuple[str, str, str | None]:
    head = (f"no rank made progress for {f['quiet_s']:.0f} s" if f["kind"] == "stall"
            else "a rank's process is stopped")
    parts = []
    for c in f["culprits"]:
        if c["state"] == "stopped":
            parts.append(f"rank {c['rank']} ({c['host']}) is stopped (SIGSTOP, state T)")
        elif c["state"] in ("not responding", "exited"):
            parts.append(f"rank {c['rank']} ({c['host']}) is {c['state']}")
        elif c.get("op"):
            parts.append(f"rank {c['rank']} ({c['host']}) is in {c['op']} behind the others"
                         + (f" at {c['where']}" if c["where"] else ""))
        else:
            parts.append(f"rank {c['rank']} ({c['host']}) is stuck "
                         + (f"in {c['where']}, outside any collective" if c["where"] else "outside any collective"))
    coll = f["collective"]
    if f["mismatch"]:
        parts.append("the ranks wait in different collectives: " + ", ".join(
            f"rank {v['rank']} in {v['op']}" for v in f["victims"])
            + (f" (at collective #{coll['seq']})" if coll else ""))
    elif f["victims"]:
        ops = sorted({v["op"] for v in f["victims"]})
        what = " / ".join(ops) + (f" (collective #{coll['seq']}" + (f", {coll['op']}" if coll["op"] else "")
                                  + ")" if coll else "")
        waits = [v["waiting_s"] for v in f["victims"] if v.get("waiting_s") is not None]
        parts.append(f"{_rank_list([v['rank'] for v in f['victims']])} "
                     f"{'waits' if len(f['victims']) == 1 else 'wait'} in {what}"
                     + (f" for {max(waits):.0f} s" if waits else ""))
    if f["silent"]:
        parts.append(f"{_rank_list(f['silent'])} gave no stacks")
    text = f"{head}: " + "; ".join(parts) if parts else head
    culprits = [c["rank"] for c in f["culprits"]]
    nxt = None
    if culprits:
        who = _rank_list(culprits)
        hint = f"{who} {'is the culprit' if len(culprits) == 1 else 'are the culprits'}"
        if f["victims"]:
            hint += ("; the ranks waiting in a collective are victims (torchrun's failure table names a victim: "
                     "the rank that timed out waiting)")
        first = f["culprits"][0]
        if first["state"] == "stopped":
            hint += f". Resume it (kill -CONT) or end the run (cockpit stop {run_ref})"
        else:
            nxt = f"cockpit stacks {run_ref} --rank {first['rank']}"
    elif f["victims"]:
        debug = ("NCCL_DEBUG=INFO and TORCH_DISTRIBUTED_DEBUG=DETAIL" if pg_backend == "nccl" else
                 "TORCH_DISTRIBUTED_DEBUG=DETAIL (it checks that every rank calls the same collective)")
        hint = ("the ranks called different collectives: a rank skipped one or took another branch; make every rank "
                "call the same collectives in the same order" if f["mismatch"] else
                "every rank waits in a collective: ranks that disagree on it (a skipped call, another size) or a "
                "dead link") + f"; rerun with {debug}"
        nxt = f"cockpit stacks {run_ref}"
    elif not f["hooked"]:
        hint = ("no rank has cockpit's hook (COCKPIT_HOOK=0, or a Python that skips sitecustomize): there are no "
                "stacks to ask for; py-spy dump --pid PID (the pids are in logs/rank-*.pid) can read them")
    else:
        hint, nxt = "no rank answered with a stack in time", f"cockpit stacks {run_ref}"
    return text, hint, nxt


def straggler_finding(s: Straggler) -> dict:
    text = (f"rank {s.rank} ({s.host}) is a straggler: {s.compute_ms:.0f} ms of its own work per step while "
            f"the other ranks wait {s.others_wait_ms:.0f} ms per step for it in collectives "
            f"(it waits {100 * s.wait_share:.0f}% of its time, the others {100 * s.others_share:.0f}%)")
    hint = (f"look at what only rank {s.rank} does or has: its input pipeline and data shard, its host's load "
            "(other processes, CPU threads), its GPU (clocks, temperature); with GPUs, low utilisation on it "
            "reads as input-bound")
    return {"kind": "straggler", "severity": "warning", "rank": s.rank, "host": s.host,
            "compute_ms": round(s.compute_ms, 1), "others_wait_ms": round(s.others_wait_ms, 1),
            "wait_share": s.wait_share, "others_share": s.others_share, "text": text, "hint": hint}


def stacks_report(evidence: dict[int, Evidence]) -> str:
    """Every rank's stack, grouped by host, then rank (what `cockpit stacks` prints)."""
    lines = []
    for host in sorted({e.host for e in evidence.values()}):
        lines.append(f"== {host} ==")
        for rank in sorted(r for r, e in evidence.items() if e.host == host):
            e = evidence[rank]
            stack = e.stack
            frame, op = stack.user_frame, stack.collective
            what = (f"in {op}" if op else "outside any collective") + (f", at {frame.where()}" if frame else "")
            if e.flight and e.flight.enqueued is not None:
                what += f"; flight recorder: enqueued #{e.flight.enqueued}, completed #{e.flight.completed}"
            lines.append(f"-- rank {rank} ({what if e.text else 'no answer: stopped, frozen or without the hook'})")
            lines += ["   " + line for line in e.text.rstrip("\n").splitlines() if line.strip()]
    return "\n".join(lines) + "\n"


def evidence_of(f: dict, run_dir: Path) -> tuple[tuple[str, int], ...]:
    """Where a finding's evidence is: the culprit's section of the stacks gathered, else its log."""
    from cockpit.runs import rank_files

    rank = f["culprits"][0]["rank"] if f.get("culprits") else f.get("rank")
    if f.get("stacks") and Path(f["stacks"]).is_file():
        from cockpit.logs.report import read_lines

        try:  # bounded, a regular file only, never through a link: the path comes from status.json
            at = next((i for i, line in enumerate(read_lines(f["stacks"], follow=False), 1)
                       if line.startswith(f"-- rank {rank} ")), 1)
        except OSError:
            at = 1
        return ((f["stacks"], at),)
    log = rank_files(run_dir, "log").get(rank) if rank is not None else None
    return ((str(log[1]), 1),) if log else ()
