"""Shell metacharacters in every string field of a job never execute and arrive intact.

Each generated script runs in a real bash with harmless stubs on PATH: `python3` (which plays torchrun /
torch.distributed.launch, then the rank's interpreter), `srun`, `scontrol` and `module`. The stub records the
rank's argv and environment; a payload that escaped its quoting would create the marker file.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cockpit.render import Site, render
from cockpit.spec.model import parse_spec

MARK = "MARKER"
PAYLOADS = [f"$(touch {MARK})", f"`touch {MARK}`", f"; touch {MARK}", f"' ; touch {MARK} ; '",
            f'" ; touch {MARK} ; "', f"\ntouch {MARK}\n", f"&& touch {MARK}", f"| touch {MARK}",
            f"$(touch {MARK}", "${HOME}", "$HOME", "*", "~", "a b", "\\", "-n", "%t %N", "!!", "<x", ">x"]

# One line, no NUL: what validation lets through for single-line fields.
line_text = st.one_of(st.sampled_from([p for p in PAYLOADS if "\n" not in p]),
                      # YAML reads NEL and U+2028/9 as line breaks: a YAML matter, not a quoting one.
                      st.text(st.characters(codec="utf-8", exclude_characters="\0\n\r\x85\u2028\u2029",
                                            exclude_categories=("Cs",)),
                              min_size=1, max_size=20).filter(lambda s: s.strip()))
any_text = st.one_of(st.sampled_from(PAYLOADS), line_text)
# Module names are validated (no spaces, quotes or shell syntax: tests/test_spec_bounds.py); within that
# alphabet they must still arrive intact.
module_text = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.+/@:=-]{0,20}", fullmatch=True)

STUB_PYTHON = r"""#!/bin/bash
# Plays torchrun / torch.distributed.launch: skip its options, run the rank command with RANK=0. A local run
# starts it through cockpit's loopback program: `python -c PROGRAM -m torch.distributed.run ...`.
if [ "$1" = -c ] && [ "$3" = -m ]; then shift 2; fi
if [ "$1" = -m ] && { [ "$2" = torch.distributed.run ] || [ "$2" = torch.distributed.launch ]; }; then
  while [ $# -gt 0 ] && [ "$1" != --no-python ] && [ "$1" != --no_python ]; do shift; done
  shift; RANK=0 exec "$@"
fi
printf '%s\0' "$@" > "$STUB_OUT/argv"
env -0 > "$STUB_OUT/env"
"""
STUB_SRUN = r"""#!/bin/bash
while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do shift; done
SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NTASKS=1 SLURM_NTASKS_PER_NODE=1 SLURMD_NODENAME=n1 exec "$@"
"""
STUBS = {"python3": STUB_PYTHON, "srun": STUB_SRUN, "scontrol": "#!/bin/bash\necho n1\n",
         "module": "#!/bin/bash\nexit 0\n"}


def make_stubs(root: Path) -> Path:
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in STUBS.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def run_script(text: str, root: Path, extra_env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    out = root / "out"
    out.mkdir(exist_ok=True)
    for f in out.iterdir():
        f.unlink()
    script = root / "job.sh"
    script.write_text(text)
    env = {"PATH": f"{make_stubs(root)}:/usr/bin:/bin", "STUB_OUT": str(out), "HOME": str(root), **extra_env}
    subprocess.run(["bash", str(script)], cwd=root, env=env, check=True, timeout=30, capture_output=True)
    argv = (out / "argv").read_bytes().decode().split("\0")[:-1]
    pairs = (item.split("=", 1) for item in (out / "env").read_bytes().decode().split("\0") if "=" in item)
    return argv, dict(pairs)


def job_text(script, args, env_value, module_name, launcher, backend, sweep_value) -> str:
    job = {"name": "inj", "script": script, "args": args, "launcher": launcher, "backend": backend,
           "env": {"NCCL_DEBUG": env_value}, "slurm": {"modules": [module_name]}}
    if sweep_value is not None:
        job["sweep"] = {"grid": {"lr": [sweep_value]}}
    return yaml.safe_dump(job, allow_unicode=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                              HealthCheck.too_slow])
@given(script=line_text, args=st.lists(any_text, max_size=4), env_value=any_text, module_name=module_text,
       workdir_name=st.sampled_from(["w $(touch MARKER)", "w `touch MARKER`", "w ';x", 'w "x"', "plain"]),
       form=st.sampled_from(["torchrun", "launch", "dp", "sbatch", "sbatch-sweep"]))
def test_metacharacters_never_execute_and_arrive_intact(tmp_path, script, args, env_value, module_name,
                                                        workdir_name, form):
    launcher = "slurm" if form.startswith("sbatch") else "local"
    backend = "dp" if form == "dp" else "ddp"
    sweep_value = args[0] if form == "sbatch-sweep" and args else ("0.1" if form == "sbatch-sweep" else None)
    sweep_args = ["--lr", sweep_value] if sweep_value is not None else []
    if sweep_value is not None and "--lr" in args:
        args = [a for a in args if a != "--lr"]
    spec = parse_spec(job_text(script, args, env_value, module_name, launcher, backend, sweep_value), "inj.yaml")
    workdir = tmp_path / workdir_name
    workdir.mkdir(exist_ok=True)
    facts = Site(run_dir=str(workdir / "run $(touch MARKER)"), run_id="r1", workdir=str(workdir),
                  python="python3", extra_args=("--tail", "$(touch MARKER)"))
    kind = "sbatch" if launcher == "slurm" else form
    extra_env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n1", "SLURM_ARRAY_TASK_ID": "0"}
    argv, env = run_script(render(spec, facts, kind), tmp_path, extra_env)

    assert not (tmp_path / MARK).exists() and not (workdir / MARK).exists()
    assert argv == ["-u", script, *args, "--tail", "$(touch MARKER)", *sweep_args]
    assert env["NCCL_DEBUG"] == env_value
    assert env["COCKPIT_RUN_DIR"].startswith(facts.run_dir)
    assert os.path.isdir(Path(env["COCKPIT_RUN_DIR"]) / "logs")
