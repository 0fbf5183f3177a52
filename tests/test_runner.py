"""`runner:` — torchrun (default) or the legacy `python -m torch.distributed.launch`: the spec's refusals, the
node script each runner gets, and a real run of the demo under the legacy launcher (torch 2.13 still ships it)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import REPO, cockpit_env

from cockpit.launch.ssh.plan import NodePlan, SSHPlan, node_scripts
from cockpit.render import Site, default_kind, render
from cockpit.run.store import list_runs
from cockpit.spec.model import SpecError, parse_spec

BASE = "name: t\nscript: train.py\n"
LEGACY = "runner: torch.distributed.launch\n"


def problems(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "job.yaml")
    return info.value.lines()


def test_default_is_torchrun_and_the_legacy_runner_renders_the_launch_form():
    assert parse_spec(BASE).runner == "torchrun" and default_kind(parse_spec(BASE)) == "torchrun"
    spec = parse_spec(BASE + LEGACY + "launcher: ssh\nnodes: [a, b]\n")
    assert default_kind(spec) == "launch"
    text = render(spec, Site(run_dir="/r", run_id="R", workdir="/w", node_names=("a", "b")), "launch", 1)
    # Underscore flags: the only spelling torch < 1.10 parses; --use_env, which --no_python requires.
    assert "-m torch.distributed.launch \\\n  --use_env \\\n" in text
    for flag in ("--nproc_per_node=2", "--node_rank=1", "--master_addr=127.0.0.1", "--no_python"):
        assert flag in text
    assert "--max" not in text and "rdzv" not in text


def test_the_ssh_launcher_gives_every_node_the_legacy_script():
    spec = parse_spec(BASE + LEGACY + "launcher: ssh\nnodes: [a, b]\n")
    nodes = tuple(NodePlan(h, i, f"/runs/{h}", shared=False) for i, h in enumerate(("a", "b")))
    plan = SSHPlan("R", "python3", "10.0.0.1", 29555, nodes, nproc=2)
    scripts = node_scripts(spec, Site(run_dir="/r", run_id="R", workdir="/w", node_names=("a", "b")), plan)
    for rank, text in scripts.items():
        assert "-m torch.distributed.launch" in text and f"--node_rank={rank}" in text
        assert "--master_addr=10.0.0.1" in text and "--master_port=29555" in text


def test_slurm_refuses_a_runner_with_a_hint():
    [line] = problems(BASE + "launcher: slurm\n" + LEGACY)
    assert line.startswith("job.yaml:4:1: runner: under Slurm, srun starts one task per rank itself")
    assert "(hint: drop runner:" in line


def test_unknown_runner_names_the_choices():
    [line] = problems(BASE + "runner: mpirun\n")
    assert line.startswith("job.yaml:3:1: runner: 'mpirun' is not one of torchrun | torch.distributed.launch")


@pytest.mark.parametrize(("extra", "where", "what"), [
    ("rdzv: c10d\n", "rdzv", "no c10d rendezvous"),
    ("max_restarts: 3\n", "max_restarts", "cannot restart workers"),
    ("gpus: all\n", "gpus", "needs a number of processes per node"),
    ("backend: dp\n", "runner", "backend dp runs one process"),
])
def test_legacy_launcher_refuses_what_old_torch_cannot_do(extra, where, what):
    [line] = problems(BASE + LEGACY + extra)
    assert f": {where}: " in line and what in line and "(hint: " in line
    assert parse_spec(BASE + LEGACY + "gpus: all\nprocs_per_node: 4\n").nprocs == 4  # a count is enough


def test_cockpit_render_prints_the_legacy_form_for_the_example_job():
    r = subprocess.run([sys.executable, "-m", "cockpit", "render", "jobs/demo-launch.yaml"], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "torch.distributed.launch" in r.stdout and "torch.distributed.run" not in r.stdout


@pytest.mark.slow
def test_demo_runs_for_real_under_the_legacy_launcher(tmp_path):
    env = cockpit_env(COCKPIT_RUNS_DIR=str(tmp_path), NO_COLOR="1")
    r = subprocess.run([sys.executable, "-m", "cockpit", "run", "jobs/demo-launch.yaml", "--",
                        "--epochs", "1", "--steps-per-epoch", "20"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    [(run_dir, status)] = list_runs(tmp_path)
    assert status.state == "succeeded" and status.exit_code == 0
    host = status.hosts[0]
    assert "-m torch.distributed.launch" in (run_dir / "commands" / "node-0.sh").read_text()
    for rank in (0, 1):
        log = (run_dir / "logs" / f"rank-{rank}.{host}.log").read_text()
        assert f"[cockpit] start rank={rank} world=2 local_rank={rank}" in log  # LOCAL_RANK from --use_env
        assert f"[cockpit] finish rank={rank} step=20 exit_code=0" in log
        # what the launcher itself prints (torch 2.13's deprecation warning names its module) goes to the
        # launcher's own log, never into a rank's (whatever torch's wording of it)
        assert "torch.distributed.launch" not in log
    assert (run_dir / "logs" / f"agent.{host}.log").is_file()


@pytest.mark.parametrize(("extra", "where", "what"), [
    ("rdzv: c10d\n", "rdzv", "no c10d rendezvous"),
    ("max_restarts: 2\n", "max_restarts", "nothing restarts the ranks"),
    ("gpus: all\n", "procs_per_node", "needs the number of ranks the script spawns"),
    ("backend: dp\n", "runner", "backend dp runs one process"),
])
def test_spawn_refuses_what_a_spawning_script_cannot_take(extra, where, what):
    [line] = problems(BASE + "runner: spawn\n" + extra)
    assert f": {where}: " in line and what in line and "(hint: " in line
    spec = parse_spec(BASE + "runner: spawn\nlauncher: slurm\ngpus: 4\n")  # Slurm runs it: one task per node
    assert spec.nprocs == 4 and default_kind(spec) == "sbatch"
