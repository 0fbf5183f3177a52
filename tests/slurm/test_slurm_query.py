"""Tracking Slurm jobs: the state table, the parsers on real output (tests/slurm/fixtures, each file says where
it came from), the tracker's batching and backoff, and the same queries against the test cluster."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from cockpit.fleet import probes as fleet
from cockpit.run.store import STATES
from cockpit.slurm import query as q
from cockpit.slurm.states import TABLE, UNKNOWN, cockpit_state, lookup, normalise
from cockpit.slurm.tracker import JobTracker

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# -- the state table ------------------------------------------------------------------------------------------
def test_every_slurm_state_maps_to_a_cockpit_state_and_unknown_is_explicit():
    assert all(row.state in STATES for row in TABLE.values())
    assert {row.state for row in TABLE.values() if row.final} == {"succeeded", "failed", "stopped"}
    assert cockpit_state("SOMETHING_NEW") == UNKNOWN and not lookup("SOMETHING_NEW").final


def test_state_spellings_of_every_command_are_normalised():
    assert normalise("CANCELLED by 0") == "CANCELLED"  # sacct
    assert normalise("CANCELLED+") == "CANCELLED"  # sacct, cut to its column width
    assert cockpit_state(" running") == "running"
    assert cockpit_state("") == UNKNOWN


# -- parsers on real output -----------------------------------------------------------------------------------
def test_parse_squeue_real_output():
    views = q.parse_squeue(fixture("squeue.txt"))
    assert views["10"] == q.JobView("10", "RUNNING", None, 0, None, 0, "n1", "squeue")
    assert (views["11"].state, views["11"].reason) == ("starting", "BeginTime")
    assert (views["12"].reason, views["13"].state) == ("JobHeldUser", "stopped")
    assert views["13"].exit_status == 143  # the batch shell ended by scancel's SIGTERM
    assert (views["14"].signal, views["14"].exit_status) == (9, 137)
    assert [views[f"15_{i}"].exit_status for i in range(3)] == [0, 1, 2]
    assert views["15_1"].final and views["15_1"].state == "failed"
    assert (views["16"].state, views["16"].restarts, views["16"].reason) == ("starting", 1, "BeginTime")


def test_parse_jobcomp_real_file():
    text = fixture("jobcomp.txt")
    views = q.parse_jobcomp(text, {"13", "14", "15_1", "15_2", "999"})
    assert set(views) == {"13", "14", "15_1", "15_2"}
    assert views["13"].state == "stopped" and views["14"].signal == 9
    assert (views["15_1"].exit_code, views["15_1"].source, views["15_1"].nodes) == (1, "jobcomp", "n1")


def test_history_comes_from_scontrol_show_config():
    history = q.History.from_config(q.parse_config(fixture("scontrol-show-config.txt")))
    assert not history.accounting
    assert history.jobcomp_file == "/tmp/cockpit-slurm-XXXX/jobcomp.txt" and history.source == "jobcomp"
    with_dbd = q.History.from_config({"AccountingStorageType": "accounting_storage/slurmdbd"})
    assert with_dbd.accounting and with_dbd.source == "sacct"


def test_parse_sacct_shape():
    # The shape sacct(1) documents for --parsable2 --noheader --allocations --format=JobID,State,ExitCode,
    # NodeList. Not captured: the test cluster has no slurmdbd (fixtures/sacct-disabled.txt is what it says).
    text = "41|COMPLETED|0:0|n[1-2]\n42_3|CANCELLED by 0|0:15|n1\n43|OUT_OF_MEMORY|0:125|n2\n"
    views = q.parse_sacct(text)
    assert views["41"].state == "succeeded" and views["41"].nodes == "n[1-2]"
    assert (views["42_3"].state, views["42_3"].signal) == ("stopped", 15)
    assert views["43"].state == "failed" and views["43"].source == "sacct"


# -- the tracker ----------------------------------------------------------------------------------------------
class FakeSlurm:
    """Answers squeue from a dict of lines, and scontrol show config; counts the calls."""

    def __init__(self, lines: dict[str, str], config: str = "JobCompType = jobcomp/none\n"):
        self.lines, self.config, self.calls = lines, config, []

    def __call__(self, argv):
        self.calls.append(argv)
        if argv[0] == "squeue":
            return subprocess.CompletedProcess(argv, 0, "".join(v + "\n" for v in self.lines.values()), "")
        if argv[:3] == ["scontrol", "show", "config"]:
            return subprocess.CompletedProcess(argv, 0, self.config, "")
        return subprocess.CompletedProcess(argv, 1, "", f"unexpected {argv}")


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_tracker_asks_once_for_many_jobs_and_backs_off_while_nothing_changes():
    slurm = FakeSlurm({str(i): f"{i}|RUNNING|None|0|0|n1|" for i in range(100)})
    clock = Clock()
    tracker = JobTracker([str(i) for i in range(100)], slurm, min_interval=1, max_interval=8, clock=clock)
    assert len(tracker.poll()) == 100 and len(slurm.calls) == 1
    assert "--jobs=" + ",".join(str(i) for i in range(100)) in slurm.calls[0]
    gaps = []
    for _ in range(8):
        before = len(slurm.calls)
        while len(slurm.calls) == before:
            clock.now += 0.25
            tracker.poll()
        gaps.append(tracker.interval)
    assert gaps[0] == 1.5 and gaps[-1] == 8 and gaps == sorted(gaps)  # 1.5x per quiet refresh, capped
    slurm.lines["7"] = "7|COMPLETED|None|0|0|n1|"
    clock.now = tracker.next_at
    tracker.poll()
    assert tracker.interval == 1 and tracker.views["7"].final  # a change: back to the fast pace


def test_tracker_stops_asking_about_final_jobs_and_reports_vanished_ones():
    slurm = FakeSlurm({"5": "5|COMPLETED|None|0|0|n1|", "6": "6|RUNNING|None|0|0|n1|"})
    clock = Clock()
    tracker = JobTracker(["5", "6"], slurm, clock=clock)
    tracker.refresh()
    del slurm.lines["6"]
    tracker.refresh()
    assert "--jobs=6" in slurm.calls[-2]  # 5 was final: not asked again
    assert tracker.unseen == {"6"} and "6" not in tracker.views and tracker.views["5"].final


def test_tracker_backs_off_on_errors_and_says_why():
    def broken(argv):
        return subprocess.CompletedProcess(argv, 1, "", "slurm_load_jobs error: Unable to contact slurm controller")

    clock = Clock()
    tracker = JobTracker(["1"], broken, min_interval=1, max_interval=30, clock=clock)
    tracker.refresh()
    tracker.refresh()
    assert tracker.interval == 4 and "Unable to contact" in tracker.error and "scontrol ping" in tracker.error


# -- against the test cluster -----------------------------------------------------------------------------------
@pytest.mark.slow
def test_queries_against_the_cluster(slurm_cluster, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    run = slurm_cluster.run
    ok = run("sbatch", "--parsable", "-N1", "-o", "/dev/null", "--wrap", "true").stdout.strip()
    bad = run("sbatch", "--parsable", "-N1", "-o", "/dev/null", "--wrap", "exit 3").stdout.strip()
    held = run("sbatch", "--parsable", "-N1", "-o", "/dev/null", "--hold", "--wrap", "true").stdout.strip()
    deadline = time.monotonic() + 30
    views = {}
    while time.monotonic() < deadline:
        views = q.query_jobs([ok, bad, held, "999999"])
        if views[ok].final and views[bad].final:
            break
        time.sleep(0.3)
    assert views[ok].state == "succeeded" and views[bad].exit_status == 3 and views[ok].source == "squeue"
    assert (views[held].state, views[held].reason) == ("starting", "JobHeldUser")
    assert "999999" not in views
    run("scancel", held)
    history = q.read_history()
    assert history.source == "jobcomp"  # no slurmdbd here
    assert run("sacct", "-j", ok, check=False).stderr.strip() == "Slurm accounting storage is disabled"
    recorded = q.finished([ok, bad], history)  # what cockpit reads once squeue has forgotten them
    assert recorded[ok].state == "succeeded" and recorded[bad].exit_code == 3 and recorded[bad].source == "jobcomp"


@pytest.mark.slow
def test_nodes_and_gres_come_from_fleet_slurm_nodes(slurm_cluster, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    nodes = fleet.slurm_nodes()
    assert [(n.name, n.gres, n.partition) for n in nodes] == [("n1", "gpu:a100:4", "gpu"), ("n2", "gpu:a100:4", "gpu")]
    assert fleet.expand_hostlist("n[1-2]", fleet.scontrol_hostnames()) == ["n1", "n2"]  # scontrol show hostnames
