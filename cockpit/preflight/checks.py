"""Preflight: can this job run on its nodes? Pure checks over facts gathered from the nodes
(``cockpit.launch.ssh.facts.gather``), so every rule is tested on plain data.

`cockpit doctor job.yaml` prints them; the ssh launcher runs them before a launch and refuses one that
fails. Each check says what is wrong, where (which nodes) and what to do about it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:  # the nodes' records are read by the node checks alone, not by `cockpit validate`'s file checks
    from cockpit.fleet.records import Interface, NodeReport
    from cockpit.preflight import ifadvice  # (the interface checks import it: not `cockpit validate`, issue 29)
    from cockpit.spec.model import JobSpec

Level = Literal["ok", "warn", "FAIL"]
OK: Final = "ok"
WARN: Final = "warn"
FAIL: Final = "FAIL"
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


@dataclass(frozen=True)
class Check:
    name: str
    level: Level
    detail: str
    where: tuple[str, ...] = ()
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "level": self.level, "detail": self.detail, "where": list(self.where),
                "hint": self.hint}

    def line(self) -> str:
        hint = f" (hint: {self.hint})" if self.hint and self.level != OK else ""
        return f"{self.level:<4}  {self.name}: {self.detail}{hint}"


@dataclass
class JobFacts:
    """What the nodes said. ``nodes``: the fleet's reports, in node-rank order;
    ``node_checks``: host -> the node agent's `check` answer, or {"agent_error": why it could not run}."""

    nodes: list[NodeReport]
    master_addr: str | None = None
    master_port: int | None = None
    port_free: bool | None = None  # binding it on the master worked (None: not tried)
    port_error: str | None = None
    node_checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    addresses: dict[str, str] = field(default_factory=dict)  # host -> its address on a subnet all share

    def up(self) -> list[NodeReport]:
        return [n for n in self.nodes if n.reachable]


def failed(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.level == FAIL]


def is_loopback(addr: str | None) -> bool:
    if addr is None:
        return False
    if addr in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


def job_checks(spec: JobSpec, facts: JobFacts) -> list[Check]:
    """Every check for ``spec`` over ``facts``. A node that is down is reported once, as unreachable, and
    the checks across nodes (interfaces, master) wait until every node answers."""
    checks = [reachable(facts)]
    if not facts.up():
        return checks
    checks += node_setup(spec, facts) + gpus(spec, facts) + versions(spec, facts)
    if len(facts.up()) == len(facts.nodes):  # across-node checks on part of the nodes would mislead
        checks += interfaces(spec, facts) + master(spec, facts)
    return checks


def reachable(facts: JobFacts) -> Check:
    from cockpit.fleet.records import REACHABLE

    down = [n for n in facts.nodes if n.state not in REACHABLE]
    if not down:
        return Check("reachable", OK, f"{len(facts.nodes)}/{len(facts.nodes)} nodes")
    detail = "; ".join(f"{n.host}: {n.state.replace('_', ' ')} ({n.reason})" for n in down)
    hints = {n.hint for n in down if n.hint}
    return Check("reachable", FAIL, detail, tuple(n.host for n in down),
                 "; ".join(sorted(hints)) or "try `ssh HOST true`")


def node_setup(spec: JobSpec, facts: JobFacts) -> list[Check]:
    """The node agent ran (the job's python works), the working directory and script exist."""
    out = []
    hosts = [n.host for n in facts.up()]
    broken = {h: facts.node_checks[h]["agent_error"] for h in hosts if "agent_error" in facts.node_checks.get(h, {})}
    if broken:
        out.append(Check("python", FAIL, "; ".join(f"{h}: {e}" for h, e in broken.items()), tuple(broken),
                         "set python: in the job to the interpreter (with torch) on the nodes"))
    checked = {h: c for h, c in facts.node_checks.items() if h in hosts and "agent_error" not in c}
    no_dir = [h for h, c in checked.items() if not c.get("workdir")]
    no_script = [h for h, c in checked.items() if c.get("workdir") and c.get("script") is False]
    if no_dir:
        out.append(Check("workdir", FAIL, f"the job's working directory is missing on {', '.join(no_dir)}",
                         tuple(no_dir), "the job directory must exist on every node at the same path (a "
                         "shared filesystem), or set workdir: to where it is on the nodes"))
    if no_script:
        out.append(Check("script", FAIL, f"{spec.script} is missing in the working directory on "
                         f"{', '.join(no_script)}", tuple(no_script), "copy the code to the nodes, or share it"))
    if checked and not no_dir and not no_script:
        out.append(Check("workdir", OK, f"present on {len(checked)} node(s)"))
    return out


