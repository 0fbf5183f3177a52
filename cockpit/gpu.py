"""A node's GPUs as typed records, named as nvidia-smi names their fields; None where a GPU does not say.
Pure data: cockpit.nvml fills them from NVML on a node, cockpit.fleet.report carries them across the fleet."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


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
    """What a node's GPUs look like. state: "ok" | "no_driver" | "driver_error"."""

    state: str
    reason: str | None = None
    source: str | None = None  # "nvml" | "nvidia-smi"; None when nothing could be read
    driver_version: str | None = None
    cuda_version: str | None = None  # the newest CUDA the driver supports, e.g. "12.2"
    nvml_version: str | None = None
    gpus: tuple[Gpu, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return asdict(self)
