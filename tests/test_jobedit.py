"""The job-file text edits behind `cockpit diagnose --fix`: one key set, removed or appended, every comment and
the order of the rest kept, and the result exactly the intended values (else EditError, never a guess)."""

from __future__ import annotations

import pytest
import yaml

from cockpit.spec.jobedit import Change, EditError, apply
from cockpit.spec.model import parse_spec

JOB = """\
# my job: keep this comment
name: exp   # the name
script: train.py
launcher: slurm
env:
  NCCL_DEBUG: INFO        # noisy
  GLOO_SOCKET_IFNAME: nosuch0
slurm:
  partition: gpu   # the big one
  extra:
    - --constraint=a100
# trailing comment
"""


def test_replacing_a_key_already_present_keeps_every_comment():
    new = apply(JOB, [Change(("env", "GLOO_SOCKET_IFNAME"), "eth0")])
    assert new == JOB.replace("nosuch0", "eth0")
    parse_spec(new)


def test_adding_to_nested_env_and_slurm_sections_inserts_one_line_each_at_their_indent():
    new = apply(JOB, [Change(("env", "NCCL_P2P_DISABLE"), "1"), Change(("slurm", "mem"), "64G"),
                      Change(("slurm", "extra"), "--exclude=n2", append=True)])
    added = [line for line in new.splitlines() if line not in JOB.splitlines()]
    assert added == ['  NCCL_P2P_DISABLE: "1"', "    - --exclude=n2", "  mem: 64G"]  # mem after the list
    assert [line for line in JOB.splitlines() if line not in new.splitlines()] == []
    data = yaml.safe_load(new)
    assert data["env"]["NCCL_P2P_DISABLE"] == "1" and data["slurm"]["mem"] == "64G"
    assert data["slurm"]["extra"] == ["--constraint=a100", "--exclude=n2"]
    parse_spec(new)


def test_a_job_without_env_gets_an_env_section_and_a_second_exclude_replaces_the_first():
    text = "name: exp  # c\nscript: t.py\nlauncher: slurm\nslurm: {extra: [--exclude=n1]}\n"
    new = apply(text, [Change(("env", "NCCL_SOCKET_IFNAME"), "^lo,docker"),
                       Change(("slurm", "extra"), "--exclude=n1,n2", append=True)])
    assert new.startswith("name: exp  # c\n")
    data = yaml.safe_load(new)
    assert data["env"] == {"NCCL_SOCKET_IFNAME": "^lo,docker"}
    assert data["slurm"]["extra"] == ["--exclude=n1,n2"]
    parse_spec(new)


def test_node_env_is_created_nested_and_removing_the_last_env_key_leaves_an_empty_mapping():
    text = "name: exp\nscript: t.py\nlauncher: ssh\nnodes: [a, b]\nenv:\n  GLOO_SOCKET_IFNAME: eth0 # x\n"
    new = apply(text, [Change(("node_env", "b", "GLOO_SOCKET_IFNAME"), "ens5"),
                       Change(("env", "GLOO_SOCKET_IFNAME"), None)])
    data = yaml.safe_load(new)
    assert data["env"] == {} and data["node_env"] == {"b": {"GLOO_SOCKET_IFNAME": "ens5"}}
    parse_spec(new)


def test_values_that_yaml_would_read_otherwise_are_quoted():
    new = apply("name: exp\nscript: t.py\nenv: {A: b}\n", [Change(("env", "X"), "yes"), Change(("env", "Y"), "a: b")])
    assert yaml.safe_load(new)["env"] == {"A": "b", "X": "yes", "Y": "a: b"}


@pytest.mark.parametrize("text,change", [
    ("name: exp\nenv: |\n  A=b\n", Change(("env", "X"), "1")),  # env is a string here
    ("name: exp\nenv: {A: b,\n  C: d}\n", Change(("env", "X"), "1")),  # a flow mapping over two lines
    ("name: exp\nslurm:\n  time: >\n    10:00\n", Change(("slurm", "time"), "20:00")),  # a folded scalar
])
def test_an_edit_that_cannot_be_made_safely_is_refused(text, change):
    with pytest.raises(EditError):
        apply(text, [change])
