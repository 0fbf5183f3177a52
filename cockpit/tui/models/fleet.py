"""The fleet as the TUI shows it: the fleet's NodeReports -> table rows (with each GPU's sparklines from
cockpit.tui.models.gpu_history), and the user's selection of GPUs and whole nodes. Pure: no textual, no IO, no clock, so
the same nodes always give the same rows (snapshots depend on it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cockpit.fleet.records import STATES, NodeReport
from cockpit.nvml import Gpu
from cockpit.tui.models.gpu_history import MIN_SPARK, History, sparkline

COLUMNS = ("", "NODE/GPU", "NAME", "UTIL", "MEMORY", "TEMP", "PROCS")


def widths(spark: int = MIN_SPARK) -> tuple[int, ...]:
    """Column widths for sparklines ``spark`` cells wide (gpu_history.spark_width of the terminal): fixed for a
    given terminal, so the table does not jump as values change; at 80 columns the table fits exactly."""
    return (1, 10, 16, 5 + spark, 8 + spark, 4, 5)


@dataclass(frozen=True)
class Selection:
    """GPUs picked per node, and CPU-only nodes picked as a whole. Immutable: toggles return a new one."""

    gpus: frozenset[tuple[str, int]] = frozenset()
    nodes: frozenset[str] = frozenset()

    def toggle_gpu(self, host: str, index: int) -> Selection:
        key = (host, index)
        return Selection(self.gpus ^ {key}, self.nodes)

    def toggle_node(self, node: NodeReport) -> Selection:
        """A node with GPUs: all of them on (or off when all were on); a CPU-only node: the node itself."""
        host, ids = node.host, [g.index for g in node.gpus]
        if not ids:
            return Selection(self.gpus, self.nodes ^ {host})
        mine = {(host, i) for i in ids}
        gpus = self.gpus - mine if mine <= self.gpus else self.gpus | mine
        return Selection(frozenset(gpus), self.nodes)

    def mark(self, node: NodeReport, index: int | None = None) -> str:
        """'●' selected, '◐' some of the node's GPUs, '○' not."""
        host = node.host
        if index is not None:
            return "●" if (host, index) in self.gpus else "○"
        ids = [g.index for g in node.gpus]
        if not ids:
            return "●" if host in self.nodes else "○"
        picked = sum((host, i) in self.gpus for i in ids)
        return "●" if picked == len(ids) else "◐" if picked else "○"

    def hosts(self, order: Sequence[str]) -> list[str]:
        """Hosts with anything selected, in fleet order."""
        return [h for h in order if h in self.nodes or any(g[0] == h for g in self.gpus)]

    def ids(self, host: str) -> list[int]:
        return sorted(i for h, i in self.gpus if h == host)

    def __bool__(self) -> bool:
        return bool(self.gpus or self.nodes)


@dataclass(frozen=True)
class Row:
    """One table row: a node (gpu is None) or one of its GPUs. ``kind``: node-ok | node-cpu | node-error | gpu."""

    key: str
    host: str
    gpu: int | None
    kind: str
    cells: tuple[str, ...]


def row_key(host: str, gpu: int | None = None) -> str:
    return f"node\x1f{host}" if gpu is None else f"gpu\x1f{host}\x1f{gpu}"


def short_name(name: str | None) -> str:
    return "?" if name is None else name.removeprefix("NVIDIA ").strip()


def node_summary(node: NodeReport) -> tuple[str, str]:
    """(kind, words) for a node's row."""
    state, gpus = node.state, node.gpus
    if state == "ok" and gpus:
        return "node-ok", f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}"
    if state in ("ok", "no_driver"):
        cores = node.cpus
        return "node-cpu", "CPU" + (f" · {cores} cores" if cores else " only")
    return "node-error", (state or "unknown").replace("_", " ")


def rows(nodes: list[NodeReport], history: History, selection: Selection, spark: int = MIN_SPARK) -> list[Row]:
    """Every node, then its GPUs in nvidia-smi order (index = PCI bus order), sparklines ``spark`` cells wide."""
    out = []
    for node in nodes:
        host = node.host
        kind, words = node_summary(node)
        out.append(Row(row_key(host), host, None, kind, (selection.mark(node), host, words, "", "", "", "")))
        for g in node.gpus:
            i = g.index
            util = g.utilization_gpu
            util_text = ("  - " if util is None else f"{util:>3}%") + " " + sparkline(history.util(host, i), spark)
            out.append(Row(row_key(host, i), host, i, "gpu", (
                selection.mark(node, i), f"  {i}", short_name(g.name)[:16], util_text,
                f"{_memory(g):>7} {sparkline(history.memory(host, i), spark)}",
                "-" if g.temperature_c is None else f"{g.temperature_c}C", str(len(g.processes)))))
    return out


