"""The words of a hang finding: its text (what each rank is doing), its hint (who is the culprit, what to do)
and the next command. Pure: the finding's fields in, strings out (cockpit.hang.finding builds the fields)."""

from __future__ import annotations

JOIN_FIX = ("give every rank the same number of batches: a DistributedSampler(dataset, drop_last=True) gives each "
            "rank an equal shard (with the same batch size on every rank); where the inputs are uneven by nature, "
            "run the loop under DDP's Join (from torch.distributed.algorithms.join import Join; "
            "with Join([model]): ...), so ranks that finish early shadow the others' collectives")


def rank_list(ranks: list[int]) -> str:
    """'rank 5', 'ranks 0, 1', 'ranks 0-3072, 3074-4095': three or more in a row as a range, so a finding about
    4,096 ranks is a line, not 4,096 numbers."""
    return ("rank " if len(ranks) == 1 else "ranks ") + spans(ranks)


def spans(ranks: list[int], sep: str = ", ") -> str:
    """Ranks (any order, repeats ignored) as '0-3072, 3074-4095'; a run of two stays '6, 7'."""
    runs: list[list[int]] = []
    for r in sorted(set(ranks)):
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return sep.join(str(a) if a == b else f"{a}{sep}{b}" if b == a + 1 else f"{a}-{b}" for a, b in runs)


def hosts_text(hosts: list[str]) -> str:
    """Hosts as a hostlist ('n[000-511]'), or their number where that is long."""
    from cockpit.slurm.hostlist import compress  # the spec's hostlist grammar: only where hosts are listed

    listed = compress(hosts)
    return listed if len(listed) <= 60 else f"{len(set(hosts)):,} hosts"


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def starting_words(where: dict[str, list[int]], elapsed: float) -> str:
    """``where``: what a rank is doing -> the ranks doing it."""
    parts = [f"{rank_list(ranks)} {what}" for what, ranks in sorted(where.items(), key=lambda kv: kv[1])]
    return f"starting: {'; '.join(parts) or 'no rank has answered yet'} for {duration(elapsed)}"


def finding_words(f: dict, run_ref: str, pg_backend: str | None) -> tuple[str, str, str | None]:
    if f["kind"] == "stopped":
        head = "a rank's process is stopped"
    elif f.get("phase") == "start":
        head = (f"no rank made progress for {int(f['quiet_s'])} s while starting (none has completed a step or a "
                "collective yet)")
    else:  # whole seconds down: 5.6 s of quiet is not 6 (a quiet dated by the logs is seldom a whole number)
        head = f"no rank made progress for {int(f['quiet_s'])} s"
    parts = _uneven_parts(f) if f.get("uneven") else _culprit_parts(f["culprits"]) + _victim_parts(f)
    if f["silent"]:
        parts.append(f"{rank_list(f['silent'])} gave no stacks")
    text = f"{head}: " + "; ".join(parts) if parts else head
    hint, nxt = _hint(f, run_ref, pg_backend)
    return text, hint, nxt


def _culprit_parts(culprits: list[dict]) -> list[str]:
    """A part per kind of culprit: the culprits doing the same thing are one ('ranks 0-7 (n0) are stopped ...'),
    in the order of their lowest rank."""
    groups: dict[str, list[dict]] = {}
    for c in culprits:
        groups.setdefault(_culprit(c, "{who}", "is"), []).append(c)
    out = []
    for same in groups.values():
        if len(same) == 1:
            out.append(_culprit(same[0], f"rank {same[0]['rank']} ({same[0]['host']})", "is"))
            continue
        who = f"{rank_list([c['rank'] for c in same])} ({hosts_text([c['host'] for c in same])})"
        out.append(_culprit(same[0], who, "are"))
    return out


def _culprit(c: dict, who: str, verb: str) -> str:
    if c["state"] == "stopped":
        return f"{who} {verb} stopped (SIGSTOP, state T)"
    if c["state"] in ("not responding", "exited"):
        return f"{who} {verb} {c['state']}"
    if c.get("loader"):
        return _loader(c, who)
    if c.get("op"):
        return f"{who} {verb} in {c['op']} behind the others" + (f" at {c['where']}" if c["where"] else "")
    return f"{who} {verb} stuck " + (f"in {c['where']}, outside any collective" if c["where"] else
                                     "outside any collective")


