"""What runs ON a node: `python -m cockpit.node.probe [--watch SECONDS] [--port N ...]` prints one JSON object
(one line) describing the node: GPUs (cockpit.nvml), network interfaces with addresses (for NCCL_SOCKET_IFNAME
/ GLOO_SOCKET_IFNAME), hostname, python / torch / NCCL versions, and whether TCP ports are free.

Stdlib + pynvml only: a node may have nothing else. torch is never imported (seconds, and GPU memory); its
version is read from torch/version.py, found on sys.path with importlib.machinery.PathFinder. ``--watch``
keeps running and prints one line per interval over the same channel, so a refresh costs no new SSH round trip;
a line on stdin asks for a report right now (the fleet's "refresh"). Where pynvml is missing, nvidia-smi's CSV is
parsed instead; where cockpit itself is missing on a node, the fleet runs ``fallback_script`` (nvidia-smi
in plain sh) and parses it with ``parse_fallback``.
"""

from __future__ import annotations

import argparse
import csv
import importlib.machinery
import importlib.metadata
import io
import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from cockpit import nvml

PROBE_VERSION = 1
DEFAULT_PORTS = (29500,)  # torch.distributed's default MASTER_PORT
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
    positions = list(range(len(fields)))
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
    try:
        return kind(float(value)) if kind is int else kind(value)
    except (TypeError, ValueError):
        return None


def report_from_smi(status: int | None, gpu_text: str, app_text: str = "") -> nvml.GpuReport:
    """The GpuReport for nvidia-smi's answer: ``status`` its exit status (127: not installed)."""
    if status != 0:
        lines = (gpu_text.strip().splitlines() or [f"nvidia-smi exited {status}"])
        first = lines[0].strip()
        if status == 127 or any(t in first.lower() for t in _NO_DRIVER_TEXT) or status == 9:
            return nvml.GpuReport("no_driver", f"no NVIDIA driver on this node ({first})", "nvidia-smi")
        return nvml.GpuReport("driver_error", f"nvidia-smi failed: {first}", "nvidia-smi")
    apps: dict[tuple, list[nvml.GpuProcess]] = {}
    for a in parse_smi_csv(app_text, SMI_APP_FIELDS):
        if _num(a["pid"]) is not None:
            proc = nvml.GpuProcess(_num(a["pid"]), _num(a["used_gpu_memory"]), None, a["process_name"])
            apps.setdefault(nvml.bus_key(nvml.normal_bus_id(a["gpu_bus_id"])), []).append(proc)
    gpus, driver = [], None
    for row in parse_smi_csv(gpu_text, SMI_GPU_FIELDS):
        bus = nvml.normal_bus_id(row["pci.bus_id"])
        driver = driver or row["driver_version"]
        gpus.append(nvml.Gpu(
            index=_num(row["index"]) or 0, uuid=row["uuid"], name=row["name"], pci_bus_id=bus,
            memory_used_mib=_num(row["memory.used"]), memory_total_mib=_num(row["memory.total"]),
            utilization_gpu=_num(row["utilization.gpu"]), utilization_memory=_num(row["utilization.memory"]),
            temperature_c=_num(row["temperature.gpu"]), power_draw_w=_num(row["power.draw"], float),
            power_limit_w=_num(row["power.limit"], float), processes=tuple(apps.get(nvml.bus_key(bus), ()))))
    gpus = nvml.sort_by_bus_id(gpus)
    return nvml.GpuReport("ok", None if gpus else "nvidia-smi lists no GPU", "nvidia-smi", driver_version=driver,
                          gpus=tuple(gpus))


def read_smi() -> nvml.GpuReport:
    """Ask nvidia-smi on this machine (the probe's fallback when pynvml is not installed)."""
    try:
        g = subprocess.run(smi_command("gpu"), capture_output=True, text=True, timeout=30)
        a = subprocess.run(smi_command("apps"), capture_output=True, text=True, timeout=30) if not g.returncode \
            else None
    except FileNotFoundError:
        return nvml.GpuReport("no_driver", "no NVIDIA driver on this node (neither pynvml nor nvidia-smi)")
    except subprocess.TimeoutExpired:
        return nvml.GpuReport("driver_error", "nvidia-smi did not answer within 30 s", "nvidia-smi")
    return _with_process_info(report_from_smi(g.returncode, g.stdout + g.stderr, a.stdout if a else ""))