def _memory(gpu: Gpu) -> str:
    used, total = gpu.memory_used_mib, gpu.memory_total_mib
    if used is None and total is None:
        return "-"
    gib = lambda mib: "?" if mib is None else f"{mib / 1024:.0f}" if mib >= 10240 else f"{mib / 1024:.1f}"  # noqa: E731
    return f"{gib(used)}/{gib(total)}G"


def details(node: NodeReport, gpu_index: int | None) -> list[str]:
    """Lines for the detail panel under the table: the node's state and facts, or one GPU and its processes."""
    if gpu_index is None:
        return _node_details(node)
    gpu = next((g for g in node.gpus if g.index == gpu_index), None)
    if gpu is None:
        return [f"{node.host}: GPU {gpu_index} is gone"]
    lines = [f"{node.host} GPU {gpu_index}: {gpu.name or '?'}  bus {gpu.pci_bus_id or '?'}",
             f"util {_pct(gpu.utilization_gpu)}  memory {_s(gpu.memory_used_mib)} / "
             f"{_s(gpu.memory_total_mib)} MiB  temp {_s(gpu.temperature_c)}C  power "
             f"{_watts(gpu.power_draw_w)} / {_watts(gpu.power_limit_w)} W"]
    procs = gpu.processes
    lines.append(f"{len(procs)} process{'es' if len(procs) != 1 else ''}" + (":" if procs else ""))
    for p in procs:
        mem = "?" if p.used_memory_mib is None else f"{p.used_memory_mib} MiB"
        lines.append(f"  pid {p.pid:<8} {_s(p.user)[:10]:<10} {mem:>10}  {_s(p.command)}")
    return lines


def _node_details(node: NodeReport) -> list[str]:
    state = node.state or "unknown"
    name = f" ({node.hostname})" if node.hostname and node.hostname != node.host else ""
    lines = [f"{node.host}{name}: {state.replace('_', ' ')} — {STATES.get(state, 'unknown state')}"]
    if node.reason:
        lines.append(f"reason: {node.reason}")
    if node.hint:
        lines.append(f"hint: {node.hint}")
    facts = [f"driver {node.driver_version}" if node.driver_version else "",
             f"CUDA {node.cuda_version}" if node.cuda_version else "",
             f"{node.cpus} CPU cores" if node.cpus else ""]
    if any(facts):
        lines.append("  ".join(f for f in facts if f))
    ifaces = [f"{i.name} {i.ipv4[0]}" for i in node.interfaces or () if i.up and i.ipv4 and not i.loopback]
    if ifaces:
        lines.append("interfaces: " + ", ".join(ifaces))
    lines += [f"warning: {w}" for w in node.warnings or ()]
    return lines


def _s(value: object) -> str:
    return "?" if value is None else str(value)


def _pct(value: object) -> str:
    return "-" if value is None else f"{value}%"


def _watts(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f}"


@dataclass
class JobChoice:
    """What a selection means for the job form: launcher, nodes, GPU ids, and notes on what was assumed."""

    launcher: str
    nodes: list[str]
    gpus: str
    notes: list[str] = field(default_factory=list)


def job_choice(selection: Selection, nodes: list[NodeReport], local_names: Sequence[str]) -> JobChoice | None:
    """The job form's launcher / nodes / gpus for a selection; None when nothing is selected."""
    order = [n.host for n in nodes]
    hosts = selection.hosts(order)
    if not hosts:
        return None
    notes: list[str] = []
    gpu_hosts = [h for h in hosts if selection.ids(h)]
    cpu_hosts = [h for h in hosts if not selection.ids(h)]
    if gpu_hosts and cpu_hosts:
        notes.append(f"{', '.join(cpu_hosts)} {'has' if len(cpu_hosts) == 1 else 'have'} no GPU selected: "
                     "a job uses GPUs on every node or on none; leaving them out")
        hosts = gpu_hosts
    ids = selection.ids(hosts[0]) if gpu_hosts else []
    if any(selection.ids(h) != ids for h in hosts[1:]):
        notes.append(f"the nodes have different GPUs selected; a job uses the same ids on every node: "
                     f"using {','.join(map(str, ids))}")
    gpus = f"[{','.join(map(str, ids))}]" if ids else "none"
    if len(hosts) == 1 and hosts[0] in local_names:
        return JobChoice("local", [], gpus, notes)
    return JobChoice("ssh", hosts, gpus, notes)
