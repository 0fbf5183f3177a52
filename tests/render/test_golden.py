"""Every renderer on every example job, against golden files; every generated script passes bash -n and
shellcheck. Regenerate after an intended change with: python -m pytest tests/render --update-golden
and review the diff. Only that option rewrites them (tests/conftest.py): a variable in the shell does not."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import JOBS, REPO, require_tool

from cockpit.render import KINDS, RenderError, Site, check_kind, render
from cockpit.spec.model import JobSpec, load_spec

GOLDEN = REPO / "tests" / "fixtures" / "golden"


def golden_facts(spec: JobSpec) -> Site:
    """Fixed facts so the text does not depend on this machine."""
    names = spec.hosts if spec.launcher == "ssh" else (
        ("login1",) if spec.launcher == "local" else tuple(f"node{i}" for i in range(spec.num_nodes)))
    master = "127.0.0.1" if spec.launcher == "local" else names[0]
    return Site(run_dir="/home/user/.local/state/cockpit/runs/RUN-ID", run_id="RUN-ID",
                 workdir="/home/user/project/jobs", python="python3", master_addr=master,
                 master_port=spec.master_port or 29500, node_names=names)


def cases() -> list[tuple[Path, str, int | None]]:
    out = []
    for job in JOBS:
        spec = load_spec(job)
        for kind in KINDS:
            try:
                check_kind(spec, kind)
            except RenderError:
                continue
            per_node = kind in ("torchrun", "launch", "spawn") and spec.num_nodes > 1
            out += [(job, kind, n) for n in range(spec.num_nodes)] if per_node else [(job, kind, None)]
    return out


CASES = cases()


def golden_path(job: Path, kind: str, node: int | None) -> Path:
    return GOLDEN / (f"{job.stem}.{kind}" + (f".node{node}" if node is not None else "") + ".sh")


def test_every_example_job_has_every_applicable_form():
    kinds = {(job.stem, kind) for job, kind, _ in CASES}
    assert {k for _, k in kinds} == set(KINDS)  # all four renderers are exercised
    assert len({j for j, _ in kinds}) == len(JOBS)


@pytest.mark.parametrize(("job", "kind", "node"), CASES,
                         ids=[f"{j.stem}-{k}" + (f"-n{n}" if n is not None else "") for j, k, n in CASES])
def test_render_matches_golden(job, kind, node, update_golden):
    spec = load_spec(job)
    text = render(spec, golden_facts(spec), kind, node)
    path = golden_path(job, kind, node)
    if update_golden:
        path.write_text(text)
    assert path.exists(), f"no golden file {path.name}: run pytest tests/render --update-golden and review it"
    assert text == path.read_text()


def test_render_is_deterministic():
    for job, kind, node in CASES:
        spec = load_spec(job)
        assert render(spec, golden_facts(spec), kind, node) == render(spec, golden_facts(spec), kind, node)


def test_goldens_pass_bash_n_and_shellcheck():
    shellcheck = require_tool("shellcheck")
    files = [golden_path(j, k, n) for j, k, n in CASES]
    for f in files:
        subprocess.run(["bash", "-n", str(f)], check=True)
    result = subprocess.run([shellcheck, "--severity=info", *map(str, files)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_no_stale_goldens():
    expected = {golden_path(j, k, n).name for j, k, n in CASES}
    assert {p.name for p in GOLDEN.glob("*.sh")} == expected
