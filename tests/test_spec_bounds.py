"""Hostile job files end at once, in bounded memory, with `file[:line:col]: field: what (hint: ...)`:
alias bombs, recursive aliases, tags, huge numbers and counts, huge grids, huge files, FIFOs, symlink loops;
host names and module names that would reach shell text are refused. (The hardening issue, items 6-8.)"""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc

import pytest
from helpers import cockpit_env, require_tool

from cockpit.render import Site, render
from cockpit.render.shell import comment, header
from cockpit.slurm.hostlist import HostlistError, expand
from cockpit.spec import jobfile
from cockpit.spec.model import SpecError, load_spec, parse_spec
from cockpit.spec.yamlpos import MAX_ALIASES, MAX_DEPTH, MAX_VALUES

BASE = "name: t\nscript: train.py\n"


def errors(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "job.yaml")
    return info.value.lines()


def one_error(text: str) -> str:
    lines = errors(text)
    assert len(lines) == 1, lines
    return lines[0]


def bounded(work, mb: float):
    """``work()``'s result, its peak allocation (tracemalloc) checked under ``mb`` MB: what was refused was
    never built. Memory, not a clock: the same figure on a busy machine."""
    tracemalloc.start()
    try:
        out = work()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < mb * 1e6, f"peak {peak / 1e6:.1f} MB"
    return out


