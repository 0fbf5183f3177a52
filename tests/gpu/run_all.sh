#!/usr/bin/env bash
# Every manual GPU check in one go, on a machine with an NVIDIA GPU (not collected by pytest).
#
#   bash tests/gpu/run_all.sh OUTDIR
#
# Runs, each bounded in time, and keeps going past a failure so one run reports all of them:
#   1. nvidia-smi and torch's view of the GPUs
#   2. `cockpit gpus --json` against nvidia-smi (check_gpus_vs_nvidia_smi.py)
#   3. a recording of real NVML readings (record_nvml.py) and cockpit's replay of it against the live read
#   4. the training runtime: ddp / fsdp / dp x fp16 / bf16 / fp32 (check_gpu_train.py)
#   5. the user's own Lightning script under `cockpit run` (check_gpu_lightning.py)
#   6. a hang on nccl: the demo's rank 0 blocks after 30 steps; cockpit must call the stall and say where, and
#      the stall's stacks must carry the live answer of NCCL's RAS service at its default address
#      (localhost:28028): the stacks file's `ras` row, and `diagnose --json`'s `ras` entry (saved as
#      OUTDIR/hang-diagnose.json) with the NCCL version and no process named (RUNNING OK)
#   7. recover: on nccl: rank 0 raises after step 12 in its first attempt; the run heals and ends 0
#   8. NCCL's RAS report from a real communicator, text and JSON (record_ras.py), read by cockpit.hang.ras
# ONLY="gpus record" runs only the named steps (record covers record and record-busy, hang covers hang-ras).
# Every step's output goes to OUTDIR/all.log; OUTDIR/summary.txt has one line per step: ok / FAILED (rc); the
# NVML recordings (idle, and busy under a matrix-product loop) and the hang's stacks file land in OUTDIR too.
set -u
out=${1:?usage: run_all.sh OUTDIR}
mkdir -p "$out"
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo" || exit 2
export PYTHONUNBUFFERED=1 PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
summary="$out/summary.txt"
: >"$summary"

step() {  # step NAME SECONDS CMD...
    local name=$1 limit=$2 rc
    shift 2
    if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" ${name%-*} "* ]]; then return 0; fi
    echo "== $name: $*" >>"$out/all.log"
    timeout -k 10 "$limit" "$@" >"$out/step.log" 2>&1
    rc=$?
    cat "$out/step.log" >>"$out/all.log"
    if [ "$rc" -eq 0 ]; then echo "$name ok" >>"$summary"; else echo "$name FAILED (rc $rc)" >>"$summary"; fi
    echo "== $name: rc $rc"
    tail -n 25 "$out/step.log"
    rm -f "$out/step.log"
}

step env 60 bash -c 'nvidia-smi; python3 -c "import torch, pynvml; print(torch.__version__, torch.version.cuda, \
torch.cuda.device_count(), torch.cuda.get_device_name(0), torch.cuda.nccl.version())"'
step gpus 60 python3 tests/gpu/check_gpus_vs_nvidia_smi.py
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' A-Z' '-a-z' | tr -cd 'a-z0-9-')
step record 60 python3 tests/gpu/record_nvml.py "$out/nvml-$gpu-idle.json" --note "lent device, idle"
python3 -c "import torch, time
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
end = time.time() + 25
while time.time() < end: a @ a; torch.cuda.synchronize()" &
busy=$!
sleep 8
step record-busy 60 python3 tests/gpu/record_nvml.py "$out/nvml-$gpu-busy.json" --note "lent device, a bf16 matmul loop"
wait "$busy"
cp "$out"/nvml-*.json tests/fixtures/nvml/
step replay 120 python3 -m pytest -q -p no:cacheprovider tests/fleet/test_nvml.py -k "recordings or fixture or live_source"
step train 300 python3 tests/gpu/check_gpu_train.py --demo-args "--epochs 1 --steps-per-epoch 100 --hidden 2048 --layers 4"
step lightning 150 python3 tests/gpu/check_gpu_lightning.py
tmp=$(mktemp -d)
export COCKPIT_RUNS_DIR=$tmp/runs
job=$tmp/hang.yaml
cat >"$job" <<EOF
name: gpu-hang
script: $repo/jobs/demo.py
args: [--epochs, "1000", --steps-per-epoch, "50", --fail-rank, "0", --fail-step, "30", --fail-mode, hang]
launcher: local
gpus: [0]
backend: ddp
pg_backend: nccl
precision: bf16
stall_after: 15
on_stall: stop
EOF
# cockpit exits 1 for a run it stopped as hung; the step passes when the finding names rank 0 in maybe_fail
step hang 120 bash -c "python3 -m cockpit run '$job' 2>&1 | tee '$tmp/run.txt'; echo exit=\${PIPESTATUS[0]}; \
grep -q 'STALL: .*rank 0 .*stuck in maybe_fail' '$tmp/run.txt'"
cp "$tmp"/runs/*/logs/stacks.*.txt "$out/" 2>/dev/null
# the RAS report gathered live with the stall's stacks: a `ras` row in the stacks file, a `ras` entry in
# diagnose --json (NCCL >= 2.28.7 answers in JSON; an older NCCL in text, version and state alike)
step hang-ras 60 bash -c "grep -h '^ras ' '$tmp'/runs/*/logs/stacks.*.txt; \
grep -qE '^ras [^ ]+: NCCL 2\.[0-9]+\.[0-9]+ \((json|text), [0-9]+ ms\): RUNNING OK' '$tmp'/runs/*/logs/stacks.*.txt && \
python3 -m cockpit diagnose last --json >'$out/hang-diagnose.json'; python3 -c \"import json, sys
ras = json.load(open(sys.argv[1])).get('ras') or []
print(json.dumps(ras, indent=1))
sys.exit(0 if ras and ras[0]['state'] == 'answered' and ras[0]['version'] and ras[0]['ok'] else 1)\" '$out/hang-diagnose.json'"
cat >"$tmp/heal.yaml" <<EOF
name: gpu-heal
script: $repo/jobs/demo.py
args: [--epochs, "1", --steps-per-epoch, "30", --checkpoint-every, "5", --fail-rank, "0", --fail-step, "12",
       --fail-attempts, "1"]
launcher: local
gpus: [0]
pg_backend: nccl
precision: bf16
recover:
  attempts: 1
EOF
step heal 150 bash -c "python3 -m cockpit run '$tmp/heal.yaml' | tee '$tmp/heal.txt'; rc=\${PIPESTATUS[0]}; \
echo exit=\$rc; [ \$rc -eq 0 ] && grep -q 'attempts: 2, goodput' '$tmp/heal.txt'"
step ras 100 python3 tests/gpu/record_ras.py "$out"
cat "$summary"
