"""The job file's recover: block: defaults, good values, and each bad value refused at its own line with a hint."""

from __future__ import annotations

import subprocess

import pytest
from helpers import require_tool

from cockpit.spec.model import SpecError, parse_spec
from cockpit.spec.recover import RecoverSpec

BASE = "name: t\nscript: train.py\n"


def errors(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "job.yaml")
    return info.value.lines()


def test_off_by_default_and_on_both_triggers_when_given():
    assert parse_spec(BASE).recover == RecoverSpec() and not parse_spec(BASE).recover.enabled
    spec = parse_spec(BASE + "recover:\n  attempts: 3\n")
    assert (spec.recover.attempts, spec.recover.on, spec.recover.apply_fixes) == (3, ("failure", "stall"), False)
    assert spec.recover.to_dict() == {"attempts": 3, "on": ["failure", "stall"], "apply_fixes": False,
                                      "spare_nodes": [], "min_nodes": None}


def test_on_is_a_key_not_yaml_true():
    # YAML 1.1 reads a bare `on` as the boolean true; as a key it is the field's name
    spec = parse_spec(BASE + "recover:\n  attempts: 1\n  on: [stall]\n  apply_fixes: true\n")
    assert spec.recover.on == ("stall",) and spec.recover.apply_fixes


@pytest.mark.parametrize("block, where, words", [
    ("recover:\n  attempts: 2\n  on: [failure, stal]\n", "job.yaml:5:17: recover.on[1]:", "'stal' is not one of"),
    ("recover:\n  attempts: 2\n  on: [failure, failure]\n", "job.yaml:5:17: recover.on[1]:", "listed twice"),
    ("recover:\n  attempts: 2\n  on: []\n", "job.yaml:5:3: recover.on:", "an empty list never relaunches"),
    ("recover:\n  attempts: -1\n", "job.yaml:4:3: recover.attempts:", "from 0 to 100, got -1"),
    ("recover:\n  attempts: 101\n", "job.yaml:4:3: recover.attempts:", "from 0 to 100, got 101"),
        ("recover:\n  attemps: 1\n", "job.yaml:4:3: recover.attemps:", "did you mean 'attempts'?"),
    ("recover: 3\n", "job.yaml:3:1: recover:", "expected a mapping"),
    ("recover:\n  attempts: 1\n  spare_nodes: [n9]\n", "job.yaml:5:3: recover.spare_nodes:", "ssh job"),
    ("launcher: ssh\nnodes: [a, b]\nrecover:\n  attempts: 1\n  spare_nodes: [c, b]\n",
     "job.yaml:7:20: recover.spare_nodes[1]:", "b is one of the job's nodes already"),
    ("launcher: ssh\nnodes: [a, b]\nrecover:\n  attempts: 1\n  spare_nodes: [c, c]\n",
     "job.yaml:7:20: recover.spare_nodes[1]:", "c is listed twice"),
    ("launcher: ssh\nnodes: [a, b]\nrecover:\n  attempts: 1\n  min_nodes: 3\n",
     "job.yaml:7:3: recover.min_nodes:", "from 1 to 2 (the job's nodes), got 3"),
    ("launcher: ssh\nnodes: [a, b]\nrecover:\n  attempts: 1\n  min_nodes: 0\n",
     "job.yaml:7:3: recover.min_nodes:", "from 1 to 2 (the job's nodes), got 0"),
    ("launcher: ssh\nnodes: [a, b]\nrecover:\n  attempts: 1\n  min_nodes: one\n",
     "job.yaml:7:3: recover.min_nodes:", "got 'one'"),
    ("launcher: ssh\nnodes: [a, b]\nrecover:\n  attempts: 1\n  min_nodes: true\n",
     "job.yaml:7:3: recover.min_nodes:", "got True"),
    ("recover:\n  attempts: 1\n  min_nodes: 1\n", "job.yaml:5:3: recover.min_nodes:", "this job is local"),
    ("sweep: {grid: {lr: [1, 2]}}\nrecover:\n  attempts: 1\n", "job.yaml:5:3: recover.attempts:",
     "a sweep's trials cannot relaunch"),
])
def test_bad_values_are_refused_where_they_are(block, where, words):
    [line] = errors(BASE + block)
    assert line.startswith(where) and words in line and "(hint: " in line, line


def test_a_slurm_job_may_recover_and_its_script_keeps_the_attempt_number():
    from cockpit.launch import dry_run_facts
    from cockpit.render import render

    spec = parse_spec(BASE + "launcher: slurm\nrecover:\n  attempts: 2\n", "job.yaml")
    assert spec.recover.attempts == 2
    script = render(spec, dry_run_facts(spec, "job.yaml"), "sbatch")
    assert 'export COCKPIT_ATTEMPT="${COCKPIT_ATTEMPT:-0}"' in script.splitlines()
    plain = render(parse_spec(BASE + "launcher: slurm\n", "job.yaml"), dry_run_facts(spec, "job.yaml"), "sbatch")
    # without recover: the first start has none (as any run's); a start Slurm requeued is an attempt all the same
    assert 'export COCKPIT_ATTEMPT="${COCKPIT_ATTEMPT:-0}"' not in plain.splitlines()
    assert "  export COCKPIT_ATTEMPT=$attempt" in plain.splitlines()
    r = subprocess.run([require_tool("shellcheck"), "-s", "bash", "-"], input=script, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout


def test_a_bad_apply_fixes_is_refused_at_its_line():
    [line] = errors(BASE + "recover:\n  attempts: 1\n  apply_fixes: maybe\n")
    assert line.startswith("job.yaml:5:3: recover.apply_fixes: expected true or false"), line


def test_spare_nodes_of_an_ssh_job_are_hosts_outside_its_nodes():
    job = BASE + "launcher: ssh\nnodes: [a, b]\nrecover:\n  spare_nodes: [c, a, 'x y']\n"
    lines = errors(job)
    assert any("recover.spare_nodes[1]: a is one of the job's nodes already" in line for line in lines), lines
    assert any("recover.spare_nodes[2]: 'x y' is not a host name" in line for line in lines), lines
    spec = parse_spec(BASE + "launcher: ssh\nnodes: [a, b]\nrecover:\n  spare_nodes: [c]\n")
    assert spec.recover.spare_nodes == ("c",)


def test_a_trigger_the_job_turns_off_is_a_warning():
    spec = parse_spec(BASE + "stall_after: 0\nmax_restarts: 2\nrecover:\n  attempts: 1\n", "job.yaml")
    said = [w.format("job.yaml") for w in spec.warnings]
    assert any("recover.on: stall_after: 0 turns the stall watch off" in w for w in said), said
    assert any("max_restarts: torchrun restarts the ranks itself" in w for w in said), said


def test_a_spare_may_have_its_own_node_env_and_a_stranger_may_not():
    base = "launcher: ssh\nnodes: [a, b]\nrecover:\n  attempts: 1\n  spare_nodes: [c]\n"
    spec = parse_spec(BASE + base + "node_env: {c: {GLOO_SOCKET_IFNAME: ens5}}\n", "job.yaml")
    assert spec.env_for("c")["GLOO_SOCKET_IFNAME"] == "ens5"
    [line] = errors(BASE + base + "node_env: {d: {X: '1'}}\n")
    assert line.startswith("job.yaml:8:") and "'d' is not one of the job's nodes" in line, line

