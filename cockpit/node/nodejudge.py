"""The preflight inside a Slurm allocation, the part that compares: run once in the batch shell after the
node step (cockpit.node.nodecheck), it reads every node's answer, names each bad node with its reasons, prints
``cockpit: preflight: node n2: ...`` lines, writes ``<dir>/verdict.json`` for cockpit's supervisor and exits
PREFLIGHT_EXIT when a node is bad, before training starts.

A node is bad when it gave no answer; when the job asks for GPUs and nvidia-smi fails or lists fewer than it
asks per node; when torch does not import; when its torch / NCCL / python version differs from what a strict
majority of the nodes run; when the NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME it runs with select no usable
interface there; when it never reached the all-reduce's store. What cannot be pinned on one node (two nodes,
two torch versions; an all-reduce that failed everywhere) fails the check without naming a node to exclude.
A driver that differs from the others' is a warning only: mixed drivers train fine.

Pure over the answers (``judge``) plus a small ``main``; stdlib only, shipped as source beside nodecheck.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

PREFLIGHT_EXIT = 75  # EX_TEMPFAIL: this allocation cannot train; another one may
MARK = "cockpit: preflight: "  # every line the check prints starts so; cockpit.launch.slurm reads them
VERDICT = "verdict.json"
VERSION_KEYS = ("torch", "nccl", "python")


def judge(nodes: list[str], answers: dict[str, dict | None], gpus_per_node: int) -> dict:
    """The verdict over ``answers`` (node -> its answer, None: none came) for ``nodes`` in node-rank order:
    {"ok", "bad": {node: [reasons]}, "failures": [reasons naming no single node], "warnings": [...]}."""
    bad: dict[str, list[str]] = {}
    for name in nodes:
        problems = _node_problems(answers.get(name), gpus_per_node, len(nodes) > 1)
        if problems:
            bad[name] = problems
    answered = {n: a for n, a in answers.items() if a is not None and n in nodes}
    failures: list[str] = []
    for key in VERSION_KEYS:
        odd, failure = _odd_ones(key, {n: a.get(key) for n, a in answered.items()})
        for name, why in odd.items():
            bad.setdefault(name, []).append(why)
        failures += [failure] if failure else []
    warnings = [w for w in [_odd_ones("driver", {n: a.get("driver") for n, a in answered.items()})[1]] if w]
    if len(nodes) > 1 and not bad and not failures:
        failures += _allreduce(nodes, answered, bad)
    return {"ok": not bad and not failures, "bad": bad, "failures": failures, "warnings": warnings}


def _node_problems(answer: dict | None, gpus_per_node: int, several: bool) -> list[str]:
    if answer is None:
        return ["no answer from the preflight step (python missing, or the node hung; see its .out file)"]
    out = []
    if gpus_per_node:
        listed = answer.get("gpus") or []
        if answer.get("error"):
            out.append(f"{answer['error']}, and the job asks {gpus_per_node} GPUs per node")
        elif len(listed) < gpus_per_node:
            ids = ",".join(str(g.get("index")) for g in listed) or "none"
            out.append(f"{len(listed)} GPUs visible (nvidia-smi ids {ids}), the job asks {gpus_per_node} per node")
    if answer.get("torch_error"):
        out.append(f"torch does not import: {answer['torch_error']}")
    if several:
        out += _interface_problems(answer)
    return out


def _interface_problems(answer: dict) -> list[str]:
    """The job's *_SOCKET_IFNAME as this node runs it must select an interface that is up, not loopback, with
    an IPv4 address (NCCL: prefixes, ^ exclude, = exact; gloo: exact names, every one present)."""
    ifaces = answer.get("interfaces")
    if ifaces is None:
        return []  # the node could not list them: unknown, not bad
    usable = {i["name"] for i in ifaces if i.get("up") and not i.get("loopback") and i.get("ipv4")}
    have = {i["name"] for i in ifaces}
    out = []
    for var, value in (answer.get("env") or {}).items():
        text = value.strip()
        if var == "GLOO_SOCKET_IFNAME":
            names = [n.strip() for n in text.split(",") if n.strip()]
            missing = [n for n in names if n not in have]
            if missing:
                out.append(f"GLOO_SOCKET_IFNAME={value}: no interface {', '.join(missing)} here "
                           f"(has {', '.join(sorted(have))})")
            continue
        exclude, text = text.startswith("^"), text.lstrip("^")
        exact, text = text.startswith("="), text.lstrip("=")
        names = [n.strip() for n in text.split(",") if n.strip()]
        chosen = [n for n in usable if any(n == p if exact else n.startswith(p) for p in names) != exclude]
        if not chosen:
            out.append(f"{var}={value} selects no interface that is up with an IPv4 address here "
                       f"(usable: {', '.join(sorted(usable)) or 'none'})")
    return out


def _odd_ones(key: str, values: dict[str, str | None]) -> tuple[dict[str, str], str | None]:
    """Nodes whose ``key`` differs from a strict majority's value; or, with no majority, one failure."""
    known = {n: v for n, v in values.items() if v is not None}
    counts = Counter(known.values())
    if len(counts) < 2:
        return {}, None
    value, count = counts.most_common(1)[0]
    if count * 2 > len(known):
        return {n: f"{key} {v}, the other nodes run {value}" for n, v in known.items() if v != value}, None
    listed = ", ".join(f"{n} {v}" for n, v in sorted(known.items()))
    return {}, f"{key} differs between the nodes and no version has a majority: {listed}"


