"""issue 26 ("trust"): cockpit's whole answer on failures users really write, in real runs (torchrun + gloo DDP
on CPU, 2 ranks) through the `cockpit` command: the root-cause rank, the cause in words, the fix or its absence,
and `cockpit diagnose`'s exit status. The scripts are tests/trust/scripts/ddp_faults.py (one --case each) and
the demo. Each scenario runs once per module (a few seconds each) and its answers are checked by the tests.

What a wrong answer looked like before: a gloo "Connection closed by peer" on the rank that lost its peer
proposed GLOO_SOCKET_IFNAME (and `--fix` wrote it); a rank that exited 0 while the other waited was "ok" and
the waiter the first failure; gloo's collective-mismatch abort was a network error; torchrun SIGKILLed was
"rank 0 killed by SIGTERM"; a run cockpit stopped because it hung said "look for scancel"."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, wait_for

from cockpit.run.store import list_runs, read_status

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).resolve().parent / "scripts" / "ddp_faults.py"
LINES = {marker: n for n, text in enumerate(SCRIPT.read_text().splitlines(), 1)
         for marker in ("BACKWARD", "OP", "SHAPE8", "SHAPE4", "AFTER_LOOP") if text.endswith(f"# {marker}")}
DEMO_RAISES = "RuntimeError: injected failure on rank 1 after step 5 (--fail-mode raise)"  # jobs/demo.py's words


def env_for(runs: Path) -> dict[str, str]:
    """Only what cockpit needs: the caller's GLOO_SOCKET_IFNAME, COCKPIT_* or CUDA_* never leak in."""
    return {"PATH": os.environ["PATH"], "HOME": str(runs.parent), "COCKPIT_RUNS_DIR": str(runs), "NO_COLOR": "1",
            "PYTHONPATH": str(REPO), "LANG": "C.UTF-8"}


def cockpit(runs: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=REPO,
                          env=env_for(runs), timeout=timeout)


def job(tmp: Path, case: str, *args: str, extra: str = "") -> Path:
    path = tmp / f"{case}.yaml"
    path.write_text(f"name: {case.replace('_', '-')}\nscript: {SCRIPT}\nargs: {json.dumps(['--case', case, *args])}\n"
                    f"launcher: local\ngpus: none\n{extra}")
    return path


class Outcome:
    """One scenario's run and cockpit's answers about it."""

    def __init__(self, runs: Path, run: subprocess.CompletedProcess):
        [(self.run_dir, self.status)] = list_runs(runs)
        self.run = run
        self.diagnose = cockpit(runs, "diagnose", self.run_dir.name)
        self.json = json.loads(cockpit(runs, "diagnose", self.run_dir.name, "--json").stdout)
        self.fix = cockpit(runs, "diagnose", self.run_dir.name, "--fix")

    def finding(self, code: str) -> dict:
        return next(f for f in self.json["findings"] if f["code"] == code)

    @property
    def cause(self) -> dict:
        return self.json["cause"]

    def tui_plan(self):
        """What the TUI's fix review (F, then r to relaunch) would offer: cockpit.insight.fixes's plan."""
        from cockpit.insight.diagnosis import diagnose_run
        from cockpit.insight.fixes import plan
        from cockpit.run.handle import Run

        run = Run.load(self.run_dir)
        return plan(run, diagnose_run(run))

    def explain(self) -> str:
        return (f"{self.run.stdout}\n{self.run.stderr}\n--- diagnose:\n{self.diagnose.stdout}\n"
                f"--- fix:\n{self.fix.stdout}")


def scenario(tmp_path_factory, name: str, job_file: str, *args: str) -> Outcome:
    tmp = tmp_path_factory.mktemp(name)
    runs = tmp / "runs"
    return Outcome(runs, cockpit(runs, "run", job_file, "-q", *args))


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return scenario(tmp_path_factory, "demo", "jobs/demo.yaml", "--", "--epochs", "1", "--steps-per-epoch", "30",
                    "--fail-rank", "1", "--fail-step", "5")


