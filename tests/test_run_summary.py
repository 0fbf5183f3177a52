"""summary.json (cockpit.run.summary, cockpit.insight.listing): written with a final status.json, rebuilt when it is
missing, stale or corrupt, a finished run's forecast stored once; and `cockpit ps` / `ps --json` print the same with
summaries, without them (runs of an older cockpit) and as the listing before summaries printed it (list_runs and a
forecast worked out per run). Real `cockpit` processes over a runs directory made here (no run is started)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env

from cockpit.insight.forecast_inputs import run_forecast
from cockpit.insight.listing import list_listed
from cockpit.run import layout, summary
from cockpit.run.findings import LiveFinding
from cockpit.run.store import RunStatus, create_run_dir, list_runs, write_run_file, write_status
from cockpit.run.trust import owner

T0 = 1_700_000_000.0
STRAGGLER = LiveFinding.from_dict({"kind": "straggler", "severity": "warning", "text": "rank 1 is slow", "hint": "",
                                   "rank": 1, "host": "vm"})
CLEARED = LiveFinding.from_dict({"kind": "stall", "severity": "warning", "text": "stalled", "hint": "",
                                 "quiet_s": 90.0, "cleared": T0 + 50, "lasted_s": 90.0})


def status(run_id: str, i: int, **fields) -> RunStatus:
    base = dict(run_id=run_id, name="demo", launcher="local", job_file="jobs/demo.yaml", hosts=["vm"], world_size=2,
                state="succeeded", exit_code=0, created=T0 + i, started=T0 + i + 1, ended=T0 + i + 3601)
    return RunStatus(**{**base, **fields})


def make_run(runs: Path, run_id: str, st: RunStatus, job: str = "demo.yaml", steps: int = 30,
             total: int | None = 40, older: bool = False) -> Path:
    """A run directory as a launch leaves it: its job, rank 0's metrics, its final status (``older``: written
    as a cockpit before summaries wrote it, status.json alone)."""
    run_dir = create_run_dir(runs, run_id)
    shutil.copyfile(REPO / "jobs" / job, run_dir / layout.JOB)
    if steps:
        (run_dir / layout.METRICS).mkdir(mode=0o700)
        extra = {} if total is None else {"total_steps": total}
        layout.metrics_file(run_dir, 0).write_text("".join(
            json.dumps({"step": s, "time": T0 + 10 + 2.5 * s, "loss": 1.0 / s, **extra}) + "\n"
            for s in range(1, steps + 1)))
    if older:
        write_run_file(run_dir, layout.STATUS, st.to_json())
    else:
        write_status(run_dir, st)
    return run_dir


@pytest.fixture
def runs(tmp_path) -> Path:
    runs = tmp_path / "runs"
    make_run(runs, "a-ok", status("a-ok", 0))
    make_run(runs, "b-gpu", status("b-gpu", 1), job="local-gpus.yaml", total=None)
    make_run(runs, "c-failed", status("c-failed", 2, state="failed", exit_code=1, findings=[STRAGGLER],
                                      note="rank 1 exited 1"), steps=0)
    make_run(runs, "d-old", status("d-old", 3, state="stopped", exit_code=1, history=[CLEARED]), older=True)
    make_run(runs, "e-noend", status("e-noend", 4, state="lost", ended=None))  # its GPU-hours run on: no summary
    make_run(runs, "f-unstarted", status("f-unstarted", 5, state="failed", started=None, ended=None), steps=0)
    (runs / "g-broken").mkdir(mode=0o700)
    (runs / "g-broken" / layout.STATUS).write_text("{not json")
    return runs


def cockpit(*args: str, runs_dir: Path) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "cockpit", *args, "--runs-dir", str(runs_dir)], capture_output=True,
                       text=True, cwd=REPO, timeout=120, env=cockpit_env(NO_COLOR="1"))
    assert r.returncode == 0, r.stderr
    return r


def reference_json(runs_dir: Path) -> str:
    """`ps --json` as cockpit printed it before summaries: list_runs, and each run's forecast worked out now."""
    return json.dumps({"runs": [{**s.to_dict(), "run_dir": str(d), "forecast": run_forecast(d, s).to_dict(),
                                 **({"owner": who} if (who := owner(d)) else {})}
                                for d, s in list_runs(runs_dir)]}, indent=2) + "\n"


def table(runs_dir: Path) -> str:
    """`cockpit ps`'s table with its AGE column (the clock's) blanked, with the spaces that align it (an age that
    gains a digit between two listings, the unreadable run's 9.9 s -> 10.0 s on a loaded machine, takes one)."""
    out = cockpit("ps", runs_dir=runs_dir).stdout
    return re.sub(r" +\d+\.\d (s|min|h) ", " AGE ", out)


def summaries(runs_dir: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in runs_dir.glob(f"*/{layout.SUMMARY}")}


def test_a_final_status_is_written_with_its_summary(tmp_path):
    runs = tmp_path / "runs"
    run_dir = make_run(runs, "a-ok", status("a-ok", 0, state="running", ended=None, exit_code=None))
    assert not (run_dir / layout.SUMMARY).exists()  # a run still going is listed from status.json
    final = status("a-ok", 0)
    write_status(run_dir, final)
    kept = json.loads((run_dir / layout.SUMMARY).read_text())
    st = os.stat(run_dir / layout.STATUS)
    assert kept["status"] == [st.st_ino, st.st_mtime_ns, st.st_size]
    assert kept["row"] == {k: v for k, v in final.to_dict().items() if k in summary.ROW_FIELDS}
    assert kept["forecast"] is None  # the writers stand below insight: the first listing adds it
    assert os.stat(run_dir / layout.SUMMARY).st_mode & 0o777 == 0o600