def _with_process_info(report: nvml.GpuReport) -> nvml.GpuReport:
    """Fill in user and full command line from /proc (nvidia-smi gives only the executable)."""
    def enrich(p: nvml.GpuProcess) -> nvml.GpuProcess:
        user, command = nvml.process_info(p.pid)
        return replace(p, user=user, command=command or p.command)
    return replace(report, gpus=tuple(replace(g, processes=tuple(map(enrich, g.processes))) for g in report.gpus))


def fallback_script(watch: float | None = None) -> str:
    """Plain sh for a node without cockpit: hostname + nvidia-smi CSV, sections marked by @@ lines."""
    once = (f"hostname; echo @@gpus; {' '.join(smi_command('gpu'))} 2>&1; echo \"@@rc $?\"; "
            f"{' '.join(smi_command('apps'))} 2>/dev/null; echo @@end")
    return once if watch is None else f"while :; do {once}; sleep {watch:g}; done"


def parse_fallback(text: str) -> dict:
    """``fallback_script`` output (one block) -> a probe report (no interfaces or versions: unknown)."""
    head, _, rest = text.partition("@@gpus\n")
    gpu_text, _, rest = rest.partition("@@rc ")
    status_text, _, app_text = rest.partition("\n")
    status = int(status_text) if status_text.strip().isdigit() else None
    report = report_from_smi(status, gpu_text, app_text.replace("@@end", ""))
    return {"probe": PROBE_VERSION, "hostname": head.strip() or None, "time": time.time(), **report.to_dict(),
            "interfaces": None, "versions": None, "ports": None}


class GpuReader:
    """Keeps NVML open across --watch intervals; retries a missing driver only every ``retry`` seconds."""

    def __init__(self, retry: float = 30.0):
        self.retry = retry
        self._source: nvml.Source | None = None
        self._failed: tuple[float, nvml.GpuReport] | None = None
        self._use_smi = False

    def read(self) -> nvml.GpuReport:
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


def interfaces() -> list[dict]:
    """Network interfaces: name, up, mtu, mac, speed, IPv4/IPv6 addresses with prefix (from `ip -j addr`;
    without iproute2, sysfs + the primary IPv4 address by ioctl), and whether each is virtual (sysfs)."""
    try:
        out = subprocess.run(["ip", "-j", "addr"], capture_output=True, text=True, timeout=5)
        data = json.loads(out.stdout) if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError):
        data = None
    if data is None:
        return _sysfs_interfaces()
    return [{"name": d.get("ifname"), "up": "UP" in d.get("flags", ()) and d.get("operstate") != "DOWN",
             "loopback": "LOOPBACK" in d.get("flags", ()), "mtu": d.get("mtu"), "mac": d.get("address"),
             "speed_mbps": _speed(d.get("ifname")),
             "ipv4": [f"{a['local']}/{a['prefixlen']}" for a in d.get("addr_info", ()) if a.get("family") == "inet"],
             "ipv6": [f"{a['local']}/{a['prefixlen']}" for a in d.get("addr_info", ()) if a.get("family") == "inet6"],
             "virtual": is_virtual(d.get("ifname"))}
            for d in data]


def _sysfs_interfaces() -> list[dict]:
    import fcntl
    import struct

    out = []
    for _, name in socket.if_nameindex():
        base = Path("/sys/class/net") / name
        flags = int(_read(base / "flags") or "0", 16)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
            ipv4 = [socket.inet_ntoa(packed[20:24])]
        except OSError:
            ipv4 = []
        out.append({"name": name, "up": bool(flags & 1), "loopback": bool(flags & 8),
                    "mtu": _num(_read(base / "mtu")), "mac": _read(base / "address"), "speed_mbps": _speed(name),
                    "ipv4": ipv4, "ipv6": [], "virtual": is_virtual(name)})
    return out


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def is_virtual(name: str | None, sys_net: Path = Path("/sys/class/net")) -> bool | None:
    """Whether ``name`` is a software interface (bridge, veth, tunnel, loopback): a NIC has a ``device`` link
    under /sys/class/net/NAME. None where sysfs does not list it (not Linux, another namespace's sysfs)."""
    base = sys_net / str(name)
    if not name or not base.exists():
        return None
    return not (base / "device").exists()


