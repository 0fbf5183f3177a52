"""A node as cockpit last saw it: the one typed record that the checks (cockpit.preflight.checks), the launchers,
the CLI table and the TUI read. The probe's JSON (cockpit.node.probe) is parsed into it once, at the fleet's edge;
`cockpit gpus --json` writes it back with ``NodeReport.to_dict`` (the only place its dict shape is built), so
no consumer reads a node by key and a GPU stays an ``nvml.Gpu`` all the way.

Stdlib + cockpit.gpu only: pure data, no IO.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal, TypeGuard

from cockpit import gpu as nvml  # the GPU records (cockpit.nvml fills them)

# Every state a node can be in, with what it means (the faces show these words). The one list of them.
NodeState = Literal["ok", "connecting", "unreachable", "auth_failed", "host_key_unknown", "host_key_changed",
                    "timeout", "no_driver", "driver_error", "error"]
STATES: dict[NodeState, str] = {
    "ok": "probe answered; GPUs readable",
    "connecting": "no answer yet",
    "unreachable": "connection refused, no route, or the connection was lost",
    "auth_failed": "SSH authentication failed",
    "host_key_unknown": "the host key is not in known_hosts (refused)",
    "host_key_changed": "the host key differs from known_hosts (refused)",
    "timeout": "no answer within the timeout",
    "no_driver": "reachable, but no NVIDIA driver (or no GPU library) on the node",
    "driver_error": "the NVIDIA driver is there but failing (e.g. driver/library version mismatch)",
    "error": "the probe failed on the node",
}
REACHABLE = ("ok", "no_driver", "driver_error")


def is_node_state(word: str) -> TypeGuard[NodeState]:
    """A word of STATES (cockpit.remote.base's errors name theirs as plain strings)."""
    return word in STATES  # the node answered: its probe fields are live


@dataclass(frozen=True)
class Interface:
    """One network interface as the probe lists it (`ip -j addr`, else sysfs). ``ipv4``: "a.b.c.d/prefix".
    ``virtual``: no device behind it in /sys/class/net/X (a bridge, veth, tunnel, loopback: docker0, virbr0,
    tailscale0), False for a NIC; None where the node did not say (an older probe or agent)."""

    name: str | None
    up: bool = False
    loopback: bool = False
    mtu: int | None = None
    mac: str | None = None
    speed_mbps: int | None = None
    ipv4: tuple[str, ...] = ()
    ipv6: tuple[str, ...] = ()
    virtual: bool | None = None

    @classmethod
    def from_dict(cls, d: dict) -> Interface:
        return cls(d.get("name"), bool(d.get("up")), bool(d.get("loopback")), d.get("mtu"), d.get("mac"),
                   d.get("speed_mbps"), tuple(d.get("ipv4") or ()), tuple(d.get("ipv6") or ()), d.get("virtual"))

    def to_dict(self) -> dict:
        out = {"name": self.name, "up": self.up, "loopback": self.loopback, "mtu": self.mtu, "mac": self.mac,
               "speed_mbps": self.speed_mbps, "ipv4": list(self.ipv4), "ipv6": list(self.ipv6)}
        if self.virtual is not None:  # only where the node said: an older probe's JSON reads as it did
            out["virtual"] = self.virtual
        return out


@dataclass(frozen=True)
class Versions:
    """What the job's python on the node has; None where not installed (or not found)."""

    python: str | None = None
    torch: str | None = None
    torch_cuda: str | None = None  # the CUDA torch was built for
    nccl: str | None = None  # the nvidia-nccl wheel

    @classmethod
    def from_dict(cls, d: dict | None) -> Versions | None:
        """None for no answer (a node without cockpit: the nvidia-smi fallback)."""
        if not d:
            return None
        return cls(d.get("python"), d.get("torch"), d.get("torch_cuda"), d.get("nccl"))

    def to_dict(self) -> dict:
        return asdict(self)


def gpu_from_dict(d: dict) -> nvml.Gpu:
    """An ``nvml.Gpu`` back from its JSON (``asdict``) form, as the probe sends it."""
    procs = tuple(nvml.GpuProcess(p["pid"], p.get("used_memory_mib"), p.get("user"), p.get("command"))
                  for p in d.get("processes") or ())
    keys = ("uuid", "name", "pci_bus_id", "memory_used_mib", "memory_total_mib", "utilization_gpu",
            "utilization_memory", "temperature_c", "power_draw_w", "power_limit_w")
    return nvml.Gpu(d["index"], **{k: d.get(k) for k in keys}, processes=procs)


@dataclass(frozen=True)
class NodeReport:
    """One node: its state, and while it is reachable what its probe said. Probe fields of a node that is
    down are left empty (None, no GPUs), as `cockpit gpus --json` shows them.

    ``interfaces`` None: not reported (a node read with nvidia-smi); ``interfaces_from`` names who listed
    them when it was not the probe (the ssh launcher's node agent). ``cpus`` is known for this machine only
    and is not part of the JSON."""

    host: str
    state: NodeState
    reason: str | None = None
    hint: str | None = None
    updated: float | None = None  # time.time() of the last report
    gpus: tuple[nvml.Gpu, ...] = ()
    hostname: str | None = None
    source: str | None = None  # "nvml" | "nvidia-smi"
    driver_version: str | None = None
    cuda_version: str | None = None
    nvml_version: str | None = None
    warnings: tuple[str, ...] | None = None
    interfaces: tuple[Interface, ...] | None = None
    versions: Versions | None = None
    ports: tuple[tuple[str, bool], ...] | None = None  # (port, free to bind)
    interfaces_from: str | None = None
    cpus: int | None = field(default=None, compare=False)

    @property
    def reachable(self) -> bool:
        return self.state in REACHABLE

    @classmethod
    def from_probe(cls, host: str, state: NodeState, reason: str | None, hint: str | None, updated: float | None,
                   report: dict | None) -> NodeReport:
        """The record for a node whose last probe answer (merged JSON lines) is ``report``."""
        live = report if state in REACHABLE and report else {}
        ifaces = live.get("interfaces")
        ports = live.get("ports")
        warnings = live.get("warnings")
        return cls(host, state, reason, hint, updated, tuple(gpu_from_dict(g) for g in live.get("gpus") or ()),
                   live.get("hostname"), live.get("source"), live.get("driver_version"), live.get("cuda_version"),
                   live.get("nvml_version"), None if warnings is None else tuple(warnings),
                   None if ifaces is None else tuple(Interface.from_dict(i) for i in ifaces),
                   Versions.from_dict(live.get("versions")),
                   None if ports is None else tuple((str(p), bool(f)) for p, f in ports.items()),
                   live.get("interfaces_from"), (report or {}).get("cpus"))

    @classmethod
    def from_dict(cls, d: dict) -> NodeReport:
        """Back from ``to_dict`` (recorded nodes, test data)."""
        return cls.from_probe(d["host"], d["state"], d.get("reason"), d.get("hint"), d.get("updated"), d)

    def to_dict(self) -> dict:
        """The JSON shape of `cockpit gpus --json` (kept byte for byte: scripts read it)."""
        out = {"host": self.host, "state": self.state, "reason": self.reason, "hint": self.hint,
               "updated": self.updated, "gpus": [asdict(g) for g in self.gpus], "hostname": self.hostname,
               "source": self.source, "driver_version": self.driver_version, "cuda_version": self.cuda_version,
               "nvml_version": self.nvml_version,
               "warnings": None if self.warnings is None else list(self.warnings),
               "interfaces": None if self.interfaces is None else [i.to_dict() for i in self.interfaces],
               "versions": None if self.versions is None else self.versions.to_dict(),
               "ports": None if self.ports is None else dict(self.ports)}
        if self.interfaces_from is not None:
            out["interfaces_from"] = self.interfaces_from
        return out
