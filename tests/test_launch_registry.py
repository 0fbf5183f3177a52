"""cockpit.launch.registry: the one place a job's or a run's launcher name is looked up."""

from __future__ import annotations

import pytest

from cockpit.launch import LaunchError, registry
from cockpit.run.records import NodeRecord, Trial
from cockpit.run.store import RunStatus
from cockpit.spec.model import parse_spec


def _status(launcher: str, nodes: list[NodeRecord]) -> RunStatus:
    return RunStatus(run_id="r-1", name="r", launcher=launcher, job_file="j.yaml", hosts=[], world_size=None,
                     nodes=nodes)


def test_jobs_and_runs_find_their_launcher():
    local = parse_spec("name: t\nscript: x.py\n")
    sweep = parse_spec("name: t\nscript: x.py\nsweep:\n  grid:\n    lr: [1, 2]\n")
    assert type(registry.for_spec(local)).__name__ == "LocalLauncher"
    assert type(registry.for_spec(sweep)).__name__ == "LocalSweepLauncher"
    trial = NodeRecord("trial-0", 0, trial=Trial(0, ()))
    assert type(registry.for_run(_status("local", [trial]))).__name__ == "LocalSweepLauncher"
    assert type(registry.for_run(_status("slurm", [trial]))).__name__ == "SlurmLauncher"  # arrays: Slurm's own
    assert type(registry.for_run(_status("ssh", []))).__name__ == "SSHLauncher"
    assert not registry.for_run(_status("local", [trial])).watched(_status("local", [trial]))
    assert not registry.get("slurm").watched(_status("slurm", [trial]))
    assert registry.get("slurm").watched(_status("slurm", [NodeRecord("sbatch", 0)]))


def test_an_unknown_launcher_is_refused_or_falls_back_when_asked():
    with pytest.raises(LaunchError, match="launcher pbs is not available"):
        registry.for_run(_status("pbs", []))
    assert type(registry.for_run(_status("pbs", []), fallback="local")).__name__ == "LocalLauncher"
