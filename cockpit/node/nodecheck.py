"""The preflight inside a Slurm allocation, the part that runs ON each node: one task per node (one srun step
before training) writes ``<dir>/<node>.json``, one JSON object on one line: the node's facts (GPUs as
nvidia-smi lists them, the GPUs Slurm gave the step, the driver, interfaces, python / torch / NCCL versions, the
*_SOCKET_IFNAME values it runs with) and, with several nodes, how a tiny all-reduce across them went (gloo,
or nccl when the job uses GPUs). cockpit.node.nodejudge then compares the answers in the batch shell.

The facts are written first and the all-reduce's outcome after, each time atomically, so a node that was
killed while waiting for a broken peer still leaves its facts: no answer at all names the node that broke.
A failure is data, never an exception: the task always exits 0 after writing its answer.

Shipped as source: installed as ``<run>/hook/cockpit_nodecheck.py`` (with cockpit_ifaces.py beside it) and run
with the job's python, where cockpit may not be installed. Stdlib, plus torch only for the all-reduce.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

try:
    import cockpit_ifaces as ifaces  # shipped: beside this file in <run>/hook/
except ImportError:
    from cockpit.node import ifaces  # imported as part of cockpit

SMI = ["nvidia-smi", "--query-gpu=index,pci.bus_id,uuid,name,driver_version", "--format=csv,noheader"]
SOCKET_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


def gpus(timeout: float = 20.0) -> dict:
    """What nvidia-smi lists on this node: {"gpus": [{index, bus_id, uuid, name}], "driver", "error"}. A node
    without nvidia-smi, or where it fails or hangs (a GPU fallen off the bus), says so in "error"."""
    try:
        r = subprocess.run(SMI, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return {"gpus": [], "driver": None, "error": "nvidia-smi not found (no NVIDIA driver)"}
    except subprocess.TimeoutExpired:
        return {"gpus": [], "driver": None, "error": f"nvidia-smi did not answer within {timeout:g} s"}
    if r.returncode != 0:
        first = ((r.stdout + r.stderr).strip().splitlines() or [f"exit status {r.returncode}"])[0]
        return {"gpus": [], "driver": None, "error": f"nvidia-smi failed: {first}"}
    rows = [[c.strip() for c in line.split(",")] for line in r.stdout.splitlines() if line.strip()]
    listed = [{"index": int(c[0]) if c[0].isdigit() else None, "bus_id": c[1], "uuid": c[2], "name": c[3]}
              for c in rows if len(c) >= 5]
    return {"gpus": listed, "driver": rows[0][4] if rows and len(rows[0]) >= 5 else None, "error": None}


def torch_versions(load: bool) -> dict:
    """torch, its CUDA build and NCCL. With ``load`` (several nodes: the all-reduce imports torch anyway) from
    the imported module, so a torch that does not import is found here; else from torch/version.py (an import
    takes seconds)."""
    if not load:
        return {**_version_file(), "nccl": None, "torch_error": None}
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - a broken install raises anything; the node reports it
        return {"torch": None, "torch_cuda": None, "nccl": None, "torch_error": f"{type(exc).__name__}: {exc}"}
    nccl = None
    try:
        version = torch.cuda.nccl.version() if torch.cuda.is_available() else None
        nccl = ".".join(map(str, version)) if isinstance(version, tuple) else (str(version) if version else None)
    except Exception:  # noqa: BLE001 - a CPU-only build has no NCCL: unknown, not an error
        nccl = None
    return {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "nccl": nccl, "torch_error": None}


def _version_file() -> dict:
    spec = importlib.machinery.PathFinder.find_spec("torch")
    try:
        text = (Path(spec.origin).parent / "version.py").read_text() if spec and spec.origin else ""
    except OSError:
        text = ""
    found = {k: re.search(rf"^{k}(?:\s*:[^=]*)?\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
             for k in ("__version__", "cuda")}
    return {"torch": found["__version__"] and found["__version__"].group(1),
            "torch_cuda": found["cuda"] and found["cuda"].group(1)}


def facts(name: str, rank: int, world: int) -> dict:
    return {"node": name, "rank": rank, "hostname": socket.gethostname(), "time": time.time(),
            **gpus(), "slurm_gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "interfaces": ifaces.interfaces(), "python": ".".join(map(str, sys.version_info[:3])),
            **torch_versions(world > 1), "env": {k: os.environ[k] for k in SOCKET_VARS if k in os.environ},
            "allreduce": None}


def allreduce(rank: int, world: int, addr: str, port: int, backend: str, timeout: float) -> dict:
    """A one-element all-reduce across the nodes. On failure node 0 (the store's host) also says which nodes
    never reached the store, so the judge can name them rather than everyone who timed out waiting."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    start, store = time.monotonic(), None
    try:
        store = dist.TCPStore(addr, port, world, rank == 0, timedelta(seconds=timeout), wait_for_workers=False)
        store.set(f"node/{rank}", "1")
        dist.init_process_group(backend, store=dist.PrefixStore("pg", store), rank=rank, world_size=world,
                                timeout=timedelta(seconds=timeout))
        device = "cpu"
        if backend == "nccl":
            device = "cuda:0"
            torch.cuda.set_device(0)
        value = torch.ones(1, device=device)
        dist.all_reduce(value)
        got = value.item()
        dist.destroy_process_group()
        ok = got == world
        return {"ok": ok, "seconds": round(time.monotonic() - start, 3), "backend": backend,
                "error": None if ok else f"all-reduce gave {got:g}, not {world}", "missing": []}
    except Exception as exc:  # noqa: BLE001 - gloo/nccl/store errors are many kinds; the node reports them
        missing = []
        if store is not None and rank == 0:
            missing = [r for r in range(world) if not _has(store, f"node/{r}")]
        return {"ok": False, "seconds": round(time.monotonic() - start, 3), "backend": backend,
                "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:400],
                "missing": missing}


def _has(store, key: str) -> bool:
    try:
        return bool(store.check([key]))
    except Exception:  # noqa: BLE001 - a store that broke: the key is as good as missing
        return False


def write(path: Path, answer: dict) -> None:
    """Atomically: the judge may read while a killed node's second write never comes."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(answer, separators=(",", ":")) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="cockpit_nodecheck.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", required=True, help="where each node writes <node>.json (shared with the batch shell)")
    p.add_argument("--master", required=True, help="the first node, host of the all-reduce's store")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds for the store and the all-reduce")
    args = p.parse_args(argv)
    name = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    rank, world = int(os.environ.get("SLURM_NODEID", "0")), int(os.environ.get("SLURM_NNODES", "1"))
    path = Path(args.dir) / f"{name}.json"
    answer = facts(name, rank, world)
    write(path, answer)
    print(json.dumps(answer, separators=(",", ":")), flush=True)
    if world > 1 and answer["torch_error"] is None:
        answer["allreduce"] = allreduce(rank, world, args.master, args.port, args.backend, args.timeout)
        write(path, answer)
        print(json.dumps({"node": name, "allreduce": answer["allreduce"]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
