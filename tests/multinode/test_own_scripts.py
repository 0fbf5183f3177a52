"""A user's own Lightning script (jobs/own/lightning_ddp.py, no cockpit import) across two namespaced hosts
with the ssh launcher: torchrun on each node, 2 nodes x 2 ranks, gloo. Lightning finds TorchElasticEnvironment
and needs devices x num_nodes == WORLD_SIZE; node2 keeps its files apart, so its ranks' logs come back over
SSH."""

from __future__ import annotations

import secrets
import sys

import pytest
import yaml
from helpers import REPO

from cockpit.run.store import list_runs

pytestmark = pytest.mark.slow


def test_lightning_two_nodes_by_two_ranks_over_ssh(lab):
    job = {"name": "own-lightning-ssh", "script": "lightning_ddp.py", "workdir": str(REPO / "jobs" / "own"),
           "args": ["--devices", "2", "--num-nodes", "2", "--epochs", "2"], "launcher": "ssh",
           "nodes": ["node1", "node2"], "gpus": "none", "procs_per_node": 2, "python": sys.executable,
           "env": {"GLOO_SOCKET_IFNAME": "eth0"}}
    path = lab.cluster.root / "jobs" / f"own-lightning-{secrets.token_hex(2)}.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    runs = lab.runs()
    r = lab.cockpit(runs, "run", str(path), "--grace", "60")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    [(run_dir, status)] = list_runs(runs)
    assert status.state == "succeeded" and status.world_size == 4
    hosts = ["node1", "node1", "node2", "node2"]
    assert {k: (v.host, v.status) for k, v in status.ranks.items()} == {str(k): (h, 0) for k, h in enumerate(hosts)}
    for rank, host in enumerate(hosts):
        log = (run_dir / f"logs/rank-{rank}.{host}.log").read_text()  # node2's: copied here over SSH
        # 512 samples over 4 ranks, 32 a batch: 4 steps an epoch
        assert f"lightning: rank {rank} of 4, TorchElasticEnvironment" in log, log[-2000:]
        assert f"lightning: rank {rank} done after 8 steps" in log
        assert f"[{host}:{rank}] lightning: rank {rank} epoch 1 step 8 loss " in r.stdout
