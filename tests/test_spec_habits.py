"""Habits carried over from other tools that a job file should catch: Lightning's string form of `gpus:`, and
interface variables spelt in ways torch and NCCL never read (seed 004's GLOO_IFACE)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import REPO

from cockpit.spec.model import SpecError, parse_spec

BASE = "name: t\nscript: train.py\n"


def one_error(text: str) -> str:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "job.yaml")
    [line] = info.value.lines()
    return line


@pytest.mark.parametrize(("value", "ids"), [('"0, 1"', (0, 1)), ('"0,1"', (0, 1)), ("0,1", (0, 1)),
                                            ('"1,"', (1,)), ('" 3 , 1 "', (3, 1))])
def test_lightning_string_of_ids_is_gpu_ids(value, ids):
    spec = parse_spec(BASE + f"gpus: {value}\n")
    assert spec.gpu_ids == ids and spec.gpus_per_node == len(ids) and spec.nprocs == len(ids)


def test_a_lone_string_is_refused_with_both_meanings():
    line = one_error(BASE + 'gpus: "2"\n')
    assert line.startswith("job.yaml:3:1: gpus: '2' as a string is ambiguous")
    assert "(hint: gpus: 2 for 2 GPUs (ids from 0), or gpus: [2] for the GPU with id 2)" in line
    assert parse_spec(BASE + "gpus: 2\n").gpu_ids == (0, 1) and parse_spec(BASE + "gpus: [2]\n").gpu_ids == (2,)


def test_lightning_minus_one_points_to_all():
    for value in ("-1", '"-1"'):
        line = one_error(BASE + f"gpus: {value}\n")
        assert line.startswith("job.yaml:3:1: gpus: ") and line.endswith("(hint: gpus: all)")


def test_string_ids_keep_the_list_rules():
    assert "GPU 0 is listed twice" in one_error(BASE + 'gpus: "0,0"\n')
    assert "is not a GPU selection" in one_error(BASE + 'gpus: "0,x"\n')
    line = one_error(BASE + 'launcher: slurm\ngpus: "0,1"\n')
    assert "GPU ids are assigned by the scheduler" in line and "gpus: 2" in line


@pytest.mark.parametrize(("name", "meant"), [("GLOO_IFACE", "GLOO_SOCKET_IFNAME"),
                                             ("GLOO_SOCKET_IFACE", "GLOO_SOCKET_IFNAME"),
                                             ("NCCL_SOCKET_IFACE", "NCCL_SOCKET_IFNAME"),
                                             ("NCCL_IFNAME", "NCCL_SOCKET_IFNAME"),
                                             ("NCCL_SOCKET_INTERFACE", "NCCL_SOCKET_IFNAME")])
def test_interface_names_torch_never_reads_warn_and_name_the_real_one(name, meant):
    spec = parse_spec(BASE + f"env:\n  NCCL_DEBUG: INFO\n  {name}: eth0\n", "job.yaml")
    assert spec.env_dict[name] == "eth0"  # still valid, still passed on: a warning, not a refusal
    [warning] = spec.warnings
    assert warning.format("job.yaml") == (f"job.yaml:5:3: warning: env.{name}: {name} is read by neither torch nor "
                                          f"NCCL, so it selects no interface (hint: rename it: {meant}: eth0)")


def test_real_interface_names_do_not_warn():
    env = "".join(f"  {n}: eth0\n" for n in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME",
                                             "NCCL_IB_HCA", "GLOO_DEVICE_TRANSPORT"))
    assert parse_spec(BASE + "env:\n" + env).warnings == ()


def test_node_env_warns_too():
    text = BASE + "launcher: ssh\nnodes: [a, b]\nnode_env:\n  b: {GLOO_IFACE: ens5}\n"
    [warning] = parse_spec(text, "job.yaml").warnings
    assert warning.path == "node_env.b.GLOO_IFACE" and warning.line == 6


def test_validate_prints_the_warning_and_still_says_ok(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(BASE + "env:\n  GLOO_IFACE: lo\n")
    (tmp_path / "train.py").write_text("")  # validate checks that the script exists
    r = subprocess.run([sys.executable, "-m", "cockpit", "validate", str(job)], cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == f"{job}: ok\n"
    assert r.stderr == (f"{job}:4:3: warning: env.GLOO_IFACE: GLOO_IFACE is read by neither torch nor NCCL, so it "
                        "selects no interface (hint: rename it: GLOO_SOCKET_IFNAME: lo)\n")


@pytest.mark.parametrize("name", ["bash", "interactive"])
def test_a_slurm_job_named_like_an_interactive_session_is_warned(name):
    """Lightning's SLURMEnvironment steps aside for job names bash / interactive and spawns its own processes
    in every srun task: a job that still runs, wrongly."""
    [warning] = parse_spec(f"name: {name}\nscript: train.py\nlauncher: slurm\n", "job.yaml").warnings
    assert warning.format("job.yaml").startswith(f"job.yaml:1:1: warning: name: Lightning takes a Slurm job named "
                                                 f"'{name}' for an interactive session")
    assert parse_spec(f"name: {name}\nscript: train.py\n").warnings == ()  # torchrun: Lightning ignores it


@pytest.mark.parametrize(("field", "value", "meant"), [("backend", "DDP", "ddp"), ("pg_backend", "NCCL", "nccl"),
                                                      ("precision", "BF16", "bf16")])
def test_a_choice_in_capitals_is_told_its_spelling(field, value, meant):
    line = one_error(BASE + f"{field}: {value}\n")
    assert line.startswith(f"job.yaml:3:1: {field}: {value!r} is not one of") and f"did you mean {meant!r}?" in line


@pytest.mark.parametrize("command", ["run", "validate", "render"])
def test_a_script_given_where_a_job_file_goes_is_told_what_a_job_file_is(tmp_path, command):
    script = tmp_path / "train.py"
    script.write_text("import torch\n")
    r = subprocess.run([sys.executable, "-m", "cockpit", command, str(script)], capture_output=True, text=True,
                       cwd=REPO, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"{script}: a Python script, not a job file" in r.stderr and "`script: train.py`" in r.stderr, r.stderr


def test_run_with_a_rank_the_job_will_not_have_is_refused_before_anything_starts(tmp_path):
    from helpers import cockpit_env

    runs = tmp_path / "runs"
    r = subprocess.run([sys.executable, "-m", "cockpit", "run", "jobs/demo.yaml", "--rank", "5"], capture_output=True,
                       text=True, cwd=REPO, env=cockpit_env(COCKPIT_RUNS_DIR=str(runs)), timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "jobs/demo.yaml: the job has ranks 0-1, not rank 5 (hint: leave out --rank" in r.stderr, r.stderr
    assert not runs.exists() or not any(runs.iterdir())  # nothing was launched


def test_script_arguments_without_the_double_dash_are_told_where_they_go(tmp_path):
    """`cockpit run job.yaml --epochs 1` (torchrun's habit: the script's arguments follow it): refused before
    anything starts, exit 2, with the command that works; other commands keep argparse's plain refusal."""
    from helpers import cockpit_env

    runs = tmp_path / "runs"
    env = cockpit_env(COCKPIT_RUNS_DIR=str(runs))
    r = subprocess.run([sys.executable, "-m", "cockpit", "run", "jobs/demo.yaml", "--epochs", "1"],
                       capture_output=True, text=True, cwd=REPO, env=env, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert ("unrecognized arguments: --epochs 1 (hint: arguments for the script go after --: "
            "cockpit run jobs/demo.yaml -- --epochs 1)") in r.stderr, r.stderr
    assert not runs.exists() or not any(runs.iterdir())  # nothing was launched
    r = subprocess.run([sys.executable, "-m", "cockpit", "ps", "--epochs", "1"], capture_output=True, text=True,
                       cwd=REPO, env=env, timeout=60)
    assert r.returncode == 2 and "unrecognized arguments: --epochs 1" in r.stderr and "hint" not in r.stderr


def test_the_tuis_options_work_without_the_word_tui(tmp_path):
    """`cockpit` alone is the TUI, so `cockpit --run last` is its --run: before, argparse took the run id for a
    command ("invalid choice: 'nosuch'"). A run that does not exist is refused before the UI starts."""
    from helpers import cockpit_env

    env = cockpit_env(COCKPIT_RUNS_DIR=str(tmp_path / "runs"))
    for argv in (["--run", "nosuch"], ["--run=nosuch"], ["tui", "--run", "nosuch"]):
        r = subprocess.run([sys.executable, "-m", "cockpit", *argv], capture_output=True, text=True, cwd=REPO,
                           env=env, timeout=60, stdin=subprocess.DEVNULL)
        assert r.returncode == 2 and "no run 'nosuch'" in r.stderr and "invalid choice" not in r.stderr, r.stderr


def test_a_command_without_its_run_says_how_to_name_one_and_options_before_a_command_say_where_they_go(tmp_path):
    """`cockpit logs` alone: argparse's "required: RUN" said nothing of `last` or `ps`; `cockpit --runs-dir X ps`
    (options first, a git/docker habit) took the options for the TUI's and said "unrecognized arguments: ps"."""
    from helpers import cockpit_env

    env = cockpit_env(COCKPIT_RUNS_DIR=str(tmp_path / "runs"))

    def cockpit(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cockpit", *argv], capture_output=True, text=True, cwd=REPO,
                              env=env, timeout=60, stdin=subprocess.DEVNULL)

    for command in ("logs", "plot", "diagnose", "attach"):
        r = cockpit(command)
        assert r.returncode == 2 and f"`last` names the newest: cockpit {command} last" in r.stderr, r.stderr
    r = cockpit("stop")  # stopping is explicit: no `last` offered
    assert r.returncode == 2 and "`cockpit ps` lists your runs)" in r.stderr and "last" not in r.stderr, r.stderr
    r = cockpit("--runs-dir", str(tmp_path / "runs"), "ps")
    assert r.returncode == 2 and f"cockpit ps --runs-dir {tmp_path / 'runs'}" in r.stderr, r.stderr


def test_torchruns_own_restarts_on_the_static_rendezvous_are_warned_of():
    """torch 2.13's static rendezvous keeps one store across torchrun's restarts, without the per-round prefix
    c10d's has: a plain torchrun of a 2-rank gloo script whose rank 1 fails once failed 1 restart in 3 here,
    rank 1 connecting to the old round's address (an ssh helper saw a restarted round hang in init_process_group)."""
    [w] = [w for w in parse_spec(BASE + "max_restarts: 2\n", "job.yaml").warnings if w.path == "max_restarts"]
    assert "static rendezvous" in w.message and "recover: attempts" in w.hint
    ssh = BASE + "launcher: ssh\nnodes: [a, b]\nmax_restarts: 2\n"
    [w] = [w for w in parse_spec(ssh, "job.yaml").warnings if w.path == "max_restarts"]
    assert w.hint.startswith("rdzv: c10d")
    c10d = parse_spec(ssh + "rdzv: c10d\n", "job.yaml").warnings
    assert not [w for w in c10d if w.path == "max_restarts"]
    assert not [w for w in parse_spec(BASE, "job.yaml").warnings if w.path == "max_restarts"]
