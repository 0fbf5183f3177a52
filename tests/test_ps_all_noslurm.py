"""`cockpit ps --all` where Slurm cannot list jobs (issue 33, item 8): stdout never claims "no Slurm jobs" it could
not ask for. No Slurm client at all (a laptop, a workstation): the runs, a note, exit 0. A Slurm client whose
cluster does not answer: the runs, the error on stderr, exit 1. Real cockpit processes; the PATH a test gives is
all they find."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import REPO, cockpit_env, require_tool


def ps_all(tmp_path: Path, *extra: str, **env: str) -> subprocess.CompletedProcess:
    runs = tmp_path / "runs"
    runs.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "cockpit", "ps", "--all", *extra], capture_output=True, text=True,
                          cwd=REPO, env=cockpit_env(COCKPIT_RUNS_DIR=str(runs), NO_COLOR="1", **env), timeout=120)


def test_without_a_slurm_client_there_are_no_slurm_jobs_and_that_is_no_error(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    r = ps_all(tmp_path, PATH=str(empty))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == ""
    assert r.stderr.startswith("cockpit: scontrol is not installed here: no Slurm jobs, and no cockpit runs (hint: ")
    j = ps_all(tmp_path, "--json", PATH=str(empty))
    assert j.returncode == 0 and json.loads(j.stdout)["jobs"] == [] and "not installed" in json.loads(j.stdout)["error"]


def test_a_slurm_that_does_not_answer_is_an_error_and_stdout_claims_no_jobs(tmp_path):
    scontrol = require_tool("scontrol")
    conf = tmp_path / "slurm.conf"  # a cluster that is not there: no controller answers
    conf.write_text("ClusterName=nowhere\nSlurmctldHost=cockpit-no-such-host-33\n")
    r = ps_all(tmp_path, SLURM_CONF=str(conf), PATH=f"{Path(scontrol).parent}:/usr/bin:/bin")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no Slurm jobs" not in r.stdout and r.stdout == ""
    assert "cockpit: your Slurm jobs are not listed: " in r.stderr


def test_a_slurm_client_that_cannot_find_its_cluster_is_said_in_one_line():
    """scontrol without a configuration prints three error lines and then its fatal one: `ps --all` said all four
    inside one notice (the new-user pass); the fatal line is what it means."""
    from cockpit.slurm.command import last_words

    said = ("scontrol: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n"
            "scontrol: error: fetch_config: DNS SRV lookup failed\n"
            "scontrol: error: _establish_config_source: failed to fetch config\n"
            "scontrol: fatal: Could not establish a configuration source\n")
    assert last_words(said) == "scontrol: fatal: Could not establish a configuration source"
    assert last_words("squeue: error: Invalid user\nsome trailing words\n") == "squeue: error: Invalid user"
    assert last_words("Slurm accounting storage is disabled\n") == "Slurm accounting storage is disabled"
    assert last_words("") == ""
