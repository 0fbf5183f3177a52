"""The environment contract between cockpit's launchers and the training process.

Every launcher (local, ssh, slurm) sets these variables for every rank; ``cockpit.train`` reads them, and so
can a user's own script without importing cockpit. The README documents the same table.

Rank variables come from the launcher underneath: torchrun sets RANK / LOCAL_RANK / WORLD_SIZE /
LOCAL_WORLD_SIZE / MASTER_ADDR / MASTER_PORT; under Slurm the sbatch script maps SLURM_PROCID / SLURM_LOCALID /
SLURM_NTASKS onto RANK / LOCAL_RANK / WORLD_SIZE, and the runtime falls back to the SLURM_* names itself if a
script is started by a bare ``srun``.
"""

from __future__ import annotations

RUN_DIR = "COCKPIT_RUN_DIR"  # absolute path of the run directory (checkpoints/, metrics/, logs/ live here)
RUN_ID = "COCKPIT_RUN_ID"  # the run's id, as `cockpit ps` shows it
JOB_NAME = "COCKPIT_JOB_NAME"  # the job spec's name
BACKEND = "COCKPIT_BACKEND"  # "ddp" | "dp" | "fsdp"
PG_BACKEND = "COCKPIT_PG_BACKEND"  # "nccl" | "gloo"  (never "auto": launchers resolve it)
PRECISION = "COCKPIT_PRECISION"  # "fp32" | "fp16" | "bf16"
SEED = "COCKPIT_SEED"  # integer; every rank seeds identically with it
REQUEUE = "COCKPIT_REQUEUE"  # "1" when the Slurm job may requeue itself on SIGUSR1 / SIGTERM, else "0"
HOST = "COCKPIT_HOST"  # the node's name as cockpit knows it (names the per-rank log files)
# The attempt of the run, 0-based: 0 at the first start, N at the N-th relaunch (the job's recover:). Set by the
# supervisor in the environment it starts the node script with, not in the script (it is the same every attempt).
ATTEMPT = "COCKPIT_ATTEMPT"
# starts the marker line that every attempt after the first appends to every log of the run (recover:)
ATTEMPT_MARK = "[cockpit] attempt "

ALL = (RUN_DIR, RUN_ID, JOB_NAME, BACKEND, PG_BACKEND, PRECISION, SEED, REQUEUE, HOST, ATTEMPT)

# The values of BACKEND and PRECISION, and the rules both sides check: the job file (cockpit.spec.model, before a
# launch) and the rank (cockpit.train.config). Here, since both import this module and neither may import the other
# (spec runs without torch; the rank without PyYAML).
BACKENDS = ("ddp", "dp", "fsdp")
# One process per device under a process group: torchrun (or srun) starts them, on one node or many. dp is the
# other kind: ONE process drives every GPU of its node (DataParallel), so one node only.
PROCESS_GROUP_BACKENDS = ("ddp", "fsdp")
PRECISIONS = ("fp32", "fp16", "bf16")
# No precision needs CUDA: torch >= 2.3 runs fp16 autocast and GradScaler("cpu") on the CPU (slow, but the same
# code path as on a GPU, so a CPU run tests it). Every backend takes every precision: under dp the runtime enters
# autocast inside each replica's forward (DataParallel runs replicas in threads and autocast is thread-local);
# under fsdp it also sets FSDP2's MixedPrecisionPolicy (params gathered in 16 bit, gradients reduced in fp32) and
# uses ShardedGradScaler for fp16 (every rank agrees on a skipped step). A torch too old for fp16 on the CPU is
# refused by the rank itself (cockpit.train.precision), the only side that knows the torch version.


def uses_process_group(backend: str) -> bool:
    """True for backends that run one process per device under torchrun/srun (several nodes allowed)."""
    return backend in PROCESS_GROUP_BACKENDS


# torchrun's and Slurm's own variables, read by the runtime (listed here so the README table has one source).
TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
SLURM_VARS = (
    "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_JOB_ID",
    "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_RESTART_COUNT",
)
