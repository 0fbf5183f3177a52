"""torchrun's own restarts (a job's max_restarts, issue 33 item 10) on the ssh launcher, on the lab's real sshd:
2 gloo ranks on node2, which does not share the runs directory (its files come back over SSH). Rank 1 fails in
the first round(s); while torchrun has restarts left the ssh side stops nothing, the node's copies of a round's
exit records move to logs/restart-<K>/ here as they did there, and the summary says which rank failed and which
restart of how many followed. Runs use --grace 60, so a stop the test sees is the ssh launcher's, not the
supervisor's last resort.

The script keys its process group by torchrun's round (a PrefixStore over torchrun's store), as torch
once did for every script: torch 2.13 keeps one TCPStore across torchrun's restarts (static_tcp_rendezvous.py creates
it once; rendezvous.py's "We create a new TCPStore for every retry so no need to add prefix" does not hold for
it), so a restarted round's gloo ranks can read the previous round's addresses and hang connecting to them (seen
here under load with a plain init_process_group("gloo"): round 1 stuck in _new_process_group_helper for
minutes; the previous commit's run of the test timed out connecting to such an address too)."""

from __future__ import annotations

import json
import secrets
import textwrap

import pytest
from multinode.test_deadlink import _python
from multinode.test_ssh_runs import left_on_nodes, only_run

from cockpit.run import layout

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""\
    import os, sys
    from datetime import timedelta
    import torch
    import torch.distributed as dist

    fail_rounds = int(sys.argv[1])
    restart = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                          timeout=timedelta(seconds=120))
    dist.init_process_group("gloo", store=dist.PrefixStore(f"round-{restart}", store),
                            rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
    rank = dist.get_rank()
    t = torch.ones(1)
    dist.all_reduce(t)
    print(f"rank {rank} round {restart} sum {t.item():g}", flush=True)
    if rank == 1 and restart < fail_rounds:
        os._exit(3)
    dist.barrier()  # a failing round: rank 0 waits here for rank 1, until torchrun stops it
    print(f"rank {rank} round {restart} done", flush=True)
    dist.destroy_process_group()
""")


def _job(lab, max_restarts: int) -> str:
    jobs = lab.cluster.root / "jobs"
    jobs.mkdir(exist_ok=True)
    (jobs / "restart_once.py").write_text(SCRIPT)
    path = jobs / f"restarts-{secrets.token_hex(2)}.yaml"
    path.write_text(f"name: restarts\nscript: restart_once.py\nworkdir: {jobs}\nlauncher: ssh\nnodes: [node2]\n"
                    f"gpus: none\nprocs_per_node: 2\nmax_restarts: {max_restarts}\npython: {_python(lab)}\n"
                    "env:\n  GLOO_SOCKET_IFNAME: eth0\n")
    return str(path)


def _exit_status(path) -> int:
    return int(path.read_text().split()[0])


def test_ssh_a_rank_that_fails_once_is_restarted_by_torchrun_and_the_run_succeeds(lab):
    runs = lab.runs()
    r = lab.cockpit(runs, "run", _job(lab, 2), "--grace", "60", "--", "1", timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "succeeded in" in r.stdout, r.stdout[-3000:]
    assert ("restart: rank 1 on node2 failed (exit code 3); torchrun restarted the workers (restart 1 of 2)"
            in r.stdout), r.stdout[-3000:]
    run_dir, status = only_run(runs)
    assert status.state == "succeeded" and status.max_restarts == 2 and status.first_failure is None
    assert [(x.rank, x.host, x.status) for x in status.restarts] == [(1, "node2", 3)]
    assert {e.status for e in status.ranks.values()} == {0}
    logs = run_dir / layout.LOGS
    # node2's copies: the first round's records moved aside here as there; logs/ holds the last round's alone
    assert _exit_status(logs / "restart-0" / "rank-1.node2.exit") == 3
    assert _exit_status(logs / "rank-1.node2.exit") == 0 and _exit_status(logs / "rank-0.node2.exit") == 0
    assert "rank 1 round 1 done" in (logs / "rank-1.node2.log").read_text()
    assert left_on_nodes(lab, status.run_id) == {"node1": [], "node2": []}


def test_ssh_a_rank_that_fails_every_round_fails_the_run_after_max_restarts(lab):
    runs = lab.runs()
    r = lab.cockpit(runs, "run", _job(lab, 1), "--grace", "60", "--", "99", timeout=300)
    assert r.returncode != 0, r.stdout[-3000:]
    assert "first failure: rank 1 on node2: exit code 3" in r.stdout, r.stdout[-3000:]
    assert ("restart: rank 1 on node2 failed (exit code 3); torchrun restarted the workers (restart 1 of 1)"
            in r.stdout), r.stdout[-3000:]
    run_dir, status = only_run(runs)
    assert status.state == "failed" and (status.first_failure.rank, status.first_failure.status) == (1, 3)
    assert [(x.rank, x.status) for x in status.restarts] == [(1, 3)]
    logs = run_dir / layout.LOGS
    assert _exit_status(logs / "restart-0" / "rank-1.node2.exit") == 3
    assert _exit_status(logs / "rank-1.node2.exit") == 3  # the last round's, after torchrun's one restart
    assert "rank 1 round 1 sum 2" in (logs / "rank-1.node2.log").read_text()
    saved = json.loads((run_dir / layout.STATUS).read_text())
    assert saved["max_restarts"] == 1
    assert left_on_nodes(lab, status.run_id) == {"node1": [], "node2": []}
