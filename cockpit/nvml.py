"""This machine's NVIDIA GPUs, read through NVML. The only module that imports pynvml (stdlib + pynvml only,
because the node probe runs it on nodes where nothing else of cockpit's dependencies may be installed).

Every NVML call goes through one small seam, ``Source.call(fn, *args)``: ``LiveSource`` calls pynvml;
cockpit.nvml_replay's ``RecordedSource`` replays a fixture of the values real pynvml returned
(tests/fixtures/nvml/), and its ``Recorder`` wraps a live source to write such a fixture. Arguments are plain
ints: for ``nvmlDevice*`` functions the first one is the NVML device index, turned into a handle by the live
source, so a recording is plain JSON.

Rules: a field a GPU does not support is None, never an exception; no driver (or no pynvml) is a normal
state, ``no_driver``; GPUs are listed sorted by PCI bus id, so ``index`` is nvidia-smi's index.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any, cast

from cockpit.gpu import Gpu, GpuProcess, GpuReport, normal_bus_id, sort_by_bus_id  # the records it fills

NOT_SUPPORTED, NO_PERMISSION, DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND, FUNCTION_NOT_FOUND = 3, 4, 9, 12, 13
PYNVML_MISSING = -2  # LiveSource.open: pynvml (nvidia-ml-py) is not installed here
_NO_DRIVER_CODES = (DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND, PYNVML_MISSING)
MIB = 1024 * 1024
ORDER_HINT = ("CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA numbers GPUs fastest-first, so cuda:N may not be "
              "nvidia-smi's GPU N; export CUDA_DEVICE_ORDER=PCI_BUS_ID")


class NvmlError(Exception):
    """An NVML call failed; ``code`` is NVML's return code (nvml.h NVML_ERROR_*)."""

    def __init__(self, code: int, message: str = ""):
        self.code = code
        super().__init__(message or f"NVML error {code}")


class Source:
    """The seam: ``call`` returns plain values (str, int, float, dict, list) or raises NvmlError."""

    def open(self) -> Source:
        """nvmlInit; raises NvmlError (no driver: LIBRARY_NOT_FOUND / DRIVER_NOT_LOADED)."""
        return self

    def call(self, fn: str, *args: int) -> object:
        raise NotImplementedError

    def process(self, pid: int) -> tuple[str | None, str | None]:
        """(user, command line) of a process on this node; None where unknown."""
        return None, None

    def close(self) -> None:
        """Release NVML (nvmlShutdown); reading again needs a new source."""


# nvmlDevice* functions that take no device handle: every other one gets the handle of its first argument (an index)
NO_HANDLE = frozenset({"nvmlDeviceGetCount"})


class LiveSource(Source):
    """pynvml on this machine. ``open`` raises NvmlError (PYNVML_MISSING without pynvml, else NVML's code)."""

    def __init__(self):
        self._nv: Any = None  # the pynvml module once open (untyped)
        self._handles: dict[int, object] = {}

    def open(self) -> LiveSource:
        try:
            import pynvml
        except ImportError:
            raise NvmlError(PYNVML_MISSING, "pynvml (nvidia-ml-py) is not installed") from None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise NvmlError(exc.value, str(exc)) from None
        self._nv = pynvml
        return self

    def call(self, fn: str, *args: int) -> object:
        nv = self._nv
        if fn.startswith("nvmlDevice") and fn not in NO_HANDLE:
            handle = self._handle(args[0])
            rest = args[1:]
            if fn == "nvmlDeviceGetMemoryInfo_v2":
                return self._guard(lambda: nv.nvmlDeviceGetMemoryInfo(handle, version=nv.nvmlMemory_v2))
            return self._guard(lambda: getattr(nv, fn)(handle, *rest))
        return self._guard(lambda: getattr(nv, fn)(*args))

    def _handle(self, index: int):
        if index not in self._handles:
            self._handles[index] = self._guard(lambda: self._nv.nvmlDeviceGetHandleByIndex(index), plain=False)
        return self._handles[index]

    def _guard(self, thunk, plain: bool = True):
        try:
            value = thunk()
        except self._nv.NVMLError as exc:
            raise NvmlError(exc.value, str(exc)) from None
        except AttributeError as exc:  # an older pynvml without this function
            raise NvmlError(FUNCTION_NOT_FOUND, str(exc)) from None
        return _plain(value) if plain else value

    def process(self, pid: int) -> tuple[str | None, str | None]:
        return process_info(pid)

    def close(self) -> None:
        nv, self._nv, self._handles = self._nv, None, {}
        if nv is None:
            return
        try:
            nv.nvmlShutdown()
        except nv.NVMLError as exc:  # a broken NVML has nothing left to release; say so, do not fail
            print(f"cockpit: nvmlShutdown failed: {exc}", file=sys.stderr)


