"""The session's Slurm cluster (tests/slurm/cluster.py). If it cannot start, every test here fails: the test
command installs Slurm (slurmctld slurmd slurm-client munge), so a missing or broken one is a bug to see."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from helpers import require_tool
from slurm.cluster import Cluster, ClusterError


@pytest.fixture(scope="session")
def slurm_cluster():
    for tool in ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo"):
        require_tool(tool)
    # Not under pytest's tmp_path: munged wants every directory above its socket to be reachable by all.
    root = Path(tempfile.mkdtemp(prefix="cockpit-slurm-", dir="/tmp"))
    root.chmod(0o711)
    cluster = Cluster(root)
    try:
        cluster.start()
    except (ClusterError, OSError) as exc:
        cluster.stop()
        pytest.fail(f"the test Slurm cluster did not start: {exc}")
    yield cluster
    cluster.stop()
    shutil.rmtree(root, ignore_errors=True)
