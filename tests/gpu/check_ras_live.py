"""Ask a real NCCL's RAS service with cockpit's own client (cockpit.node.rasask), as the stacks gather does,
on a machine with an NVIDIA GPU (not collected by pytest).

    python3 tests/gpu/check_ras_live.py [OUTDIR]

One rank (world size 1) creates an NCCL communicator with NCCL's defaults (RAS on since 2.24, listening on
localhost:28028), runs an all_reduce and waits; cockpit's client asks it at the default address and the
answer is read by cockpit.hang.rasread. Exit 0 when the answer is a report with NCCL's version. Bounded: 90 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cockpit.hang.rasread import node_ras  # noqa: E402
from cockpit.hang.raswords import ras_row  # noqa: E402
from cockpit.node.rasask import RAS_DEFAULT_ADDR, ras_ask  # noqa: E402

RANK = """
import time, torch, torch.distributed as dist
dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29534", rank=0, world_size=1)
t = torch.ones(1024, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
print("ready", ".".join(map(str, torch.cuda.nccl.version())), flush=True)
time.sleep(80)
"""


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    rank = subprocess.Popen([sys.executable, "-c", RANK], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline, line = time.monotonic() + 60, ""
        while time.monotonic() < deadline and not line.startswith("ready"):
            line = rank.stdout.readline() or "ready?"  # EOF: the rank died
        if line != "ready?" and line.startswith("ready"):
            print(line.strip())
        else:
            print("the NCCL rank did not start")
            return 1
        time.sleep(2)  # RAS registers the communicator from its own thread
        record = ras_ask(RAS_DEFAULT_ADDR)
        ras = node_ras(record, "this-node")
        print(json.dumps({k: v for k, v in record.items() if k != "text"}))
        print(ras_row("this-node", ras) if ras else "no record")
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            (out / "ras-live-default-addr.json").write_text(json.dumps(record, indent=1))
        return 0 if ras and ras.report is not None and ras.report.version else 1
    finally:
        rank.kill()
        rank.wait()


if __name__ == "__main__":
    sys.exit(main())
