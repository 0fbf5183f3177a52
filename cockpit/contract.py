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
BACKEND = "COCKPIT_BACKEND"  # "ddp" | "dp"
PG_BACKEND = "COCKPIT_PG_BACKEND"  # "nccl" | "gloo"  (never "auto": launchers resolve it)
PRECISION = "COCKPIT_PRECISION"  # "fp32" | "fp16" | "bf16"
SEED = "COCKPIT_SEED"  # integer; every rank seeds identically with it
REQUEUE = "COCKPIT_REQUEUE"  # "1" when the Slurm job may requeue itself on SIGUSR1 / SIGTERM, else "0"
HOST = "COCKPIT_HOST"  # the node's name as cockpit knows it (names the per-rank log files)

ALL = (RUN_DIR, RUN_ID, JOB_NAME, BACKEND, PG_BACKEND, PRECISION, SEED, REQUEUE, HOST)

# The values of PRECISION, and the rule both sides check: the job file (cockpit.spec.model, before a launch) and the
# rank (cockpit.train.config, where torch says whether CUDA is there). Here, since both import this module
# and neither may import the other (spec runs without torch; the rank without PyYAML).
PRECISIONS = ("fp32", "fp16", "bf16")
CUDA_ONLY_PRECISIONS = ("fp16",)  # autocast + GradScaler: no fp16 autocast on CPU


def precision_needs_cuda(precision: str) -> bool:
    return precision in CUDA_ONLY_PRECISIONS

# torchrun's and Slurm's own variables, read by the runtime (listed here so the README table has one source).
TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
SLURM_VARS = (
    "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_JOB_ID",
    "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_RESTART_COUNT",
)
