"""The Slurm preflight against the real test cluster: its sinfo answer is the recorded fixture
(tests/fixtures/sinfo/test-cluster.txt), a job it can run passes, and one asking an unknown partition or
more GPUs than a node has is refused before sbatch, with doctor's lines."""

from __future__ import annotations

import subprocess

import pytest
from helpers import REPO

from cockpit.launch.site import PreflightFailed
from cockpit.launch.slurm import facts as slurm_facts
from cockpit.preflight.checks import failed
from cockpit.slurm.sinfo import SINFO_ARGS, parse_sinfo
from cockpit.spec.model import load_spec

RECORDED = REPO / "tests" / "fixtures" / "sinfo" / "test-cluster.txt"


def test_sinfo_answers_what_the_fixture_recorded(slurm_cluster):
    live = slurm_cluster.run(*SINFO_ARGS).stdout

    def without_state(text):  # other tests' jobs may hold the nodes: idle, mix, alloc
        return [(n.name, n.gpus, n.partition, n.default) for n in parse_sinfo(text)]
    assert without_state(live) == without_state(RECORDED.read_text()), f"re-record {RECORDED}:\n{live}"


def test_a_job_the_cluster_can_run_passes_and_a_wrong_one_is_refused(slurm_cluster, tmp_path):
    def run(argv, **kw):
        return subprocess.run(argv, env=slurm_cluster.env, **kw)

    job = REPO / "jobs" / "slurm.yaml"
    assert failed(slurm_facts.check(load_spec(job), str(job), run)) == []
    bad = tmp_path / "bad.yaml"
    bad.write_text(job.read_text().replace("partition: gpu", "partition: nope"))
    (tmp_path / "demo.py").write_text("")
    with pytest.raises(PreflightFailed, match="nope is not a partition of this cluster"):
        slurm_facts.check(load_spec(bad), str(bad), run)
