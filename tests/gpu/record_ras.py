"""Record NCCL's RAS report from a real NCCL job on this machine's GPU (not collected by pytest).

    python3 tests/gpu/record_ras.py OUTDIR

A rank (world size 1, the one GPU) creates an NCCL communicator, runs an all_reduce and waits; the RAS service
NCCL starts with it (NCCL >= 2.24, on by default) is then asked for its status the way `ncclras` asks (the
client protocol of NCCL's src/ras/client.cc: "CLIENT PROTOCOL n", optionally "SET FORMAT json", then
"[VERBOSE ]STATUS"), in text, verbose text and JSON. The answers land in OUTDIR as ras-<nccl>-<gpu>-*.{txt,json}
with a header line saying where they came from; cockpit.hang.ras must read each. Bounded: 90 s in all.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

PORT = 28028 + 17  # not the default: a second job on the machine must not answer
RANK = """
import os, sys, time, torch, torch.distributed as dist
dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29533", rank=0, world_size=1)
t = torch.ones(1024, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
print("ready", ".".join(map(str, torch.cuda.nccl.version())), torch.cuda.get_device_name(0), flush=True)
time.sleep(80)
"""


def ask(command: str, fmt: str | None) -> str:
    with socket.create_connection(("127.0.0.1", PORT), timeout=20) as sock:
        f = sock.makefile("rwb", buffering=0)
        f.write(b"CLIENT PROTOCOL 2\n")
        hello = f.readline().decode()
        if fmt:
            f.write(f"SET FORMAT {fmt}\n".encode())
            ok = f.readline().decode()
            if ok.strip().upper() != "OK":
                return f"(SET FORMAT {fmt} answered {ok!r}; server said {hello!r})"
        f.write(f"{command}\n".encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, NCCL_RAS_ENABLE="1", NCCL_RAS_ADDR=f"127.0.0.1:{PORT}", NCCL_DEBUG="INFO",
               NCCL_DEBUG_SUBSYS="INIT,RAS")
    rank = subprocess.Popen([sys.executable, "-c", RANK], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = rank.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("ready"):
                break
        (out / "ras-rank.log").write_text("".join(lines))
        if not lines or not lines[-1].startswith("ready"):
            print("the NCCL rank did not start:\n" + "".join(lines[-30:]))
            return 1
        _, nccl, *gpu = lines[-1].split()
        tag = f"{nccl}-{'-'.join(gpu).lower()}"
        time.sleep(2)  # RAS registers the communicator from its own thread
        for name, command, fmt in (("status", "STATUS", None), ("verbose", "VERBOSE STATUS", None),
                                   ("json", "VERBOSE STATUS", "json")):
            try:
                text = ask(command, fmt)
            except OSError as exc:
                text = f"(no answer: {exc})"
            suffix = "json" if fmt else "txt"
            path = out / f"ras-{tag}-1rank-healthy-{name}.{suffix}"
            path.write_text(text)
            print(f"== {path.name} ({len(text)} bytes)\n{text[:3000]}")
        return 0
    finally:
        rank.kill()
        rank.wait()


if __name__ == "__main__":
    sys.exit(main())
