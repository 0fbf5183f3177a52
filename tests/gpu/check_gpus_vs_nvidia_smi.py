"""On a GPU machine: does `cockpit gpus --json` agree with nvidia-smi? Exit 0 if so, 1 with the differences.

    python tests/gpu/check_gpus_vs_nvidia_smi.py

Reads nvidia-smi --query-gpu=index,pci.bus_id,uuid,name,memory.used,memory.total,utilization.gpu,temperature.gpu
--format=csv with its own small parser (not cockpit's), then compares GPU by GPU in nvidia-smi's index order:
identity fields exactly, memory.total exactly, and the live readings (used memory, utilization, temperature)
within a tolerance, since the two reads are a moment apart. Not collected by pytest.
"""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIELDS = ["index", "pci.bus_id", "uuid", "name", "memory.used", "memory.total", "utilization.gpu", "temperature.gpu"]
HARNESS = """
import argparse, sys
from cockpit.cli.fleet import add_fleet_commands
parser = argparse.ArgumentParser(prog="cockpit")
add_fleet_commands(parser.add_subparsers(dest="command"))
args = parser.parse_args(sys.argv[1:])
sys.exit(args.func(args))
"""


def nvidia_smi() -> list[dict[str, str]]:
    out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(FIELDS)}", "--format=csv"], capture_output=True,
                         text=True, check=True).stdout
    rows = list(csv.reader(io.StringIO(out), skipinitialspace=True))
    header = [h.split(" [")[0] for h in rows[0]]
    return [{h: re.sub(r" (MiB|%)$", "", v.strip()) for h, v in zip(header, row, strict=True)} for row in rows[1:]]


def cockpit() -> list[dict]:
    argv = [sys.executable, "-m", "cockpit", "gpus", "--json"]
    r = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
    if r.returncode != 0:  # `gpus` not wired into cockpit.cli.main yet: call cockpit.cli.fleet directly
        r = subprocess.run([sys.executable, "-c", HARNESS, "gpus", "--json"], capture_output=True, text=True,
                           cwd=REPO, check=True)
    (node,) = json.loads(r.stdout)["nodes"]
    if node["state"] != "ok":
        sys.exit(f"cockpit says {node['state']}: {node['reason']}")
    return node["gpus"]


def bus(text: str) -> str:
    domain, rest = text.upper().split(":", 1)
    return f"{domain.zfill(8)}:{rest}"


def near(a: str, b, tolerance: float) -> bool:
    try:
        return abs(float(a) - float(b)) <= tolerance
    except (TypeError, ValueError):
        return a in ("[N/A]", "N/A") and b is None


def compare(smi: list[dict], ours: list[dict]) -> list[str]:
    problems = [] if len(smi) == len(ours) else [f"nvidia-smi lists {len(smi)} GPUs, cockpit {len(ours)}"]
    for s, c in zip(smi, ours, strict=False):
        i = s["index"]
        checks = [("index", s["index"] == str(c["index"])), ("pci.bus_id", bus(s["pci.bus_id"]) == c["pci_bus_id"]),
                  ("uuid", s["uuid"] == c["uuid"]), ("name", s["name"] == c["name"]),
                  ("memory.total", s["memory.total"] == str(c["memory_total_mib"])),
                  ("memory.used", near(s["memory.used"], c["memory_used_mib"], max(256, 0.02 * c["memory_total_mib"]))),
                  ("utilization.gpu", near(s["utilization.gpu"], c["utilization_gpu"], 25)),
                  ("temperature.gpu", near(s["temperature.gpu"], c["temperature_c"], 3))]
        problems += [f"GPU {i} {name}: nvidia-smi {s[name]!r}, cockpit {c}" for name, ok in checks if not ok]
    return problems


def main() -> int:
    smi, ours = nvidia_smi(), cockpit()
    for s in smi:
        print("nvidia-smi:", ", ".join(f"{k}={v}" for k, v in s.items()))
    for c in ours:
        print("cockpit:   ", ", ".join(f"{k}={c[k]}" for k in ("index", "pci_bus_id", "uuid", "name", "memory_used_mib",
                                                             "memory_total_mib", "utilization_gpu", "temperature_c")))
    problems = compare(smi, ours)
    for p in problems:
        print("MISMATCH", p)
    print("agree" if not problems else f"{len(problems)} mismatch(es)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
