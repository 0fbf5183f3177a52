"""Launching the composed job: the job file to hand to cockpit.launch, then prepare + start. No textual;
blocking IO, so the TUI calls it from a worker.

The form's YAML is launched as it is. When it says the same as the job file it was opened from (same spec),
that file is launched, comments and all. Otherwise the text is staged under <runs_dir>/.compose/ with
``workdir:`` made absolute (a relative script path keeps meaning what it meant next to the original file),
and that staged file is the run's job file (copied into the run directory as job.yaml like any other)."""

from __future__ import annotations

import dataclasses
import os
import secrets
import time
from pathlib import Path

import yaml

from cockpit import launch
from cockpit.fs.paths import job_workdir
from cockpit.run.store import write_atomic
from cockpit.spec.model import JobSpec, SpecError, load_spec, parse_spec

STAGE_DIR = ".compose"


def same_job(a: JobSpec, b: JobSpec) -> bool:
    return dataclasses.replace(a, source="") == dataclasses.replace(b, source="")


def job_file_for(text: str, spec: JobSpec, opened: Path | None, base_dir: Path, runs_dir: Path) -> Path:
    """The file to launch: ``opened`` when it holds the same job, else a staged copy of ``text``."""
    if opened is not None:
        try:
            if same_job(load_spec(opened), spec):
                return opened
        except (OSError, SpecError, UnicodeDecodeError):
            pass  # changed or gone since it was opened: stage the form's text
    data = yaml.safe_load(text)
    data["workdir"] = job_workdir(str(base_dir / "job.yaml"), data.get("workdir"))
    stage = runs_dir / STAGE_DIR
    stage.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = stage / f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}.yaml"
    write_atomic(path, yaml.safe_dump(data, sort_keys=False, default_flow_style=None))
    os.chmod(path, 0o600)
    return path


def launch_text(text: str, opened: Path | None, base_dir: Path, runs_dir: Path, grace: float = 10.0) -> Path:
    """Validate, prepare and start; returns the run directory. Raises SpecError or launch.LaunchError."""
    spec = parse_spec(text, str(opened or "job.yaml"))
    path = job_file_for(text, spec, opened, base_dir, runs_dir)
    spec = load_spec(path)
    run_dir = launch.prepare(spec, str(path), runs_dir)
    launch.start(run_dir, grace)
    return run_dir


def save_text(path: Path, text: str) -> None:
    """Write a job file atomically (the caller has already asked before replacing an existing one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)