def _loader(c: dict, who: str) -> str:
    at = f" at {c['where']}" if c["where"] else ""
    workers = c.get("workers") or []
    if not workers:
        idle = c.get("idle_workers") or []
        return (f"{who} waits for the next batch from its DataLoader{at}, outside any collective; "
                + (f"its workers (pids {', '.join(map(str, idle))}) are idle in torch's worker loop" if idle
                   else "its workers' stacks could not be read"))
    said = []
    for w in workers:
        where = f"stuck in {w['where']}" if w["where"] else "stuck"
        where += f": {w['code']}" if w.get("code") else ""
        if w.get("state") == "D":
            where += f", blocked in the kernel (state D{', ' + w['wchan'] if w.get('wchan') else ''})"
        said.append(f"worker pid {w['pid']} is {where}")
    return f"{who} waits for its DataLoader{at}, outside any collective: its " + "; its ".join(said)


def _victim_parts(f: dict) -> list[str]:
    coll = f["collective"]
    if f["mismatch"]:
        by_op: dict[str, list[int]] = {}
        for v in f["victims"]:
            by_op.setdefault(v["op"], []).append(v["rank"])
        said = ", ".join(f"{rank_list(r)} in {op}" for op, r in sorted(by_op.items(), key=lambda kv: min(kv[1])))
        at = f" (at collective #{coll['seq']})" if coll else ""
        return [f"the ranks wait in different collectives: {said}{at}"]
    if not f["victims"]:
        return []
    ops = sorted({v["op"] for v in f["victims"]})
    what = " / ".join(ops) + (f" (collective #{coll['seq']}" + (f", {coll['op']}" if coll["op"] else "") + ")"
                              if coll else "")
    waits = [v["waiting_s"] for v in f["victims"] if v.get("waiting_s") is not None]
    return [f"{rank_list([v['rank'] for v in f['victims']])} {'waits' if len(f['victims']) == 1 else 'wait'} in {what}"
            + (f" for {max(waits):.0f} s" if waits else "")]


def _uneven_parts(f: dict) -> list[str]:
    u, coll = f["uneven"], f["collective"]
    one = len(u["left"]) == 1
    left = (f"{rank_list(u['left'])} ran out of data first: {'it' if one else 'they'} left the training loop "
            f"and {'waits' if one else 'wait'} in {' / '.join(u['left_ops'])}"
            + (f" at {', '.join(u['left_where'])}" if u["left_where"] else ""))
    still = (f"{rank_list(u['training'])} {'is' if len(u['training']) == 1 else 'are'} still in the training loop, "
             f"in {u['training_op']}" + (f" at {u['training_where']}" if u["training_where"] else "")
             + (f" (collective #{coll['seq']})" if coll else ""))
    return [left, still]


def _hint(f: dict, run_ref: str, pg_backend: str | None) -> tuple[str, str | None]:
    culprits = [c["rank"] for c in f["culprits"]]
    if f.get("uneven"):
        u = f["uneven"]
        return (f"uneven inputs: {rank_list(u['training'])} had more batches than {rank_list(u['left'])}; "
                + JOIN_FIX, f"cockpit stacks {run_ref}")
    if culprits:
        who = rank_list(culprits)
        hint = f"{who} {'is the culprit' if len(culprits) == 1 else 'are the culprits'}"
        first = f["culprits"][0]
        if first.get("workers"):
            hint += (": its DataLoader worker does not return from the job's own code (a read that never completes:"
                     " a file system or network store that hangs, a pipe or lock nobody feeds)")
        if any(v["op"] in ("init_process_group", "new_group") for v in f["victims"]):
            hint += "; the ranks in init_process_group wait for it to join the process group"
        elif f["victims"]:
            hint += ("; the ranks waiting in a collective are victims (torchrun's failure table names a victim: "
                     "the rank that timed out waiting)")
        if first["state"] == "stopped":
            return hint + f". Resume it (kill -CONT) or end the run (cockpit stop {run_ref})", None
        return hint, f"cockpit stacks {run_ref} --rank {first['rank']}"
    if f["victims"]:
        where = ("cockpit stacks shows every rank's op and collective number (the Flight Recorder's); "
                 + ("NCCL_DEBUG=INFO shows the links" if pg_backend == "nccl" else
                    "a dead link shows as a peer that never answers"))
        hint = ("the ranks called different collectives: a rank skipped one or took another branch; make every rank "
                "call the same collectives in the same order" if f["mismatch"] else
                "every rank waits in a collective: ranks that disagree on it (a skipped call, another size) or a "
                "dead link") + f"; {where}"
        return hint, f"cockpit stacks {run_ref}"
    if not f["hooked"]:
        return ("no rank has cockpit's hook (COCKPIT_HOOK=0, or a Python that skips sitecustomize): there are no "
                "stacks to ask for; py-spy dump --pid PID (the pids are in logs/rank-*.pid) can read them"), None
    return "no rank answered with a stack in time", f"cockpit stacks {run_ref}"
