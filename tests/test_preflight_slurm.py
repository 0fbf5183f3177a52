"""The Slurm preflight (cockpit.preflight.slurm) over sinfo's answer: the test cluster's nodes
(tests/fixtures/sinfo/), and a real `cockpit run` of a Slurm job whose script is missing, refused here
before sbatch (no Slurm needed: sinfo's absence is a warning, the files are still checked)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

from helpers import REPO, cockpit_env

from cockpit.preflight import checks as preflight
from cockpit.preflight.local import LocalFacts
from cockpit.preflight.slurm import SlurmFacts, slurm_checks
from cockpit.slurm.sinfo import PartitionNode, node_names, parse_sinfo
from cockpit.spec.model import parse_spec

SINFO = (REPO / "tests" / "fixtures" / "sinfo" / "test-cluster.txt").read_text()
FILES = LocalFacts("/shared/jobs", True, True, "python3")


def job(text: str = "") -> object:
    return parse_spec("name: t\nscript: train.py\nlauncher: slurm\nnodes: 2\ngpus: 4\n"
                      f"slurm:\n  partition: gpu\n  gres_type: a100\n{text}")


def checks(spec, nodes: str = SINFO, files: LocalFacts = FILES):
    return slurm_checks(spec, SlurmFacts(files, tuple(parse_sinfo(nodes))))


def test_sinfo_lines_become_nodes_per_partition_with_their_gpus():
    assert parse_sinfo(SINFO)[0] == PartitionNode("n1", "gpu", "idle", (("a100", 4),), default=True,
                                                  gres="gpu:a100:4")
    [node] = parse_sinfo("g7|gpu:h100:8(S:0-1),gpu:2|mix|long\n")  # gres with sockets, and untyped
    assert node.gpus == (("h100", 8), ("", 2)) and not node.default


def test_a_node_in_two_partitions_is_in_both_and_named_once():
    """sinfo lists a node once per partition (recorded: tests/fixtures/sinfo/two-partitions.txt): each
    partition keeps all its nodes, and the node list names each node once."""
    text = (REPO / "tests" / "fixtures" / "sinfo" / "two-partitions.txt").read_text()
    nodes = parse_sinfo(text)
    assert {(n.partition, n.default): sorted(m.name for m in nodes if m.partition == n.partition)
            for n in nodes} == {("gpu", True): ["n1", "n2"], ("debug", False): ["n1", "n2"]}
    assert node_names(nodes) == ["n1", "n2"]
    on_debug = dataclasses.replace(job(), slurm=dataclasses.replace(job().slurm, partition="debug"))
    assert preflight.failed(checks(on_debug, text)) == []  # its 2 nodes with 4 a100 each


def test_the_test_clusters_job_passes():
    got = checks(job())
    assert preflight.failed(got) == []
    assert [c.line() for c in got if c.name in ("partition", "GPUs")] == [
        "ok    partition: gpu: 2 node(s)", "ok    GPUs: gpu:a100:4 on 2 node(s) of gpu"]


def test_unknown_partition_too_many_gpus_or_nodes_fail_with_what_the_cluster_has():
    spec = job()
    [bad] = preflight.failed(checks(dataclasses.replace(spec, slurm=dataclasses.replace(spec.slurm,
                                                                                        partition="debug"))))
    assert bad.detail == "debug is not a partition of this cluster (it has gpu)"
    [bad] = preflight.failed(checks(dataclasses.replace(spec, gpus_per_node=8)))
    assert bad.name == "GPUs" and "partition gpu has 0 such node(s) (gres there: a100:4)" in bad.detail
    nodes, gpus = preflight.failed(checks(dataclasses.replace(spec, num_nodes=3)))
    assert nodes.detail == "the job asks 3 nodes, partition gpu has 2" and gpus.name == "GPUs"
    [bad] = preflight.failed(checks(dataclasses.replace(job(), slurm=dataclasses.replace(job().slurm,
                                                                                         gres_type="h100"))))
    assert "gpu:h100:4" in bad.detail


def test_no_partition_given_takes_the_default_and_a_loopback_interface_fails():
    spec = dataclasses.replace(job(), slurm=dataclasses.replace(job().slurm, partition=None))
    assert preflight.failed(checks(spec)) == []
    [bad] = preflight.failed(checks(job("env:\n  NCCL_SOCKET_IFNAME: lo\n")))
    assert bad.name == "interface" and "loopback" in bad.detail
    assert preflight.failed(checks(job("env:\n  NCCL_SOCKET_IFNAME: ^lo,docker\n"))) == []


def test_a_missing_script_is_refused_at_once_without_slurm(tmp_path):
    """No sinfo on PATH here: the partition is a warning; the script is checked on the submit host."""
    job_file = tmp_path / "slurm.yaml"
    job_file.write_text((REPO / "jobs" / "slurm.yaml").read_text().replace("script: demo.py", "script: nope.py"))
    env = cockpit_env(COCKPIT_RUNS_DIR=str(tmp_path / "runs"), PATH=os.path.dirname(sys.executable))
    run = subprocess.run([sys.executable, "-m", "cockpit", "run", str(job_file)], capture_output=True, text=True,
                         cwd=REPO, env=env, timeout=60)
    doctor = subprocess.run([sys.executable, "-m", "cockpit", "doctor", str(job_file)], capture_output=True,
                            text=True, cwd=REPO, env=env, timeout=60)
    line = (f"FAIL  script: nope.py is missing in {tmp_path} on this submit host (hint: fix script: (relative to "
            "workdir:), or create the script; the nodes see the same path only on a shared filesystem)")
    assert run.returncode != 0 and "  " + line in run.stderr.splitlines() and "Traceback" not in run.stderr
    assert doctor.returncode == 1 and line in doctor.stdout.splitlines()
    assert "warn  partition: not checked" in doctor.stdout
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
