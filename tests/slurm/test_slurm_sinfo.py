"""A node in two partitions, on the real test cluster: sinfo lists it once per partition, the TUI's partition
suggestions keep every partition, and `cockpit gpus --cluster` looks at each node once. The partition is made
for this test (scontrol create) and deleted after it; its answer is recorded in
tests/fixtures/sinfo/two-partitions.txt."""

from __future__ import annotations

import subprocess
import sys

from helpers import REPO

from cockpit.slurm.sinfo import SINFO_ARGS, parse_sinfo
from cockpit.tui.models.context import default_partitions

RECORDED = REPO / "tests" / "fixtures" / "sinfo" / "two-partitions.txt"


def entries(text: str) -> list[tuple]:
    """sinfo's lines without the state (other tests' jobs may hold the nodes), in a fixed order (Slurm's order
    of a node's partitions is its own)."""
    return sorted((n.name, n.partition, n.default, n.gres, n.gpus) for n in parse_sinfo(text))


def test_a_node_in_two_partitions_is_listed_in_both_and_looked_at_once(slurm_cluster, monkeypatch, tmp_path):
    slurm_cluster.run("scontrol", "create", "PartitionName=debug", "Nodes=n1,n2", "State=UP")
    try:
        live = slurm_cluster.run(*SINFO_ARGS).stdout
        assert entries(live) == entries(RECORDED.read_text()), f"re-record {RECORDED}:\n{live}"
        monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
        assert default_partitions() == ["debug", "gpu"]
        env = {**slurm_cluster.env, "PYTHONPATH": str(REPO), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
        r = subprocess.run([sys.executable, "-m", "cockpit", "gpus", "--cluster", "--timeout", "5"],
                           capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
        assert "Traceback" not in r.stderr
        # no sshd answers for n1, n2 here: each node gets one line saying why, "NAME: ..."
        assert sorted(line.split(":")[0] for line in r.stdout.splitlines()) == ["n1", "n2"], r.stdout
    finally:
        slurm_cluster.run("scontrol", "delete", "PartitionName=debug")