@pytest.fixture(scope="module")
def raised(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("jobs")
    return scenario(tmp_path_factory, "raise", str(job(tmp, "raise")))


@pytest.fixture(scope="module")
def early(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("jobs")
    return scenario(tmp_path_factory, "early", str(job(tmp, "early_exit")))


@pytest.fixture(scope="module", params=["op", "shape", "uneven"])
def mismatched(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("jobs")
    return request.param, scenario(tmp_path_factory, request.param, str(job(tmp, request.param)))


def assert_no_fix_offered(o: Outcome, because: str):
    assert o.diagnose.returncode == 1, o.explain()
    assert o.fix.returncode == 1 and o.fix.stdout.strip() == f"no configuration fix: the cause is in the code " \
                                                              f"({because})", o.explain()
    assert all(f["fix"] is None for f in o.json["findings"]), o.explain()
    p = o.tui_plan()
    assert p.proposals == () and p.new_text is None and p.verdict == o.fix.stdout.strip()


@pytest.mark.parametrize("which", ["demo", "raised"])
def test_a_rank_that_raised_is_the_cause_and_its_lost_peer_gets_no_network_fix(which, request):
    o: Outcome = request.getfixturevalue(which)
    said = DEMO_RAISES if which == "demo" else "ValueError: bad batch at step 5"
    assert o.status.state == "failed" and o.status.first_failure.rank == 1, o.explain()
    assert o.cause["rank"] == 1 and o.cause["remedy"] == "code" and o.cause["words"] == f"rank 1 raised {said}"
    first = o.finding("first_failure")
    assert "rank 1 on" in first["title"] and said in first["title"], o.explain()
    lost = o.finding("gloo_error")  # rank 0's "Connection closed by peer": a consequence
    assert "peer" in lost["title"] and "rank 0" in lost["title"] and lost["fix"] is None
    assert "GLOO_SOCKET_IFNAME" not in o.fix.stdout
    assert_no_fix_offered(o, f"rank 1 raised {said}")


def test_a_rank_that_exits_0_while_the_other_waits_is_the_first_failure(early):
    o = early
    ff = o.status.first_failure
    assert ff.rank == 1 and (ff.status == 0 or ff.teardown_abort), o.explain()
    assert o.cause["kind"] == "early_exit" and o.cause["rank"] == 1 and o.cause["remedy"] == "code", o.explain()
    waited = f"rank 0 was in backward at ddp_faults.py:{LINES['BACKWARD']}, in train"
    assert waited in o.finding("first_failure")["title"], o.explain()
    if ff.status == 0:
        assert "exit code 0, early: others waited" in o.run.stdout, o.explain()
        assert "first failure: rank 1 on" in o.run.stdout and "(an early exit)" in o.run.stdout, o.explain()
    assert_no_fix_offered(o, o.cause["words"])
    assert o.cause["words"].startswith("rank 1 ") and "while rank 0 still waited for it in a collective" in \
        o.cause["words"]


def test_a_collective_mismatch_gloo_aborts_is_named_with_each_ranks_call(mismatched):
    case, o = mismatched
    assert o.status.state == "failed", o.explain()
    backward = f"backward at ddp_faults.py:{LINES['BACKWARD']}, in train"
    if case == "uneven":
        f = o.finding("uneven_inputs")
        assert f["title"].startswith(f"Uneven inputs: rank 1 left its training loop (all_reduce at ddp_faults.py:"
                                     f"{LINES['AFTER_LOOP']}, in <module>) while rank 0 was still in it "
                                     f"({backward})"), o.explain()
        assert "DistributedSampler" in f["hint"] and "join()" in f["hint"]
        assert o.cause["kind"] == "uneven_inputs" and o.cause["rank"] == 1
    else:
        f = o.finding("collective_mismatch")
        places = {"op": (f"rank 0 in {backward}", f"rank 1 in all_reduce at ddp_faults.py:{LINES['OP']}, in train"),
                  "shape": (f"rank 0 in all_reduce at ddp_faults.py:{LINES['SHAPE4']}, in train",
                            f"rank 1 in all_reduce at ddp_faults.py:{LINES['SHAPE8']}, in train")}[case]
        assert all(p in f["title"] for p in places), o.explain()
        assert o.cause["kind"] == "collective_mismatch"
        assert "uneven" not in o.diagnose.stdout.lower()
    assert "TORCH_DISTRIBUTED_DEBUG" not in o.diagnose.stdout  # DETAIL segfaults DDP on this torch
    assert "GLOO_SOCKET_IFNAME" not in o.diagnose.stdout, o.explain()
    aborted = [f["path"] for f in o.json["files"] if "collective_mismatch" in f["kinds"]]
    assert aborted and all("gloo_error" not in f["kinds"] for f in o.json["files"] if f["path"] in aborted)
    assert all("peer" in f["title"] for f in o.json["findings"] if f["code"] == "gloo_error")  # the other side
    assert not any(f["code"] == "process_died" for f in o.json["findings"])  # the wrapper's bash echo of the abort
    assert_no_fix_offered(o, o.cause["words"])


def test_the_launcher_killed_is_the_cause_not_its_ranks_sigterm(tmp_path):
    runs = tmp_path / "runs"
    path = job(tmp_path, "none", "--steps", "2000", "--step-ms", "10")
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(path), "-q"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO, env=env_for(runs))
    try:
        run_dir = wait_for(lambda: list_runs(runs) and list_runs(runs)[0][0], 60, "the run directory")
        logs = run_dir / "logs"
        wait_for(lambda: all("step 3 " in p.read_text() for p in logs.glob("rank-*.log"))
                 and len(list(logs.glob("rank-*.log"))) == 2, 90, "both ranks training")
        torchrun = read_status(run_dir).nodes[0].pid
        os.kill(torchrun, signal.SIGKILL)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    status = read_status(run_dir)
    assert status.state == "failed", out + err
    assert "first failure: the launcher (torchrun on " in out and "was killed by SIGKILL (status 137)" in out, out
    data = json.loads(cockpit(runs, "diagnose", run_dir.name, "--json").stdout)
    assert data["cause"]["kind"] == "launcher" and data["cause"]["rank"] is None, data["cause"]
    [first] = [f for f in data["findings"] if f["code"] == "first_failure"]
    assert first["title"].startswith("First failure: the launcher (torchrun on ") and "SIGTERM" not in \
        first["title"].split(";")[0], first


def test_a_run_cockpit_stopped_because_it_hung_says_so(tmp_path):
    runs = tmp_path / "runs"
    path = job(tmp_path, "stuck", "--steps", "400", "--step-ms", "10", "--step", "3", extra="on_stall: stop\n")
    run = cockpit(runs, "run", str(path), "-q", "--stall-after", "6", "--grace", "2")
    [(run_dir, status)] = list_runs(runs)
    assert status.state == "stopped", run.stdout + run.stderr
    out = cockpit(runs, "diagnose", run_dir.name).stdout
    assert "cockpit stopped the run: it hung (on_stall: stop)" in out and "scancel" not in out, out
    assert "cockpit stopped the run: it hung (on_stall: stop)" in run.stdout, run.stdout


def test_a_healthy_run_has_no_finding_and_diagnose_succeeds(tmp_path):
    runs = tmp_path / "runs"
    run = cockpit(runs, "run", str(job(tmp_path, "none")), "-q")
    assert run.returncode == 0, run.stdout + run.stderr
    [(run_dir, status)] = list_runs(runs)
    d = cockpit(runs, "diagnose", run_dir.name, "--json")
    data = json.loads(d.stdout)
    assert d.returncode == 0 and data["findings"] == [] and data["cause"] is None, d.stdout
    fix = cockpit(runs, "diagnose", run_dir.name, "--fix")
    assert fix.returncode == 1 and "No finding has a configuration fix" in fix.stdout  # nothing to fix