def _speed(name: str | None) -> int | None:
    speed = _num(_read(Path("/sys/class/net") / str(name) / "speed"))
    return speed if speed and speed > 0 else None


def versions() -> dict:
    """python, torch (+ its CUDA build) and NCCL (the nvidia-nccl wheel) versions, without importing torch."""
    out = {"python": ".".join(map(str, sys.version_info[:3])), "torch": None, "torch_cuda": None, "nccl": None}
    spec = importlib.machinery.PathFinder.find_spec("torch")  # sys.path only: an imported torch does not count
    text = _read(Path(spec.origin).parent / "version.py") if spec and spec.origin else None
    for key, name in (("torch", "__version__"), ("torch_cuda", "cuda")):
        m = re.search(rf"^{name}(?:\s*:[^=]*)?\s*=\s*['\"]([^'\"]+)['\"]", text or "", re.M)
        out[key] = m.group(1) if m else None
    for wheel in ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11"):
        try:
            out["nccl"] = importlib.metadata.version(wheel)
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def port_free(port: int) -> bool:
    """Whether a TCP listener could bind ``port`` on all addresses now (as torch's TCPStore would)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


class Probe:
    """One node's report, cheap to repeat: versions once, interfaces every ``slow`` seconds, GPUs each time."""

    SLOW = ("interfaces", "versions")

    def __init__(self, ports: tuple[int, ...] = DEFAULT_PORTS, slow: float = 30.0):
        self.ports, self.slow = ports, slow
        self.gpus = GpuReader(retry=slow)
        self._versions = versions()
        self._interfaces: tuple[float, list[dict]] | None = None
        self._sent: dict = {}

    def report(self, full: bool = True) -> dict:
        """The report; with ``full=False`` (--watch after the first line) the slow fields are left out
        while they are the same as last sent, which keeps a 1 Hz stream small: readers merge lines."""
        now = time.monotonic()
        if self._interfaces is None or now - self._interfaces[0] > self.slow:
            self._interfaces = (now, interfaces())
        rep = {"probe": PROBE_VERSION, "hostname": socket.gethostname(), "time": time.time(),
               **self.gpus.read().to_dict(), "interfaces": self._interfaces[1], "versions": self._versions,
               "ports": {str(p): port_free(p) for p in self.ports}}
        for key in self.SLOW:
            if not full and self._sent.get(key) == rep[key]:
                del rep[key]
            else:
                self._sent[key] = rep[key]
        return rep


def watch(probe: Probe, interval: float, out=sys.stdout, stdin=sys.stdin) -> int:
    """A report every ``interval`` seconds, and one at once for each line on stdin, until stdin reaches EOF
    or stdout closes: either means the reader (the fleet's SSH channel) has gone, and a probe left behind on
    a node must not wait for its next write (possibly an hour away) to notice. The first line is complete;
    later ones leave out interfaces/versions while unchanged."""
    due, full = time.monotonic(), True
    while True:
        if time.monotonic() >= due:
            due += interval
            if not _emit(probe, out, full):
                return 0
            full = False
        ready, _, _ = select.select([stdin], [], [], max(0.0, due - time.monotonic()))
        if ready:
            if not os.read(stdin.fileno(), 4096):
                return 0
            if not _emit(probe, out, False):
                return 0


def _emit(probe: Probe, out, full: bool = True) -> bool:
    try:
        out.write(json.dumps(probe.report(full), separators=(",", ":")) + "\n")
        out.flush()
    except BrokenPipeError:
        return False  # the reader (SSH channel, the fleet) went away
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cockpit.node.probe", description=__doc__.split("\n\n")[0])
    parser.add_argument("--watch", type=float, metavar="SECONDS", help="one line per interval until killed")
    parser.add_argument("--port", type=int, action="append", help=f"TCP port to check (default {DEFAULT_PORTS})")
    args = parser.parse_args(argv)
    probe = Probe(tuple(args.port or DEFAULT_PORTS))
    try:
        if args.watch is None:
            return 0 if _emit(probe, sys.stdout) else 1
        if args.watch <= 0:
            parser.error("--watch needs a positive interval")
        return watch(probe, args.watch)
    except KeyboardInterrupt:
        return 130
    finally:
        probe.gpus.close()


if __name__ == "__main__":
    sys.exit(main())
