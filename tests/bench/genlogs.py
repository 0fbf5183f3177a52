"""Generated multi-rank DDP logs for the parser benchmarks and growth tests (deterministic for a seed).

What a per-rank log of an NCCL_DEBUG=INFO training run looks like: NCCL INFO blocks with NCCL's own
``host:pid:tid [dev]`` prefix (bootstrap, network, Init START/COMPLETE, trees, one line per channel and peer)
each time a communicator is made, then mostly training step lines, now and then a warning, and at the end a
failure: one rank's traceback (CUDA out of memory), the others' watchdog timeouts and torchrun's SIGTERMs.

    write_job(directory, total_lines, ranks=8)    -> the rank files (what `cockpit diagnose` reads)
    counter_lines(n)                              -> fixed-width lines that start with a counter (a
                                                     training loop's own print; the hard-wrap trap)

Imported by tests/bench/bench_parse.py and tests/logs (the growth tests); stdlib only.
"""

from __future__ import annotations

import random
from pathlib import Path

NCCL_SHARE = 0.2
"""About this share of a generated log is NCCL INFO lines (the rest: training steps, warnings, errors)."""


def _nccl_block(host: str, pid: int, rank: int, nranks: int, comm: int, first: bool) -> list[str]:
    """One communicator's init on one rank, as NCCL 2.18 prints it."""
    dev = rank % 8
    p = f"{host}:{pid}:{pid + 113 + comm} [{dev}] NCCL INFO "
    bus = f"{0x18000 + dev * 0x11000:x}"
    lines = []
    if first:
        lines += [p + f"Bootstrap : Using eth0:10.0.{rank // 8}.{10 + rank % 8}<0>",
                  p + "NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or "
                      "directory No plugin found (libnccl-net.so), using internal implementation",
                  p + "cudaDriverVersion 12020"]
        if rank == 0:
            lines.append(f"{host}:{pid}:{pid} [{dev}] NCCL INFO NCCL version 2.18.3+cuda12.2")
        lines += [p + f"NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.{rank // 8}.{10 + rank % 8}<0>",
                  p + "Using network IB"]
    commid = f"0x{(comm * 2654435761) & 0xffffffffffff:x}"
    head = f"comm 0x55d5{comm:04x}c8a0 rank {rank} nranks {nranks} cudaDev {dev} nvmlDev {dev} busId {bus} " \
           f"commId {commid}"
    lines += [p + head + " - Init START", p + f"Setting affinity for GPU {dev} to ffff,ffffffff",
              p + f"NVLS multicast support is not available on dev {dev}",
              p + f"Trees [0] {(rank + 1) % nranks}/-1/-1->{rank}->{(rank - 1) % nranks} [1] "
                  f"{(rank + 1) % nranks}/-1/-1->{rank}->{(rank - 1) % nranks}",
              p + "P2P Chunksize set to 524288"]
    if rank == 0:
        lines += [p + f"Channel {c:02d}/32 :    " + " ".join(f"{r:3d}" for r in range(nranks)) for c in range(32)]
    nxt, prv = (rank + 1) % nranks, (rank - 1) % nranks
    for c in range(32):
        if nxt // 8 == rank // 8:
            lines.append(p + f"Channel {c:02d}/0 : {rank}[{dev}] -> {nxt}[{nxt % 8}] via P2P/IPC/read")
        else:
            lines.append(p + f"Channel {c:02d}/0 : {rank}[{dev}] -> {nxt}[{nxt % 8}] [send] "
                             f"via NET/IB/{c % 2}/GDRDMA")
            lines.append(p + f"Channel {c:02d}/0 : {prv}[{prv % 8}] -> {rank}[{dev}] [receive] "
                             f"via NET/IB/{c % 2}/GDRDMA")
    lines += [p + "Connected all rings", p + "Connected all trees",
              p + "threadThresholds 8/8/64 | 128/8/64 | 512 | 512",
              p + "32 coll channels, 32 nvls channels, 32 p2p channels, 32 p2p channels per peer",
              p + head + " - Init COMPLETE"]
    return lines


