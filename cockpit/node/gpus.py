"""How a node reads its GPUs: NVML through cockpit.nvml, kept open across a probe's --watch intervals; where
pynvml is missing, nvidia-smi's CSV (the same GpuReport either way). The parsers are pure, tested on real
nvidia-smi output; the probe's fallback for nodes without cockpit (plain sh) uses them too.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import time
from dataclasses import replace

from cockpit import gpu, nvml

SMI_GPU_FIELDS = ("index", "pci.bus_id", "uuid", "name", "memory.used", "memory.total", "utilization.gpu",
                  "utilization.memory", "temperature.gpu", "power.draw", "power.limit", "driver_version")
SMI_APP_FIELDS = ("gpu_bus_id", "pid", "used_gpu_memory", "process_name")
_NA = {"", "n/a", "[n/a]", "not supported", "[not supported]", "[unknown error]", "unknown error",
       "[insufficient permissions]", "[requested functionality has been deprecated]"}
_NO_DRIVER_TEXT = ("couldn't communicate with the nvidia driver", "not found", "no devices were found")


def smi_command(kind: str) -> list[str]:
    fields, query = (SMI_GPU_FIELDS, "gpu") if kind == "gpu" else (SMI_APP_FIELDS, "compute-apps")
    return ["nvidia-smi", f"--query-{query}={','.join(fields)}", "--format=csv,noheader,nounits"]


def parse_smi_csv(text: str, fields: tuple[str, ...]) -> list[dict[str, str | None]]:
    """nvidia-smi --query-* CSV -> one dict per row, keyed by ``fields``; "[N/A]" and friends -> None.

    Takes the form cockpit asks for (noheader,nounits, columns in ``fields`` order) and the plain ``csv``
    form with a header and units ("memory.used [MiB]", "19818 MiB"): with a header, columns are found by
    name, so any superset of the fields works.
    """
    rows = [r for r in csv.reader(io.StringIO(text), skipinitialspace=True) if r and any(c.strip() for c in r)]
    positions: list[int | None] = list(range(len(fields)))
    if rows and rows[0] and rows[0][0].strip().split(" [")[0] in (*fields, "timestamp"):
        header = [h.strip().split(" [")[0] for h in rows.pop(0)]
        positions = [header.index(f) if f in header else None for f in fields]
    out = []
    for row in rows:
        cells = [c.strip() for c in row]
        out.append({f: _cell(cells[p]) if p is not None and p < len(cells) else None
                    for f, p in zip(fields, positions, strict=True)})
    return out


def _cell(value: str) -> str | None:
    if value.lower() in _NA:
        return None
    m = re.fullmatch(r"(-?\d+(?:\.\d+)?) ?(?:MiB|%|W|MHz|C)", value)
    return m.group(1) if m else value


def _num(value: str | None, kind=int):
    if value is None:  # not reported
        return None
    try:
        return kind(float(value)) if kind is int else kind(value)
    except (TypeError, ValueError):
        return None


def report_from_smi(status: int | None, gpu_text: str, app_text: str = "") -> gpu.GpuReport:
    """The GpuReport for nvidia-smi's answer: ``status`` its exit status (127: not installed)."""
    if status != 0:
        lines = (gpu_text.strip().splitlines() or [f"nvidia-smi exited {status}"])
        first = lines[0].strip()
        if status == 127 or any(t in first.lower() for t in _NO_DRIVER_TEXT) or status == 9:
            return gpu.GpuReport("no_driver", f"no NVIDIA driver on this node ({first})", "nvidia-smi")
        return gpu.GpuReport("driver_error", f"nvidia-smi failed: {first}", "nvidia-smi")
    apps: dict[tuple, list[gpu.GpuProcess]] = {}
    for a in parse_smi_csv(app_text, SMI_APP_FIELDS):
        if _num(a["pid"]) is not None:
            proc = gpu.GpuProcess(_num(a["pid"]), _num(a["used_gpu_memory"]), None, a["process_name"])
            apps.setdefault(gpu.bus_key(gpu.normal_bus_id(a["gpu_bus_id"])), []).append(proc)
    gpus, driver = [], None
    for row in parse_smi_csv(gpu_text, SMI_GPU_FIELDS):
        bus = gpu.normal_bus_id(row["pci.bus_id"])
        driver = driver or row["driver_version"]
        gpus.append(gpu.Gpu(
            index=_num(row["index"]) or 0, uuid=row["uuid"], name=row["name"], pci_bus_id=bus,
            memory_used_mib=_num(row["memory.used"]), memory_total_mib=_num(row["memory.total"]),
            utilization_gpu=_num(row["utilization.gpu"]), utilization_memory=_num(row["utilization.memory"]),
            temperature_c=_num(row["temperature.gpu"]), power_draw_w=_num(row["power.draw"], float),
            power_limit_w=_num(row["power.limit"], float), processes=tuple(apps.get(gpu.bus_key(bus), ()))))
    gpus = gpu.sort_by_bus_id(gpus)
    return gpu.GpuReport("ok", None if gpus else "nvidia-smi lists no GPU", "nvidia-smi", driver_version=driver,
                          gpus=tuple(gpus))


def read_smi() -> gpu.GpuReport:
    """Ask nvidia-smi on this machine (the probe's fallback when pynvml is not installed)."""
    try:
        g = subprocess.run(smi_command("gpu"), capture_output=True, text=True, timeout=30)
        a = subprocess.run(smi_command("apps"), capture_output=True, text=True, timeout=30) if not g.returncode \
            else None
    except FileNotFoundError:
        return gpu.GpuReport("no_driver", "no NVIDIA driver on this node (neither pynvml nor nvidia-smi)")
    except subprocess.TimeoutExpired:
        return gpu.GpuReport("driver_error", "nvidia-smi did not answer within 30 s", "nvidia-smi")
    return _with_process_info(report_from_smi(g.returncode, g.stdout + g.stderr, a.stdout if a else ""))


def _with_process_info(report: gpu.GpuReport) -> gpu.GpuReport:
    """Fill in user and full command line from /proc (nvidia-smi gives only the executable)."""
    def enrich(p: gpu.GpuProcess) -> gpu.GpuProcess:
        user, command = nvml.process_info(p.pid)
        return replace(p, user=user, command=command or p.command)
    return replace(report, gpus=tuple(replace(g, processes=tuple(map(enrich, g.processes))) for g in report.gpus))


class GpuReader:
    """Keeps NVML open across --watch intervals; retries a missing driver only every ``retry`` seconds."""

    def __init__(self, retry: float = 30.0):
        self.retry = retry
        self._source: nvml.Source | None = None
        self._failed: tuple[float, gpu.GpuReport] | None = None
        self._use_smi = False

    def read(self) -> gpu.GpuReport:
        if self._use_smi:
            return read_smi()
        if self._source is None:
            if self._failed and time.monotonic() - self._failed[0] < self.retry:
                return self._failed[1]
            try:
                self._source = nvml.LiveSource().open()
            except nvml.NvmlError as exc:
                if exc.code == nvml.PYNVML_MISSING and shutil.which("nvidia-smi"):
                    self._use_smi = True
                    return read_smi()
                self._failed = (time.monotonic(), nvml.not_available(exc))
                return self._failed[1]
        return nvml.read_open(self._source, os.environ)

    def close(self) -> None:
        if self._source is not None:
            self._source.close()
            self._source = None
