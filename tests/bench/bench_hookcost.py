"""The rank hook's cost on a training step in instructions, which the machine's load does not change (issue 29,
row 6; bench_train.py --hook measures samples/s, which a shared 2-core machine moves by more than the 1% asked).

    python tests/bench/bench_hookcost.py [--steps 30] [--json PATH|-] [--smoke]

Two gloo ranks train the demo's model (jobs/demo.py: 3 hidden layers of 256, batch 64, AdamW) under DDP, with
cockpit.train's per-step collective (an all_reduce of the stop flag) beside DDP's gradient all-reduce. Rank 0 runs
under valgrind's callgrind with instrumentation off until 20 warm-up steps are done, on for ``--steps`` steps
(callgrind_control), then off: its instructions per step, all threads. Arms, one run each (counts do not drift):

  hook off   torch's defaults: the Flight Recorder on, 2,000 entries (torch 2.13's default)
  hook on    cockpit's rank hook installed as the rank wrapper installs it (its collective wrappers, its Flight
             Recorder size, the fork and exit handlers); its once-a-second beat thread is measured apart, natively
             (CPU per beat), because under callgrind a second of the program is ~50x more instructions of training
  FR off     torch's Flight Recorder off (TORCH_FR_BUFFER_SIZE=0), no hook
  FR 64      torch's Flight Recorder at the hook's size, no hook

Printed: instructions per step per arm, each arm / hook off, and the beat's CPU per second against a step's CPU.
Needs valgrind (callgrind_control); several minutes (torch's import runs under valgrind's translator).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchkit  # noqa: E402

RANK = r'''
import os, subprocess, sys, time
rank, steps = int(sys.argv[1]), int(sys.argv[2])
if os.environ.get("BENCH_HOOK") == "1":
    import importlib.util
    spec = importlib.util.spec_from_file_location("cockpit_hook_bench", os.environ["BENCH_HOOK_FILE"])
    rh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rh)
    rh.BEAT_SECONDS = 3600.0  # the beat is measured apart (see the bench's docstring)
    os.makedirs(os.environ["BENCH_DIR"] + "/logs", exist_ok=True)
    rh._Hook(os.environ["BENCH_DIR"] + f"/logs/rank-{rank}.h").install()
import torch, torch.distributed as dist
from torch import nn
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="file://" + os.environ["BENCH_STORE"], rank=rank, world_size=2)
torch.manual_seed(0)
layers, width = [], 32
for _ in range(3):
    layers += [nn.Linear(width, 256), nn.ReLU()]
    width = 256
model = nn.parallel.DistributedDataParallel(nn.Sequential(*layers, nn.Linear(width, 1)))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randn(64, 32), torch.randn(64, 1)
def step():
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    flag = torch.tensor([0], dtype=torch.int32)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
def callgrind(what):
    if rank == 0 and os.environ.get("BENCH_CALLGRIND"):
        subprocess.run(["callgrind_control", "-i", what, str(os.getpid())], check=True, stdout=subprocess.DEVNULL)
for _ in range(20):
    step()
dist.barrier()
callgrind("on")
c0 = time.process_time()
for _ in range(steps):
    step()
c1 = time.process_time()
callgrind("off")
print(f"cpu_us_per_step {(c1 - c0) / steps * 1e6:.1f}", flush=True)
dist.barrier()
os._exit(0)
'''
ARMS = {"hook off": {}, "hook on": {"BENCH_HOOK": "1"}, "FR off": {"TORCH_FR_BUFFER_SIZE": "0"},
        "FR 64": {"TORCH_FR_BUFFER_SIZE": "64"}}
COLLECTED = re.compile(r"Collected : (\d+)")
GOAL_RATIO = 1.01


def run_arm(env_extra: dict[str, str], steps: int, callgrind: bool, tmp: Path) -> dict:
    """One run of the two ranks; rank 0's instructions (callgrind) and CPU us per step."""
    d = Path(tempfile.mkdtemp(dir=tmp))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_FR", "TORCH_NCCL", "COCKPIT_"))}
    env.update(env_extra, BENCH_STORE=str(d / "store"), BENCH_DIR=str(d),
               BENCH_HOOK_FILE=str(benchkit.ROOT / "cockpit" / "node" / "rankhook.py"))
    script = d / "rank.py"
    script.write_text(RANK)
    zero = [sys.executable, str(script), "0", str(steps)]
    if callgrind:
        env["BENCH_CALLGRIND"] = "1"
        zero = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={d}/cg.out", *zero]
    ranks = [subprocess.Popen(zero, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
             subprocess.Popen([sys.executable, str(script), "1", str(steps)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)]
    outs = [p.communicate(timeout=1800) for p in ranks]
    for p, (out, err) in zip(ranks, outs, strict=True):
        if p.returncode != 0:
            raise SystemExit(f"a rank exited {p.returncode}:\n{out}\n{err[-3000:]}")
    got = {"cpu_us_per_step": float(outs[0][0].split()[-1])}
    if callgrind:
        m = COLLECTED.search(outs[0][1])
        if m is None:
            raise SystemExit(f"no instruction count from callgrind:\n{outs[0][1][-3000:]}")
        got["instructions_per_step"] = int(m.group(1)) / steps
    return got


def beat_cpu_us(beats: int = 2000) -> float:
    """CPU microseconds of one beat of the hook (the request check and the beat record), natively."""
    spec = importlib.util.spec_from_file_location("cockpit_hook_beat", benchkit.ROOT / "cockpit/node/rankhook.py")
    assert spec is not None and spec.loader is not None
    rh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rh)
    with tempfile.TemporaryDirectory(prefix="bench-hookcost-beat-") as tmp:
        os.mkdir(f"{tmp}/logs")
        hook = rh._Hook(f"{tmp}/logs/rank-0.h")
        c0 = time.process_time()
        for _ in range(beats):
            hook._answer_request()
            hook._beat(time.time())
        return (time.process_time() - c0) / beats * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30, help="steps counted per run (after 20 warm-up steps)")
    ap.add_argument("--json", metavar="PATH", help="the figures and goals as JSON (- for stdout)")
    ap.add_argument("--smoke", action="store_true", help="5 steps an arm, natively (CPU time, no callgrind)")
    args = ap.parse_args()
    counted = not args.smoke
    if counted and (shutil.which("valgrind") is None or shutil.which("callgrind_control") is None):
        sys.exit("needs valgrind with callgrind_control on PATH")
    steps, key, unit = (args.steps, "instructions_per_step", "instructions") if counted else \
        (5, "cpu_us_per_step", "us of CPU (smoke: not load-proof)")
    report = benchkit.Report("hookcost")
    got: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-hookcost-") as tmp:
        for name, extra in ARMS.items():
            got[name] = run_arm(extra, steps, counted, Path(tmp))
            print(f"  {name:9} {got[name][key]:,.1f} {unit} a step", flush=True)
        native = run_arm({}, 5 if args.smoke else 200, False, Path(tmp))["cpu_us_per_step"]
    beat = beat_cpu_us(50 if args.smoke else 2000)
    base = got["hook off"][key]
    print(f"{steps} steps a run, rank 0 {'under callgrind' if counted else 'natively'}; "
          f"load {report.load_before} -> {benchkit.load()}")
    for name, g in got.items():
        ratio = g[key] / base
        line = f"  {name:9} {g[key]:,.1f} {unit} a step, {ratio:.4f} x hook off"
        report.figure(name, {key: round(g[key], 1), "ratio": round(ratio, 5)})
        if name == "hook on":
            line += "; " + report.goal(f"hook on / hook off, {unit} a step", f"<= {GOAL_RATIO}", round(ratio, 5),
                                       ratio <= GOAL_RATIO if counted else None)
        print(line)
    share = beat / 1e6  # one beat a second: CPU seconds a second
    print(f"  the beat: {beat:.0f} us of CPU once a second, {100 * share:.3f}% of the rank's core; a step here is "
          f"{native:.0f} us of CPU natively")
    report.figure("beat", {"cpu_us": round(beat, 1), "pct_of_a_core": round(100 * share, 4),
                           "step_cpu_us_native": round(native, 1)})
    report.dump(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