def _plain(value: object) -> object:
    """pynvml results -> JSON-able values: ctypes structs and friendly objects become dicts."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    fields = getattr(value, "_fields_", None)
    if fields is not None:
        return {name: _plain(getattr(value, name)) for name, *_ in fields}
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return {k: _plain(v) for k, v in vars(value).items() if not k.startswith("_")}
    return value


def process_info(pid: int) -> tuple[str | None, str | None]:
    """(user, command line) from /proc; None for what cannot be read (another container, gone)."""
    import pwd

    user = command = None
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as f:
            uid = next((int(line.split()[1]) for line in f if line.startswith("Uid:")), None)
        user = pwd.getpwuid(uid).pw_name if uid is not None else None
    except (OSError, KeyError, ValueError):
        user = None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ").decode(errors="replace").strip() or None
    except OSError:
        command = None
    return user, command


def read(source: Source | None = None, env: Mapping[str, str] | None = None) -> GpuReport:
    """Open ``source`` (default: pynvml here), read every GPU, close it. Never raises for NVML trouble."""
    source = LiveSource() if source is None else source
    try:
        source.open()
    except NvmlError as exc:
        return not_available(exc)
    try:
        return read_open(source, os.environ if env is None else env)
    finally:
        source.close()


def not_available(exc: NvmlError) -> GpuReport:
    """The report for a failed nvmlInit: no driver is a normal state; anything else a driver error."""
    if exc.code in _NO_DRIVER_CODES:
        return GpuReport("no_driver", f"no NVIDIA driver on this node ({exc})")
    return GpuReport("driver_error", f"NVML could not start: {exc}")


def read_open(source: Source, env: Mapping[str, str]) -> GpuReport:
    """Read every GPU from an initialised source."""
    try:
        count = int(cast("int", source.call("nvmlDeviceGetCount")))
    except NvmlError as exc:
        return GpuReport("driver_error", f"NVML could not count GPUs: {exc}", source="nvml")
    gpus = sort_by_bus_id([_gpu(source, i) for i in range(count)])
    cuda = _value(source, "nvmlSystemGetCudaDriverVersion")
    warnings = (ORDER_HINT,) if len(gpus) > 1 and env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID" else ()
    return GpuReport(
        "ok", None if gpus else "the driver is loaded but sees no GPU", "nvml",
        driver_version=cast("str | None", _value(source, "nvmlSystemGetDriverVersion")),
        cuda_version=f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else None,
        nvml_version=cast("str | None", _value(source, "nvmlSystemGetNVMLVersion")), gpus=tuple(gpus),
        warnings=warnings)


def _value(source: Source, fn: str, *args: int) -> object:
    try:
        return source.call(fn, *args)
    except NvmlError:
        return None  # unsupported, no permission, GPU lost: the field is unknown


def _gpu(source: Source, i: int) -> Gpu:
    pci = _value(source, "nvmlDeviceGetPciInfo", i)
    util = _value(source, "nvmlDeviceGetUtilizationRates", i)
    util = util if isinstance(util, dict) else {}
    memory = _memory(source, i)
    power = _value(source, "nvmlDeviceGetPowerUsage", i)
    limit = _value(source, "nvmlDeviceGetPowerManagementLimit", i)
    return Gpu(
        index=i, uuid=cast("str | None", _value(source, "nvmlDeviceGetUUID", i)),
        name=cast("str | None", _value(source, "nvmlDeviceGetName", i)),
        pci_bus_id=normal_bus_id(pci.get("busId")) if isinstance(pci, dict) else None,
        memory_used_mib=_mib(memory.get("used")), memory_total_mib=_mib(memory.get("total")),
        utilization_gpu=util.get("gpu"), utilization_memory=util.get("memory"),
        temperature_c=cast("int | None", _value(source, "nvmlDeviceGetTemperature", i, 0)),  # 0: NVML_TEMPERATURE_GPU
        power_draw_w=power / 1000 if isinstance(power, (int, float)) else None,
        power_limit_w=limit / 1000 if isinstance(limit, (int, float)) else None,
        processes=_processes(source, i))


def _memory(source: Source, i: int) -> dict:
    """The v2 struct (used excludes reserved memory, as nvidia-smi shows it); v1 on drivers without it."""
    value = _value(source, "nvmlDeviceGetMemoryInfo_v2", i)
    if not isinstance(value, dict):
        value = _value(source, "nvmlDeviceGetMemoryInfo", i)
    return value if isinstance(value, dict) else {}


def _processes(source: Source, i: int) -> tuple[GpuProcess, ...]:
    procs = _value(source, "nvmlDeviceGetComputeRunningProcesses", i)
    out = []
    for p in procs if isinstance(procs, list) else ():
        user, command = source.process(int(p["pid"]))
        out.append(GpuProcess(int(p["pid"]), _mib(p.get("usedGpuMemory")), user, command))
    return tuple(out)


def _mib(value: object) -> int | None:
    return int(value) // MIB if isinstance(value, (int, float)) else None