def _allreduce(nodes: list[str], answered: dict[str, dict], bad: dict[str, list[str]]) -> list[str]:
    """Blame the nodes that never reached the store (node 0 says which); else report the failure as is."""
    results = {n: a.get("allreduce") for n, a in answered.items()}
    if all(r and r.get("ok") for r in results.values()):
        return []
    master = answered.get(nodes[0], {}).get("allreduce") or {}
    for rank in master.get("missing") or []:
        if 0 < rank < len(nodes):
            bad.setdefault(nodes[rank], []).append(f"never reached the all-reduce's store on {nodes[0]} "
                                                   "(network, firewall, or the node hung)")
    if bad:
        return []
    errors = "; ".join(f"{n}: {r['error'] if r else 'did not finish'}" for n, r in results.items()
                       if not (r and r.get("ok")))
    return [f"the all-reduce across the nodes failed ({errors})"]


def read_answers(directory: Path, nodes: list[str]) -> dict[str, dict | None]:
    out: dict[str, dict | None] = {}
    for name in nodes:
        try:
            out[name] = json.loads((directory / f"{name}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            out[name] = None
    return out


def lines(verdict: dict) -> list[str]:
    """What the batch log shows: one line per bad node and per failure, then the outcome."""
    out = [f"{MARK}node {n}: {'; '.join(why)}" for n, why in verdict["bad"].items()]
    out += [f"{MARK}{f}" for f in verdict["failures"]] + [f"{MARK}warning: {w}" for w in verdict["warnings"]]
    took = f"{verdict['seconds']:.1f} s" if verdict.get("seconds") is not None else "?"
    if verdict["ok"]:
        out.append(f"{MARK}ok: {len(verdict['nodes'])} nodes in {took}")
    else:
        names = ",".join(verdict["bad"]) or "no single node"
        out.append(f"{MARK}failed on {names} in {took}: training not started (exit {PREFLIGHT_EXIT})")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="cockpit_nodejudge.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", required=True)
    p.add_argument("--nodes", required=True, help="the allocation's nodes, in node-rank order, space separated")
    p.add_argument("--gpus", type=int, default=0, help="GPUs the job asks per node")
    p.add_argument("--started", type=float, help="when the check began (seconds since the epoch)")
    p.add_argument("--on-bad", choices=("fail", "exclude"), default="fail",
                   help="what cockpit does with a bad node: fail the run, or resubmit once without it")
    args = p.parse_args(argv)
    directory, nodes = Path(args.dir), args.nodes.split()
    verdict = judge(nodes, read_answers(directory, nodes), args.gpus)
    verdict.update(nodes=nodes, on_bad=args.on_bad,
                   seconds=round(time.time() - args.started, 3) if args.started is not None else None)
    (directory / VERDICT).write_text(json.dumps(verdict, indent=1) + "\n", encoding="utf-8")
    for line in lines(verdict):
        print(line, flush=True)
    return 0 if verdict["ok"] else PREFLIGHT_EXIT


if __name__ == "__main__":
    sys.exit(main())