def test_ps_prints_the_same_with_summaries_without_them_and_as_before(runs):
    expected = reference_json(runs)
    first_table = table(runs)  # runs d-old, and every forecast, without a summary yet: made now
    assert cockpit("ps", "--json", runs_dir=runs).stdout == expected
    kept = summaries(runs)
    assert set(kept) == {"a-ok", "b-gpu", "c-failed", "d-old", "f-unstarted"}
    assert all(k["forecast"] is not None for k in kept.values())
    assert cockpit("ps", "--json", runs_dir=runs).stdout == expected
    assert table(runs) == first_table
    for path in runs.glob(f"*/{layout.SUMMARY}"):
        path.unlink()
    assert cockpit("ps", "--json", runs_dir=runs).stdout == expected
    assert table(runs) == first_table
    rows = {line.split()[0]: line for line in first_table.splitlines()[1:] if not line.startswith(" ")}
    assert rows["c-failed"].endswith(" straggler:1") and rows["d-old"].endswith(" - (1 cleared)")
    assert rows["b-gpu"].split()[-2] == f"{4 * 3600 / 3600:.2f}"  # 4 GPUs for the hour it ran
    assert "unreadable" in rows["g-broken"]


def test_ps_json_with_no_runs_is_what_it_was(tmp_path):
    (tmp_path / "runs").mkdir(mode=0o700)
    assert cockpit("ps", "--json", runs_dir=tmp_path / "runs").stdout == json.dumps({"runs": []}, indent=2) + "\n"


def test_a_finished_runs_forecast_is_made_once(runs):
    cockpit("ps", runs_dir=runs)
    path = runs / "a-ok" / layout.SUMMARY
    before = os.stat(path)
    stored = json.loads(path.read_text())["forecast"]
    assert (stored["steps_done"], stored["total_steps"], stored["seconds_per_step"]) == (30, 40, 2.5)
    cockpit("ps", runs_dir=runs)
    cockpit("ps", "--json", runs_dir=runs)
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # read, never written again
    # what ps shows is the stored one: a forecast made now, without the job, would count no GPUs
    (runs / "b-gpu" / layout.JOB).write_text("{")
    listed = {item.run_dir.name: item for item in list_listed(runs)}
    assert listed["b-gpu"].summarised and listed["b-gpu"].forecast.gpus == 4
    assert run_forecast(runs / "b-gpu", listed["b-gpu"].status).gpus == 0


def test_a_stale_summary_is_rebuilt(runs):
    cockpit("ps", runs_dir=runs)
    run_dir = runs / "a-ok"
    # status.json replaced by a writer that keeps no summary (an older cockpit): the summary's stamp is not its
    write_run_file(run_dir, layout.STATUS, status("a-ok", 0, state="failed", exit_code=3).to_json())
    assert cockpit("ps", "--json", runs_dir=runs).stdout == reference_json(runs)
    kept = json.loads((run_dir / layout.SUMMARY).read_text())
    st = os.stat(run_dir / layout.STATUS)
    assert kept["status"] == [st.st_ino, st.st_mtime_ns, st.st_size] and kept["row"]["state"] == "failed"
    assert "failed" in table(runs).splitlines()[1]


def test_metrics_written_since_make_the_forecast_again(runs):
    cockpit("ps", runs_dir=runs)
    with layout.metrics_file(runs / "a-ok", 0).open("a") as f:
        f.write(json.dumps({"step": 40, "time": T0 + 200, "total_steps": 40}) + "\n")
    assert cockpit("ps", "--json", runs_dir=runs).stdout == reference_json(runs)
    assert json.loads((runs / "a-ok" / layout.SUMMARY).read_text())["forecast"]["steps_done"] == 40


@pytest.mark.parametrize("bad", ["", "{", "[1]", '{"version": 1}', "not json at all" * 10,
                                 "FORECAST", "ROW", "DEEP"])
def test_a_corrupt_summary_is_no_summary(runs, bad):
    cockpit("ps", runs_dir=runs)
    path = runs / "a-ok" / layout.SUMMARY
    good = json.loads(path.read_text())
    if bad == "FORECAST":
        bad = json.dumps({**good, "forecast": {**good["forecast"], "gpus": "many"}})
    elif bad == "ROW":
        bad = json.dumps({**good, "row": {**good["row"], "world_size": "two"}})
    elif bad == "DEEP":
        deep: list = []
        for _ in range(40):
            deep = [deep]
        bad = json.dumps({**good, "row": {**good["row"], "findings": deep}})
    path.write_text(bad)
    assert cockpit("ps", "--json", runs_dir=runs).stdout == reference_json(runs)
    assert json.loads(path.read_text()) == good  # made again


def test_a_symlink_in_place_of_a_summary_is_not_followed(runs, tmp_path):
    cockpit("ps", runs_dir=runs)
    target = tmp_path / "elsewhere.json"
    target.write_text((runs / "a-ok" / layout.SUMMARY).read_text())
    (runs / "a-ok" / layout.SUMMARY).unlink()
    (runs / "a-ok" / layout.SUMMARY).symlink_to(target)
    assert cockpit("ps", "--json", runs_dir=runs).stdout == reference_json(runs)
    assert not (runs / "a-ok" / layout.SUMMARY).is_symlink()  # replaced by a file of its own (a rename)
    assert target.read_text() == (runs / "a-ok" / layout.SUMMARY).read_text()
