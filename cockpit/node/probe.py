"""What runs ON a node: `python -m cockpit.node.probe [--watch SECONDS] [--port N ...]` prints one JSON object
(one line) describing the node: GPUs (cockpit.node.gpus), network interfaces with addresses (cockpit.node.ifaces,
for NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME), hostname, python / torch / NCCL versions, and whether TCP ports are free.

Stdlib + pynvml only: a node may have nothing else. torch is never imported (seconds, and GPU memory); its
version is read from torch/version.py, found on sys.path with importlib.machinery.PathFinder. ``--watch``
keeps running and prints one line per interval over the same channel, so a refresh costs no new SSH round trip;
a line on stdin asks for a report right now (the fleet's "refresh"). Where cockpit itself is missing on a node,
the fleet runs ``fallback_script`` (nvidia-smi in plain sh) and parses it with ``parse_fallback``.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.metadata
import json
import os
import re
import select
import socket
import sys
import time
from pathlib import Path

from cockpit.node.gpus import GpuReader, report_from_smi, smi_command
from cockpit.node.ifaces import interfaces

PROBE_VERSION = 1
DEFAULT_PORTS = (29500,)  # torch.distributed's default MASTER_PORT


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


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


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
        self._interfaces: tuple[float, list[dict] | None] | None = None  # (when read, what was read)
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