def gpus(spec: JobSpec, facts: JobFacts) -> list[Check]:
    up = facts.up()
    if not spec.uses_gpus:
        return [Check("GPUs", OK, f"none needed (CPU job, {spec.dist_backend})")]
    no_gpu = [n for n in up if n.state != "ok" or not n.gpus]
    if no_gpu:
        return [Check("GPUs", FAIL, "; ".join(f"{n.host}: {n.reason or 'no GPU'}" for n in no_gpu),
                      tuple(n.host for n in no_gpu), "run on GPU nodes, or gpus: none for a CPU job")]
    counts = {n.host: len(n.gpus) for n in up}
    out = []
    if len(set(counts.values())) > 1:
        spread = ", ".join(f"{h}: {c}" for h, c in counts.items())
        out.append(Check("GPU count", FAIL, f"differs: {spread}", tuple(counts),
                         "every node must have as many GPUs; pick them with gpus: [ids]"))
    wanted = spec.gpu_ids or ()
    short = {h: c for h, c in counts.items() if wanted and max(wanted) >= c}
    if short:
        ids = ",".join(map(str, wanted))
        out.append(Check("GPU ids", FAIL, f"gpus: [{ids}] asked, but " + ", ".join(
            f"{h} has {c} (0-{c - 1})" for h, c in short.items()), tuple(short),
            "pick ids that exist on every node (cockpit gpus --job JOB lists them)"))
    if not out:
        out.append(Check("GPUs", OK, f"{next(iter(counts.values()))} per node" +
                         (f", ids {list(wanted)} exist" if wanted else "")))
    return out


def _not_installed(hosts: list[str]) -> str:
    return f"{', '.join(hosts)} (cockpit is not installed there: its probe fell back to nvidia-smi)"


def versions(spec: JobSpec, facts: JobFacts) -> list[Check]:
    reported = {n.host: n.versions for n in facts.up() if n.versions}
    silent = [n.host for n in facts.up() if not n.versions]
    if not reported:
        return [Check("versions", WARN, f"torch / NCCL / python versions not checked on {_not_installed(silent)}",
                      tuple(silent), "pip install cockpit into the job's python on the nodes to check them")]
    out = []
    if silent:
        out.append(Check("versions", WARN, f"versions not checked on {_not_installed(silent)}", tuple(silent),
                         "pip install cockpit into the job's python there to check them"))
    no_torch = [h for h, v in reported.items() if not v.torch]
    if no_torch:
        out.append(Check("torch", FAIL, f"not installed for the job's python on {', '.join(no_torch)}",
                         tuple(no_torch), "install torch there, or set python: to an interpreter that has it"))
    wanted: list[tuple[str, Level]] = [("torch", FAIL), ("nccl", FAIL if spec.dist_backend == "nccl" else WARN),
                                       ("python", WARN)]
    for key, level in wanted:
        values = {h: getattr(v, key) for h, v in reported.items() if getattr(v, key)}
        if len(set(values.values())) > 1:
            out.append(Check(f"{key} version", level, "differs: " + ", ".join(f"{h}: {v}" for h, v in values.items()),
                             tuple(values), f"install the same {key} on every node"))
        elif values:
            out.append(Check(f"{key} version", OK, next(iter(values.values()))))
    return out


def interfaces(spec: JobSpec, facts: JobFacts) -> list[Check]:
    """The job's *_SOCKET_IFNAME exists on every node (not lo for several nodes); gloo's hostname fallback."""
    from cockpit.preflight import ifadvice

    nodes = {n.host: n.interfaces for n in facts.up() if n.interfaces is not None}
    multi = spec.num_nodes > 1
    advice = ifadvice.advise(nodes) if multi and len(nodes) == len(facts.up()) else None
    hint = f"set {advice.env_text()}" if advice and advice.subnet else (advice.reason if advice else None)
    if advice and advice.per_node:
        hint = (hint or "") + " (per-node values go in the job's node_env:, e.g. node_env: {" + ", ".join(
            f"{h}: {{{', '.join(f'{k}: {v}' for k, v in e.items())}}}" for h, e in advice.per_node.items()) + "})"
    out = []
    silent = [n.host for n in facts.up() if n.interfaces is None]
    if silent:
        out.append(Check("interfaces", WARN, f"interfaces not checked on {_not_installed(silent)}; the node "
                         "agent could not list them either", tuple(silent),
                         "pip install cockpit into the job's python there, or check *_SOCKET_IFNAME by hand"))
    shared = _on_shared_subnets(nodes) if multi else None
    for var in (ifadvice.NCCL, ifadvice.GLOO):
        for host, ifaces in nodes.items():  # each node with its own value (env:, node_env: over it)
            value = spec.env_for(host).get(var)
            if value is not None:
                out += _named_interface(var, value, {host: ifaces}, multi, hint, shared)
    if multi and spec.dist_backend == "gloo":
        bad = {h: c.get("hostname_addr") for h, c in facts.node_checks.items()
               if "agent_error" not in c and ifadvice.GLOO not in spec.env_for(h)
               and (c.get("hostname_addr") is None or is_loopback(c.get("hostname_addr")))}
        if bad:
            out.append(Check("gloo address", FAIL, "GLOO_SOCKET_IFNAME is unset, so gloo uses the address the "
                             "hostname resolves to: " + ", ".join(f"{h}: {a or 'does not resolve'}"
                                                                  for h, a in bad.items()),
                             tuple(bad), hint or "set GLOO_SOCKET_IFNAME to the interface the nodes share"))
    if advice is not None:  # no shared subnet may be a routed network: the master address check decides
        out.append(Check("interface advice", OK if advice.subnet else WARN,
                         f"{advice.reason}: {advice.env_text()}" if advice.subnet else
                         f"{advice.reason}; fine if the nodes are routed to each other (see master address)",
                         tuple(nodes) if not advice.subnet else ()))
    return out