def laughs(levels: int, width: int = 10) -> str:
    lines = [BASE.rstrip(), "args:", '  - &a0 "lol"']
    for i in range(1, levels + 1):
        lines.append(f"  - &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_billion_laughs_is_refused_before_anything_is_expanded():
    line = bounded(lambda: one_error(laughs(9)), 1)
    assert line.startswith("job.yaml:9:10: args[5][0]: more than 20000 values once its YAML aliases are expanded")
    assert "(hint: " in line


def test_aliases_that_stay_small_still_work():
    text = BASE + "launcher: ssh\nnodes: &n [a, b]\nnode_env: {a: &e {X: '1'}, b: *e}\n"
    assert parse_spec(text).node_env == (("a", (("X", "1"),)), ("b", (("X", "1"),)))


def test_alias_count_is_bounded():
    text = BASE + "x: &x 1\nargs: [" + ", ".join(["*x"] * (MAX_ALIASES + 1)) + "]\n"
    assert f"more than {MAX_ALIASES} YAML aliases" in one_error(text)


@pytest.mark.parametrize("text,where", [(BASE + "args: &x [*x]\n", "job.yaml:3:11: args[0]:"),
                                        (BASE + "env: &e {A: *e}\n", "job.yaml:3:13: env.A:")])
def test_recursive_alias_is_a_problem_not_a_recursion_error(text, where):
    line = one_error(text)
    assert line.startswith(where) and "recursive YAML alias" in line


def test_deep_nesting_is_bounded():
    text = BASE + "args: " + "[" * 5000 + "]" * 5000 + "\n"
    assert f"nested more than {MAX_DEPTH} levels deep" in one_error(text)


def test_too_many_values_without_aliases():
    text = BASE + "args: [" + ",".join(["1"] * (MAX_VALUES + 1)) + "]\n"
    assert f"more than {MAX_VALUES} values (hint:" in one_error(text)


@pytest.mark.parametrize("text,expect", [
    (BASE + "env:\n  !!python/name:os.system X: 1\n", "job.yaml:4:3: env: a key must be a plain name"),
    (BASE + "!!binary aGVsbG8=: 1\n", "job.yaml:3:1: a key must be a plain name"),
    (BASE + "? !!set {a}\n: 1\n", "job.yaml:3:3: a key must be a plain name"),
    (BASE + "env:\n  X: !!binary aGVsbG8=\n", "job.yaml:4:6: env.X: cannot read this value: !!binary data"),
    (BASE + "args: [!!python/object:os.system x]\n", "job.yaml:3:8: args[0]: cannot read this value"),
    (BASE + "seed: " + "9" * 5000 + "\n", "job.yaml:3:7: seed: cannot read this value: a number longer than 100"),
])
def test_tags_and_unreadable_values_are_positioned_problems(text, expect):
    assert one_error(text).startswith(expect)


def test_a_timestamp_stays_the_text_that_was_written():
    assert parse_spec(BASE + "args: [--since, 2001-12-14t21:59:43.10-05:00]\n").args == (
        "--since", "2001-12-14t21:59:43.10-05:00")


@pytest.mark.parametrize("field,value,expect", [
    ("gpus", "1000000000", "gpus: 1000000000 is not a GPU count (hint: gpus: 1..1024"),
    ("gpus", "1" * 29, f"gpus: {'1' * 29} is not a GPU count"),
    ("gpus", "[0, 1024]", "gpus[1]: 1024 is not a GPU id (hint: ids are nvidia-smi indices: 0, 1, ... up to 1023)"),
    ("procs_per_node", "100000", "procs_per_node: 100000 is out of range (hint: use 1..1024, or auto)"),
    ("seed", "4294967296", "seed: must be at most 4294967295, got 4294967296"),
    ("max_restarts", "10000000", "max_restarts: must be at most 1000"),
    ("master_port", "1" * 40, "master_port: " + "1" * 40 + " is out of range"),
])
def test_numbers_are_bounded(field, value, expect):
    assert expect in bounded(lambda: one_error(BASE + f"{field}: {value}\n"), 1)


@pytest.mark.parametrize("nodes,expect", [
    ("1000000000", "nodes: 1000000000 is out of range (hint: nodes: 1..100000)"),
    ("gpu[0-99999999999]", "nodes: 'gpu[0-99999999999]' names 100000000000 hosts, more than 100000"),
    ("gpu[0-" + "9" * 5000 + "]", "is not a hostlist"),
])
def test_slurm_node_counts_are_bounded(nodes, expect):
    assert expect in one_error(BASE + f"launcher: slurm\nnodes: {nodes}\n")


def test_hostlist_expansion_is_bounded_with_a_clear_error():
    with pytest.raises(HostlistError, match="names more than 100000 hosts"):
        expand("gpu[0-99999999999]")
    with pytest.raises(HostlistError, match="at most 12 digits"):
        expand("gpu[0-" + "9" * 5000 + "]")


def test_sweep_trials_are_counted_not_built():
    grid = "".join(f"    p{i}: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n" for i in range(8))
    line = bounded(lambda: one_error(BASE + "sweep:\n  grid:\n" + grid), 1)
    assert line == ("job.yaml:4:3: sweep.grid: 10 x 10 x 10 x 10 x 10 x 10 x 10 x 10 = 100000000 trials, more "
                    "than 10000 (hint: sweep fewer values, or split the sweep into several jobs)")
    spec = parse_spec(BASE + "sweep:\n  grid:\n    a: [1, 2, 3]\n    b: [x, y]\n")
    assert spec.sweep.count() == len(spec.sweep.trials()) == 6


def test_job_text_over_the_size_limit_is_refused_at_once():
    text = BASE + "args:\n" + "  - " + "x" * 60 + "\n" * 1 + ("  - " + "x" * 60 + "\n") * 20_000
    assert "too large for a job file (at most 1048576)" in bounded(lambda: one_error(text), 4)  # 1.3 MB of text


def test_job_files_too_large_fifo_symlink_loop(tmp_path):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as f:
        f.truncate(50 * 1024 * 1024)  # sparse: 50 MB that costs nothing to make
    with pytest.raises(SpecError, match="52428800 bytes is too large for a job file"):
        load_spec(big)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(SpecError, match="not a regular file"):
        load_spec(fifo)  # would block forever if opened for a blocking read
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
    with pytest.raises(OSError, match="symbolic links"):
        jobfile.read_text(tmp_path / "a.yaml")
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(SpecError, match="not UTF-8 text"):
        load_spec(bad)


# -- item 7: names that reach shell text ---------------------------------------------------------------------

SSH = BASE + "launcher: ssh\nnodes: [{}]\n"


@pytest.mark.parametrize("host", ["node1", "gpu-node1.example.com", "alice@node1", "node1:2222", "alice@node1:22",
                                  "10.0.0.5", "[fe80::1]", "[2001:db8::5]:2222", "bob@[::1]", "[fe80::1%eth0]"])
def test_good_host_names(host):
    assert parse_spec(SSH.format(f'"{host}"')).hosts == (host,)


@pytest.mark.parametrize("host", ["a\\ntouch /tmp/x #", "a b", "$(id)", "-oProxyCommand=id", "a;b", "node1:0",
                                  "node1:70000", "a`b`", "fe80::1", "[zz::1]", "a\\u2028b", "@node", "a'b"])
def test_bad_host_names_are_refused(host):
    line = one_error(SSH.format(f'"{host}"'))
    assert line.startswith("job.yaml:4:9: nodes[0]: ") and "is not a host name (hint: host, user@host" in line


@pytest.mark.parametrize("module", ["cuda; touch /tmp/x", "cuda\\nid", "$(id)", "cuda 12", "a|b", "`id`", "-x"])
def test_bad_module_names_are_refused(module):
    line = one_error(BASE + f'launcher: slurm\nslurm:\n  modules: ["{module}"]\n')
    assert line.startswith("job.yaml:5:13: slurm.modules[0]: ") and "is not a module name" in line


def test_good_module_names():
    spec = parse_spec(BASE + "launcher: slurm\nslurm:\n  modules: [cuda/12.1, gcc@12.2, python/3.11-gcc, nccl+ib]\n")
    assert spec.slurm.modules == ("cuda/12.1", "gcc@12.2", "python/3.11-gcc", "nccl+ib")


def test_comments_in_generated_shell_cannot_be_ended_by_a_value():
    assert comment("job a\ntouch /tmp/x\r\x1b[2J\u2028b") == "# job a\\ntouch /tmp/x\\r\\x1b[2J\\u2028b"
    assert header("x\ny") == ["#!/usr/bin/env bash", "# x\\ny", "set -euo pipefail"]
    spec = parse_spec(BASE + "launcher: ssh\nnodes: [node1, node2]\n")
    facts = Site(run_dir="/r", run_id="r1", workdir="/w", python="python3",
                  node_names=("node1", "n\nid >/tmp/pwned"))
    text = render(spec, facts, "torchrun")
    assert all(not line.startswith("id ") for line in text.splitlines())
    assert "# ===== node 1: n\\nid >/tmp/pwned =====" in text
    node1 = render(spec, facts, "torchrun", 1)
    assert node1.splitlines()[1].startswith("# cockpit: job \"t\", torchrun, node 1 of 2 (n\\nid >/tmp/pwned)")
    r = subprocess.run([require_tool("shellcheck"), "-s", "bash", "-"], input=node1, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout


# -- item 8: values that would silently mean something else ----------------------------------------------------

def test_args_as_one_string_is_refused_with_the_list_to_write():
    assert one_error(BASE + 'args: "--epochs 1 --lr 0.1"\n') == (
        "job.yaml:3:1: args: '--epochs 1 --lr 0.1' is one string, so the script would get it as a single "
        "argument (hint: give a list, one argument per item: [--epochs, 1, --lr, 0.1])")
    assert parse_spec(BASE + "args: --verbose\n").args == ("--verbose",)  # one word is one argument


def test_binary_env_value_is_refused():
    line = one_error(BASE + "env:\n  X: !!binary aGVsbG8=\n")
    assert line.startswith("job.yaml:4:6: env.X: cannot read this value: !!binary data is not allowed (hint:")


# -- the same, through the real CLI -------------------------------------------------------------------------------

def cockpit(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=30, env=cockpit_env(COCKPIT_RUNS_DIR=str(cwd / "runs")))


def test_validate_checks_every_file_like_a_linter(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text(BASE)
    (tmp_path / "train.py").write_text("")  # a good local job's script exists (validate checks it)
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "bad.yaml").write_text(BASE + "gpus: 1000000000\n")
    r = cockpit("validate", "bad.yaml", "good.yaml", "fifo.yaml", "loop.yaml", "missing.yaml", "good.yaml",
                cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stdout == "good.yaml: ok\ngood.yaml: ok\n"
    assert r.stderr.splitlines() == [
        "bad.yaml:3:1: gpus: 1000000000 is not a GPU count (hint: gpus: 1..1024, or gpus: none for CPU)",
        "fifo.yaml: not a regular file (a pipe, device or socket) (hint: give the path of a .yaml file)",
        "cockpit: loop.yaml: cannot open it: Too many levels of symbolic links (hint: check the path and its "
        "permissions)",
        "cockpit: missing.yaml: no such job file (hint: try jobs/demo.yaml)"]
    assert cockpit("validate", "good.yaml", "good.yaml", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("runs_dir", ["/proc/cockpit-runs", "afile/runs"])
def test_run_into_a_runs_dir_that_cannot_be_written(tmp_path, runs_dir):
    (tmp_path / "afile").write_text("")
    (tmp_path / "job.yaml").write_text(BASE)
    r = cockpit("run", "job.yaml", "--runs-dir", runs_dir, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"cockpit: job.yaml: runs directory {runs_dir}: cannot create a run directory "
                               "there: ") and "(hint: pass --runs-dir DIR where you can write" in r.stderr
