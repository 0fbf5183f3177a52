"""A node's GPUs as typed records, named as nvidia-smi names their fields; None where a GPU does not say.
Pure data: cockpit.nvml fills them from NVML on a node (cockpit.node.gpus from nvidia-smi where pynvml is
missing), cockpit.fleet.records carries them across the fleet. Both readers list GPUs in nvidia-smi's order,
by PCI bus id (``sort_by_bus_id``), so a GPU's ``index`` means the same whichever read it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

GpuState = Literal["ok", "no_driver", "driver_error"]  # no driver is a normal state (a login node)


@dataclass(frozen=True)
class GpuProcess:
    """A compute process on a GPU. user/command come from /proc on the node; None where not readable."""

    pid: int
    used_memory_mib: int | None  # None: NVML cannot tell (MIG, Windows WDDM)
    user: str | None = None
    command: str | None = None


@dataclass(frozen=True)
class Gpu:
    """One GPU. ``index`` is its position in PCI bus id order = nvidia-smi's index. None: not supported."""

    index: int
    uuid: str | None
    name: str | None
    pci_bus_id: str | None  # "00000000:07:00.0", as nvidia-smi prints it
    memory_used_mib: int | None  # nvidia-smi memory.used: excludes driver-reserved memory (NVML v2 struct)
    memory_total_mib: int | None
    utilization_gpu: int | None  # percent; None under MIG
    utilization_memory: int | None
    temperature_c: int | None
    power_draw_w: float | None  # nvmlDeviceGetPowerUsage (1 s average on Ampere and newer, except GA100)
    power_limit_w: float | None  # nvmlDeviceGetPowerManagementLimit = nvidia-smi power.limit
    processes: tuple[GpuProcess, ...] = ()


@dataclass(frozen=True)
class GpuReport:
    """What a node's GPUs look like."""

    state: GpuState
    reason: str | None = None
    source: str | None = None  # "nvml" | "nvidia-smi"; None when nothing could be read
    driver_version: str | None = None
    cuda_version: str | None = None  # the newest CUDA the driver supports, e.g. "12.2"
    nvml_version: str | None = None
    gpus: tuple[Gpu, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sort_by_bus_id(gpus: list[Gpu]) -> list[Gpu]:
    """nvidia-smi's order: by PCI bus id (domain:bus:device.function, compared as numbers); unknown last."""
    def key(pair: tuple[int, Gpu]) -> tuple[bool, tuple[int, ...], int]:
        nvml_index, gpu = pair
        return (gpu.pci_bus_id is None, bus_key(gpu.pci_bus_id), nvml_index)
    ordered = sorted(enumerate(gpus), key=key)
    return [replace(gpu, index=i) for i, (_, gpu) in enumerate(ordered)]


def bus_key(bus_id: str | None) -> tuple[int, ...]:
    """"00000000:C1:00.0" -> (0, 0xC1, 0, 0); any spelling (lower case, 4-digit domain) compares equal."""
    if not bus_id:
        return ()
    try:
        domain, bus, rest = bus_id.split(":")
        device, function = rest.split(".")
        return int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)
    except ValueError:
        return ()


def normal_bus_id(bus_id: object) -> str | None:
    """NVML's busId ("00000000:07:00.0"; old drivers: "0000:07:00.0") in nvidia-smi's spelling."""
    if not isinstance(bus_id, str) or not bus_id:
        return None
    parts = bus_id.strip().upper().split(":")
    if len(parts) == 3:
        parts[0] = parts[0].zfill(8)
    return ":".join(parts)