_WARNINGS = (
    "/usr/lib/python3/dist-packages/torch/utils/checkpoint.py:429: UserWarning: torch.utils.checkpoint: please "
    "pass in use_reentrant=True or use_reentrant=False explicitly.",
    "  warnings.warn(",
    "[rank{r}]:[W507 15:{m:02d}:09.140 ProcessGroupNCCL.cpp:1856] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS=1 has "
    "no effect for point-to-point collectives. (function operator())",
    "[2024-05-07 15:{m:02d}:09,140][train][WARNING] - grad norm 41.2 above clip 1.0 at step {s}",
)


def rank_log(rank: int, nranks: int, lines: int, seed: int = 0, fail_rank: int | None = 5) -> list[str]:
    """One rank's log: about ``lines`` lines (without newlines)."""
    rng = random.Random(seed * 1000 + rank)
    host, pid = f"gpu{rank // 8:03d}", 31000 + 37 * rank
    out: list[str] = []
    comm = 0
    step = 0
    block = len(_nccl_block(host, pid, rank, nranks, 0, True))
    # communicators spread through the run so that NCCL INFO lines are about NCCL_SHARE of it
    every = max(1, int(block / NCCL_SHARE) - block)
    while len(out) < lines - 40:
        out += _nccl_block(host, pid, rank, nranks, comm, comm == 0)
        comm += 1
        for _ in range(every):
            if len(out) >= lines - 40:
                break
            step += 1
            m = (step // 600) % 60
            roll = rng.random()
            if roll < 0.004:
                out.append(_WARNINGS[rng.randrange(len(_WARNINGS))].format(r=rank, m=m, s=step))
            else:
                out.append(f"[2024-05-07 15:{m:02d}:{step % 60:02d},{rng.randrange(1000):03d}][train][INFO] - "
                           f"epoch {step // 5000} | step {step:6d}/500000 | loss {rng.uniform(1.5, 3):.4f} | "
                           f"lr 3.00e-04 | grad_norm {rng.uniform(0.2, 2):.3f} | {rng.randrange(90000, 130000)} tok/s")
    out += _ending(rank, host, pid, step, fail_rank)
    return out


def _ending(rank: int, host: str, pid: int, step: int, fail_rank: int | None) -> list[str]:
    if fail_rank is None:
        return [f"[2024-05-07 16:00:00,000][train][INFO] - finished at step {step}"]
    if rank == fail_rank:
        return [f"[rank{rank}]: Traceback (most recent call last):",
                f'[rank{rank}]:   File "/workspace/train.py", line 212, in <module>',
                f"[rank{rank}]:     main()",
                f'[rank{rank}]:   File "/workspace/train.py", line 180, in main',
                f"[rank{rank}]:     loss.backward()",
                f"[rank{rank}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {rank % 8} "
                "has a total capacity of 79.15 GiB of which 1.06 GiB is free."]
    return [f"[rank{rank}]:[E507 16:10:09.140 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={step * 3}, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
            "Timeout(ms)=600000) ran for 600127 milliseconds before timing out.",
            f"[rank{rank}]:[E507 16:10:09.141 ProcessGroupNCCL.cpp:1664] [PG 0 Rank {rank}] Exception (either an "
            "error before or asyncError has been set): NCCL watchdog thread terminated with exception",
            f"{host}:{pid}:{pid + 200} [{rank % 8}] NCCL INFO [Service thread] Connection closed by localRank "
            f"{(rank + 1) % 8}"]


def write_job(directory: Path, total_lines: int, ranks: int = 8, seed: int = 0) -> list[Path]:
    """``ranks`` per-rank logs of ``total_lines`` lines in all, as a cockpit run directory names them."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in range(ranks):
        path = directory / f"rank-{rank}.gpu{rank // 8:03d}.log"
        path.write_text("\n".join(rank_log(rank, ranks, total_lines // ranks, seed)) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def counter_lines(n: int, start: int = 100000) -> list[str]:
    """``n`` lines of one width that start with a counter, as a training loop prints them:
    ``100123 1764038000.1 rank=0 step=100123 loss=2.3456 ...`` (each ``WIDTH`` characters)."""
    pad = "loss=2.3456 lr=3.0e-04 grad_norm=1.234 tok/s=123456"
    return [f"{i} {1764038000 + i / 10:.1f} rank=0 step={i} {pad}" for i in range(start, start + n)]
