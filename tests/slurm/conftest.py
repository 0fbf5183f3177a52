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
    # The daemons' ports are picked free, then bound by the daemons: another process may take one in between
    # (CI saw slurmd's "Unable to bind listen port ... Address already in use"). Each try has new ports.
    for tries_left in (2, 1, 0):
        # Not under pytest's tmp_path: munged wants every directory above its socket to be reachable by all.
        root = Path(tempfile.mkdtemp(prefix="cockpit-slurm-", dir="/tmp"))
        root.chmod(0o711)
        cluster = Cluster(root)
        try:
            cluster.start()
            break
        except (ClusterError, OSError) as exc:
            cluster.stop()
            if not tries_left:
                pytest.fail(f"the test Slurm cluster did not start: {exc}")
    yield cluster
    cluster.stop()
    shutil.rmtree(root, ignore_errors=True)
