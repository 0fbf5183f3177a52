"""The preflight inside the allocation without a cluster: the judge's rules over node answers (the shape
cockpit.node.nodecheck writes; tests/slurm/test_alloc_preflight.py checks that shape on the real cluster),
the note and interface advice cockpit makes of them, and the node check's own run in this process."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import REPO

from cockpit.node import nodecheck, nodejudge
from cockpit.preflight import allocation


def answer(node: str, rank: int, gpus: int = 4, ip: str = "10.0.0.1/24", **over) -> dict:
    eth = {"name": "eth0", "up": True, "loopback": False, "ipv4": [ip], "virtual": False}
    lo = {"name": "lo", "up": True, "loopback": True, "ipv4": ["127.0.0.1/8"], "virtual": True}
    base = {"node": node, "rank": rank, "gpus": [{"index": i} for i in range(gpus)], "driver": "590.48.01",
            "error": None, "interfaces": [lo, eth], "python": "3.11.7", "torch": "2.5.1", "nccl": "2.21.5",
            "torch_error": None, "env": {}, "allreduce": {"ok": True, "error": None, "missing": []}}
    return {**base, **over}


def test_a_good_allocation_passes():
    v = nodejudge.judge(["n1", "n2"], {"n1": answer("n1", 0), "n2": answer("n2", 1, ip="10.0.0.2/24")}, 4)
    assert v == {"ok": True, "bad": {}, "failures": [], "warnings": []}


def test_each_kind_of_bad_node_is_named_with_its_reason():
    nodes = ["n1", "n2", "n3", "n4", "n5"]
    answers = {"n1": answer("n1", 0), "n2": answer("n2", 1, gpus=3), "n3": None,
               "n4": answer("n4", 3, torch="2.4.0"), "n5": answer("n5", 4, error="nvidia-smi failed: Failed to "
                                                                 "initialize NVML: Driver/library version mismatch")}
    v = nodejudge.judge(nodes, answers, 4)
    assert not v["ok"] and list(v["bad"]) == ["n2", "n3", "n5", "n4"]
    assert v["bad"]["n2"] == ["3 GPUs visible (nvidia-smi ids 0,1,2), the job asks 4 per node"]
    assert v["bad"]["n3"][0].startswith("no answer from the preflight step")
    assert v["bad"]["n4"] == ["torch 2.4.0, the other nodes run 2.5.1"]
    assert "Driver/library version mismatch, and the job asks 4 GPUs" in v["bad"]["n5"][0]
    assert nodejudge.judge(nodes, answers, 0)["bad"].keys() == {"n3", "n4"}  # no GPUs asked: not counted


def test_what_no_single_node_explains_fails_without_naming_one():
    two = {"n1": answer("n1", 0), "n2": answer("n2", 1, torch="2.4.0")}
    v = nodejudge.judge(["n1", "n2"], two, 0)
    assert v["bad"] == {} and v["failures"] == [
        "torch differs between the nodes and no version has a majority: n1 2.5.1, n2 2.4.0"]
    drivers = nodejudge.judge(["n1", "n2"], {"n1": answer("n1", 0), "n2": answer("n2", 1, driver="535.1")}, 4)
    assert drivers["ok"] and drivers["warnings"][0].startswith("driver differs")  # mixed drivers train


def test_interfaces_the_job_names_must_exist_and_carry_ipv4():
    env = {"GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "ib"}
    v = nodejudge.judge(["n1", "n2"], {"n1": answer("n1", 0, env=env), "n2": answer("n2", 1, env=env)}, 0)
    assert v["bad"]["n1"] == ["NCCL_SOCKET_IFNAME=ib selects no interface that is up with an IPv4 address here "
                              "(usable: eth0)"]
    gloo = {"GLOO_SOCKET_IFNAME": "ens5"}
    v = nodejudge.judge(["n1", "n2"], {"n1": answer("n1", 0), "n2": answer("n2", 1, env=gloo)}, 0)
    assert list(v["bad"]) == ["n2"] and "no interface ens5 here (has eth0, lo)" in v["bad"]["n2"][0]
    excluded = {"NCCL_SOCKET_IFNAME": "^lo,docker"}
    assert nodejudge.judge(["n1", "n2"], {"n1": answer("n1", 0, env=excluded),
                                          "n2": answer("n2", 1, env=excluded)}, 0)["ok"]


def test_the_all_reduce_blames_the_node_that_never_reached_the_store():
    failed = {"ok": False, "error": "DistStoreError: timed out", "missing": [2]}
    answers = {"n1": answer("n1", 0, allreduce=failed), "n2": answer("n2", 1, allreduce=failed),
               "n3": answer("n3", 2, allreduce={"ok": False, "error": "connect: timed out", "missing": []})}
    v = nodejudge.judge(["n1", "n2", "n3"], answers, 0)
    assert list(v["bad"]) == ["n3"] and "never reached the all-reduce's store on n1" in v["bad"]["n3"][0]
    answers["n1"]["allreduce"] = {"ok": False, "error": "gloo: connection reset", "missing": []}
    v = nodejudge.judge(["n1", "n2", "n3"], answers, 0)
    assert v["bad"] == {} and v["failures"][0].startswith("the all-reduce across the nodes failed (n1: gloo")


def test_main_writes_the_verdict_and_exits_75_naming_the_node(tmp_path):
    (tmp_path / "n1.json").write_text(json.dumps(answer("n1", 0)))
    (tmp_path / "n2.json").write_text(json.dumps(answer("n2", 1, gpus=2)))
    r = subprocess.run([sys.executable, nodejudge.__file__, "--dir", str(tmp_path), "--nodes", "n1 n2", "--gpus",
                        "4", "--started", "1", "--on-bad", "exclude"], capture_output=True, text=True)
    assert r.returncode == nodejudge.PREFLIGHT_EXIT == 75
    assert r.stdout.splitlines()[0] == ("cockpit: preflight: node n2: 2 GPUs visible (nvidia-smi ids 0,1), the job "
                                        "asks 4 per node")
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert verdict["on_bad"] == "exclude" and allocation.bad_nodes(verdict) == ["n2"]
    assert allocation.note(verdict).startswith("preflight in the allocation failed after ")
    assert "--exclude=n2" in allocation.hint(verdict, "42")


def test_interface_advice_from_the_nodes_answers():
    answers = {"n1": answer("n1", 0), "n2": answer("n2", 1, ip="10.0.0.2/24")}
    assert allocation.advice(answers) == ("interfaces: subnet 10.0.0.0/24 is on every node, under the same name: "
                                          "set NCCL_SOCKET_IFNAME=eth0, GLOO_SOCKET_IFNAME=eth0 (the job runs "
                                          "with neither set)")
    same = {"n1": answer("n1", 0), "n2": answer("n2", 1)}  # one machine twice (the test cluster): no network
    assert allocation.advice(same).startswith("interfaces: no IPv4 subnet is shared by every node")
    assert allocation.advice({"n1": answer("n1", 0)}) is None


def test_the_node_check_runs_here_as_one_node(tmp_path):
    """One node (no all-reduce, no torch import): facts only, written to <dir>/<node>.json and printed."""
    # PYTHONPATH: this checkout's cockpit.node.ifaces (shipped beside it as cockpit_ifaces in a run's hook/),
    # whatever cockpit the interpreter has installed, if any
    env = {"SLURMD_NODENAME": "here", "SLURM_NODEID": "0", "SLURM_NNODES": "1", "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, nodecheck.__file__, "--dir", str(tmp_path), "--master", "x", "--port", "1"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    written = json.loads((tmp_path / "here.json").read_text())
    assert written == json.loads(r.stdout.splitlines()[0])
    assert written["error"] == "nvidia-smi not found (no NVIDIA driver)" and written["allreduce"] is None
    assert any(i["loopback"] for i in written["interfaces"]) and written["python"].count(".") == 2


def test_the_job_file_switches(tmp_path):
    from cockpit.launch import dry_run_facts
    from cockpit.render import render
    from cockpit.spec.model import SpecError, parse_spec

    text = "name: j\nscript: t.py\nlauncher: slurm\nnodes: 2\nslurm: {%s}\n"
    on = parse_spec(text % "exclude_bad_nodes: true", "j.yaml")
    assert (on.slurm.preflight, on.slurm.exclude_bad_nodes) == (True, True)
    off = parse_spec(text % "preflight: false", "j.yaml")
    facts = dry_run_facts(off, str(tmp_path / "j.yaml"))
    assert "cockpit_nodecheck" not in render(off, facts, "sbatch")
    assert "--on-bad=exclude" in render(on, facts, "sbatch")
    try:
        parse_spec(text % "exclude_bad_nodes: sometimes", "j.yaml")
    except SpecError as exc:
        assert "exclude_bad_nodes" in str(exc)
    else:
        raise AssertionError("a non-boolean exclude_bad_nodes was accepted")