def _on_shared_subnets(nodes: ifadvice.Nodes) -> dict[str, set[str]] | None:
    """host -> its interfaces on a subnet every node shares; None when there is none (a routed network)."""
    from cockpit.preflight import ifadvice

    subnets = ifadvice.common_subnets(nodes)
    if not subnets:
        return None
    out: dict[str, set[str]] = {h: set() for h in nodes}
    for hosts in subnets.values():
        for host, att in hosts.items():
            out[host].add(att.ifname)
    return out


def _named_interface(var: str, value: str, nodes: ifadvice.Nodes, multi: bool, hint: str | None,
                     shared: dict[str, set[str]] | None = None) -> list[Check]:
    """GLOO: every name exists, up with IPv4. NCCL (prefixes, ``^`` excludes): of what the value selects,
    interfaces that are down or have no IPv4 are skipped, as NCCL skips them ("^docker,lo" on a node with
    an unused NIC is fine); at least one must be left, on a subnet every node shares (``shared``: host ->
    those interfaces; None: the nodes share none, a routed network, where up with IPv4 has to do)."""
    from cockpit.preflight import ifadvice

    out = []
    for host, ifaces in nodes.items():
        chosen = ifadvice.selected(var, value, ifaces)
        missing = ifadvice.missing_gloo_names(value, ifaces) if var == ifadvice.GLOO else []
        has = ifadvice.describe_node(ifaces)
        live = [i for i in chosen if _live(i)]
        if var == ifadvice.NCCL and chosen and not live:
            out.append(Check("interface", FAIL, f"{var}={value} selects only interfaces that are down or have no "
                             f"IPv4 address on {host} (it has {has})", (host,), hint))
        elif missing or not chosen:
            what = f"names {', '.join(missing)}, missing" if missing else "matches no interface"
            out.append(Check("interface", FAIL, f"{var}={value} {what} on {host} (it has {has})", (host,), hint))
        elif multi and any(i.loopback for i in (live if var == ifadvice.NCCL else chosen)):
            out.append(Check("interface", FAIL, f"{var}={value} selects the loopback interface on {host}: the other "
                             "nodes cannot reach it there", (host,), hint))
        elif var == ifadvice.GLOO and len(live) < len(chosen):
            names = ", ".join(str(i.name) for i in chosen if not _live(i))  # chosen by name: each has one
            out.append(Check("interface", FAIL, f"{var}={value} selects {names} on {host}, which is down or has "
                             "no IPv4 address", (host,), hint))
        elif var == ifadvice.NCCL and multi and shared is not None and not any(i.name in shared[host] for i in live):
            names = ", ".join(str(i.name) for i in live)  # chosen by name: each has one
            out.append(Check("interface", FAIL, f"{var}={value} selects {names} on {host}, on no subnet that every "
                             f"node shares (it has {has})", (host,), hint))
    if not out and nodes:
        out.append(Check("interface", OK, f"{var}={value} exists on every node"))
    return out


def _live(iface: Interface) -> bool:
    from cockpit.preflight import ifadvice

    return iface.up and bool(ifadvice.networks(iface))


def master(spec: JobSpec, facts: JobFacts) -> list[Check]:
    """The master port is free on the master; its address is not loopback, resolves and is reachable."""
    out = []
    port = facts.master_port
    if facts.port_free is False:
        out.append(Check("master port", FAIL, f"port {port} is in use on {spec.hosts[0]} ({facts.port_error})",
                         (spec.hosts[0],), f"master_port: auto picks a free one, or stop what listens there "
                         f"(`ss -ltnp 'sport = :{port}'` on {spec.hosts[0]})"))
    elif facts.port_free:
        auto = "" if spec.master_port else "auto: "
        out.append(Check("master port", OK, f"{auto}{port} is free on {spec.hosts[0]}"))
    if spec.num_nodes < 2:
        return out
    addr = facts.master_addr
    if is_loopback(addr):
        out.append(Check("master address", FAIL, f"{addr} is a loopback address: the other nodes would reach "
                         "themselves, not the master", (spec.hosts[0],),
                         "list the master by a name or address the other nodes can reach"))
        return out
    bad = {h: c.get("reach_error") or "not reached" for h, c in facts.node_checks.items()
           if "agent_error" not in c and not c.get("reached")}
    if bad:
        out.append(Check("master address", FAIL, f"{addr}:{port} not reachable from " + "; ".join(
            f"{h}: {e}" for h, e in bad.items()), tuple(bad), "the nodes must resolve and reach the master's "
            "address on the master port: check the name, /etc/hosts, routes and firewalls"))
    elif facts.node_checks:
        out.append(Check("master address", OK, f"{addr}:{port} is reachable from every node"))
    return out
