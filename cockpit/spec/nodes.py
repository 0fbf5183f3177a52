"""Where a job runs: its nodes (hosts, a count or a hostlist), its GPUs per node, per-node env. Each reads
one part of the loaded job file through a Checker, records positioned problems, and returns usable values."""

from __future__ import annotations

from cockpit.spec.fields import MAX_GPUS, MAX_NODES, Checker
from cockpit.spec.formats import hostlist_count
from cockpit.spec.yamlpos import KeyPath, YamlMap


def spare_names(data: YamlMap) -> tuple[str, ...]:
    """The names in recover.spare_nodes as written (checked by cockpit.spec.recover), for node_env: a spare
    may need its own values too (its NIC named differently)."""
    recover = data.get("recover")
    spares = recover.get("spare_nodes") if isinstance(recover, dict) else None
    return tuple(str(h) for h in spares if isinstance(h, str)) if isinstance(spares, list) else ()


def node_env(check: Checker, data: YamlMap, launcher: str, hosts: tuple[str, ...],
             spares: tuple[str, ...] = ()) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """node_env: {host: {NAME: value}}: per-node values over env: (ssh only: its hosts are known up front),
    e.g. GLOO_SOCKET_IFNAME where the nodes name the shared NIC differently; ``spares``' too (recover:)."""
    raw = data.get("node_env")
    if raw is None:
        return ()
    path = ("node_env",)
    if launcher != "ssh":
        check.problem(path, f"per-node env needs the nodes named up front; launcher {launcher} does not",
                      "use launcher: ssh, or one value for every node in env:")
        return ()
    if not isinstance(raw, dict):
        check.problem(path, "expected a mapping of host: {NAME: value}",
                      "node_env: {node3: {GLOO_SOCKET_IFNAME: ens5}}")
        return ()
    out: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    for host in raw:
        if str(host) not in hosts and str(host) not in spares:
            check.problem((*path, host), f"{host!r} is not one of the job's nodes",
                          f"nodes: [{', '.join(hosts)}]")
            continue
        out.append((str(host), check.env(raw, (*path, host))))
    return tuple(out)


def nodes(check: Checker, data: YamlMap, launcher: str) -> tuple[tuple[str, ...], int, str | None]:
    raw = data.get("nodes")
    path = ("nodes",)
    if launcher == "slurm":
        if raw is None:
            return (), 1, None
        if isinstance(raw, int) and not isinstance(raw, bool):
            if not 1 <= raw <= MAX_NODES:
                check.problem(path, f"{raw} is out of range", f"nodes: 1..{MAX_NODES}")
                return (), 1, None
            return (), raw, None
        if isinstance(raw, str) and raw.strip():
            count = hostlist_count(raw.strip())
            if count is None:
                check.problem(path, f"{raw!r} is not a hostlist", 'e.g. nodes: "node[01-04]" or nodes: 4')
            elif count > MAX_NODES:
                check.problem(path, f"{raw.strip()!r} names {count} hosts, more than {MAX_NODES}",
                              "check the ranges in brackets, e.g. gpu[01-16]")
                count = None
            return (), count or 1, raw.strip()
        check.problem(path, "for slurm, give a node count or a hostlist", 'nodes: 2 or nodes: "gpu[01-02]"')
        return (), 1, None
    hosts = check.hosts(data, path) if launcher == "ssh" else check.str_list(data, path)
    if launcher == "local":
        if hosts and hosts != ("localhost",):
            check.problem(path, "the local launcher runs on this machine only",
                          "use launcher: ssh for other hosts, or drop nodes:")
        return ("localhost",), 1, None
    if not hosts:
        check.problem(path, "the ssh launcher needs at least one host", "nodes: [node1, node2]")
        return (), 1, None
    if len(set(hosts)) != len(hosts):
        check.problem(path, "a host is listed twice", "list each host once; use procs_per_node for more ranks")
    return hosts, len(hosts), None


def gpus(check: Checker, data: YamlMap, launcher: str) -> tuple[int | None, tuple[int, ...] | None]:
    raw = data.get("gpus")
    path = ("gpus",)
    if isinstance(raw, str) and raw.strip() not in ("none", "all"):
        raw = _lightning_ids(check, raw.strip(), path)
    if raw is None or raw == "none" or raw == 0 or raw == []:
        return 0, None
    if raw == "all":
        if launcher == "slurm":
            check.problem(path, "'all' is not a request Slurm understands", "give a count per node: gpus: 4")
        return None, None
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw == -1:  # Lightning's "every GPU"
            check.problem(path, "-1 is Lightning's 'every GPU'", "gpus: all")
            return 0, None
        if not 0 <= raw <= MAX_GPUS:
            check.problem(path, f"{raw} is not a GPU count", f"gpus: 1..{MAX_GPUS}, or gpus: none for CPU")
            return 0, None
        return raw, (None if launcher == "slurm" else tuple(range(raw)))
    if isinstance(raw, list):
        ids = check.gpu_ids(raw, path)
        if launcher == "slurm":
            check.problem(path, "under Slurm, GPU ids are assigned by the scheduler",
                          f"give a count instead: gpus: {len(ids)}")
            return len(ids), None
        return len(ids), ids
    check.problem(path, f"{raw!r} is not a GPU selection", "gpus: none | all | 4 | [0, 2]")
    return 0, None


def _lightning_ids(check: Checker, text: str, path: KeyPath) -> object:
    """Lightning's string form: "0, 1", "0,1" and "1," are GPU ids (returned as a list). A lone "2" is refused:
    Lightning reads it as a count of 2, while a list means ids, so either reading would surprise someone.
    Anything else comes back unchanged, for the usual "not a GPU selection" problem."""
    words = [w.strip() for w in text.split(",")]
    if not all(w.lstrip("-").isdigit() for w in words if w) or not any(words):
        return text
    if "," not in text:
        n = int(text)
        if n == -1:
            check.problem(path, "'-1' is Lightning's 'every GPU'", "gpus: all")
        else:
            check.problem(path, f"{text!r} as a string is ambiguous: Lightning reads {text!r} as a count of {n}, "
                          "but '0, 1' as GPU ids", f"gpus: {n} for {n} GPU{'s' if n != 1 else ''} (ids from 0), "
                          f"or gpus: [{n}] for the GPU with id {n}")
        return None
    return [int(w) for w in words if w]
