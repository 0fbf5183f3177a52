"""What a relaunch decides from how an attempt ended (pure), what it reads of a log, and the goodput."""

from __future__ import annotations

import pytest

from cockpit.launch.recovery import Outcome, Policy, blame, decide, exception_place, section
from cockpit.run.attempts import Attempt, goodput, lost_seconds, restart_latencies

POLICY = Policy(attempts=3, on=("failure", "stall"))


def raised(place: str = "RuntimeError at train.py:40", **kw) -> Outcome:
    return Outcome("failure", 1, "n1", f"rank 1 raised {place}", "code", place, **kw)


def test_a_first_exception_is_relaunched_and_the_same_one_twice_is_not():
    first = decide(POLICY, [], raised(), 0)
    assert first.retry and first.words.startswith("relaunched as attempt 1 of 4 after a failure: rank 1 raised")
    again = decide(POLICY, [raised()], raised(), 1)
    assert not again.retry
    assert again.words.startswith("not retried: the same exception at the same place in attempts 0 and 1 "
                                  "(RuntimeError at train.py:40)")
    other = decide(POLICY, [raised()], raised("ValueError at train.py:41"), 1)
    assert other.retry, other.words


def test_used_up_attempts_give_up_with_the_count():
    last = decide(Policy(attempts=1, on=("failure",)), [Outcome("failure", 0, "n", "rank 0 was killed by SIGKILL")],
                  Outcome("failure", 0, "n", "rank 0 was killed by SIGKILL"), 1)
    assert (last.retry, last.words) == (False, "gave up after 2 attempts: rank 0 was killed by SIGKILL")


@pytest.mark.parametrize("outcome, words", [
    (Outcome("stall", 1, "n", "stalled: x"), "not retried: recover.on does not list stall"),
    (raised("ModuleNotFoundError at train.py:1", bad_input=True), "not retried: the script cannot run as given"),
    (Outcome("failure", 0, "n", "rank 0 could not set up gloo's connections", "configuration"),
     "not retried: a configuration error, which a setting fixes, not a retry"),
    (Outcome("failure", 0, "n1", "rank 0 had a GPU fault (Xid)", "hardware"),
     "not retried: node n1 is to blame and the run has no other"),
])
def test_what_a_retry_cannot_fix_ends_the_run_at_once(outcome, words):
    d = decide(Policy(attempts=3, on=("failure",)), [], outcome, 0)
    assert not d.retry and d.words.startswith(words), d.words


XID = Outcome("failure", 0, "n1", "rank 0 had a GPU fault (Xid)", "hardware")


def test_a_node_blamed_by_the_diagnosis_is_left_out_where_the_launcher_has_another():
    assert blame(XID) == ("n1",) and blame(raised()) == () and blame(Outcome("failure", 0, None, "x", "hardware")) == ()
    d = decide(POLICY, [], XID, 0, 1, blame(XID), None)
    assert d.retry and d.leave_out == ("n1",)
    assert d.words == "relaunched as attempt 1 of 4 without node n1 after a failure: rank 0 had a GPU fault (Xid)"
    none = decide(POLICY, [], XID, 0, 1, ("n1",), "Slurm has no other node for the job without n1 (sbatch ...)")
    assert not none.retry and none.words.startswith("not retried: node n1 is to blame and Slurm has no other node")
    assert "(fix node n1, or return it to service, then run the job again)" in none.words
    last = decide(Policy(attempts=1, on=("failure",)), [XID], XID, 1, 1, ("n1",), None)
    assert (last.retry, last.words) == (False, "gave up after 2 attempts: rank 0 had a GPU fault (Xid)")
    assert not decide(POLICY, [], raised(), 0).leave_out  # a cause in the code leaves no node out


def test_a_configuration_cause_with_a_fix_is_relaunched_with_it_only_when_asked():
    broken = Outcome("failure", 0, "n", "rank 0 ran out of /dev/shm", "configuration",
                     fix_env=(("NCCL_SHM_DISABLE", "1"),))
    assert not decide(POLICY, [], broken, 0).retry
    d = decide(Policy(attempts=3, on=("failure",), apply_fixes=True), [], broken, 0)
    assert d.retry and d.env == (("NCCL_SHM_DISABLE", "1"),)
    assert "with the fix NCCL_SHM_DISABLE=1 (recover.apply_fixes: true)" in d.words


def test_the_place_of_the_last_traceback_and_the_section_since_the_marker(tmp_path):
    log = tmp_path / "rank-1.h.log"
    log.write_text("Traceback (most recent call last):\n  File \"/a/old.py\", line 3, in f\nKeyError: 1\n"
                   "[cockpit] attempt 1 (COCKPIT_ATTEMPT=1): relaunched\n"
                   "[rank1]: Traceback (most recent call last):\n"
                   "[rank1]:   File \"/x/demo.py\", line 90, in <module>\n[rank1]:     main()\n"
                   "[rank1]:   File \"/x/demo.py\", line 72, in maybe_fail\n[rank1]:     raise RuntimeError(x)\n"
                   "[rank1]: RuntimeError: injected\n")
    lines = section(log)
    assert lines[0] == "[rank1]: Traceback (most recent call last):" and "KeyError: 1" not in lines
    assert exception_place(lines) == "RuntimeError at demo.py:72"
    assert exception_place(["no traceback here"]) is None


def test_goodput_counts_kept_steps_only():
    # attempt 0 trains steps 1..12 (1 s each) from t=10, fails; attempt 1 resumes from step 10 at t=40 and trains
    # 11..20 (1 s each): kept are steps 1..10 of attempt 0 and 11..20 of attempt 1: 20 s of 50 s
    attempts = [Attempt(0, 0.0, ended=25.0, failed=22.5), Attempt(1, 25.0, resumed_from=10, first_step=41.0)]
    records = [(10.0 + s, s) for s in range(1, 13)] + [(30.0 + s, s) for s in range(11, 21)]
    assert goodput(attempts, records, 0.0, 50.0) == pytest.approx(20 / 50)
    assert goodput(attempts, [], 0.0, 50.0) is None
    assert restart_latencies(attempts) == [18.5]
    # attempt 0 trained step 10 at t=20; attempt 1's first step came at t=41: 21 s lost to the failure
    attempts = [Attempt(0, 0.0, ended=25.0, failed=22.5, first_step=11.0), Attempt(1, 25.0, resumed_from=10,
                                                                                   first_step=41.0)]
    assert lost_seconds(attempts, records) == [21.0, None]


def test_an_attempt_round_trips_through_json():
    a = Attempt(1, 5.0, 9.0, 8.0, "failure", 1, "h", "words", 12, 10, 6.0, "relaunched", 3.5)
    assert Attempt.from_dict(a.to_dict()) == a
    with pytest.raises(ValueError, match="attempts\\[0\\]: started: missing"):
        from cockpit.run.attempts import attempts_from_list

        attempts_from_list([{"attempt": 0}])


def test_a_fix_goes_into_the_node_script_after_the_jobs_env_and_before_the_launch(tmp_path):
    import subprocess

    from helpers import REPO

    from cockpit.launch.attempt_files import apply_fix
    from cockpit.render import render
    from cockpit.render.site import Site
    from cockpit.spec.model import load_spec

    spec = load_spec(REPO / "jobs" / "demo-heal.yaml")
    site = Site(run_dir=str(tmp_path), run_id="r1", workdir=str(REPO / "jobs"), python="python3",
                master_addr="127.0.0.1", master_port=29500, node_names=("h",))
    script = tmp_path / "commands" / "node-0.sh"
    script.parent.mkdir()
    script.write_text(render(spec, site, "torchrun", 0))
    apply_fix(tmp_path, (("NCCL_SHM_DISABLE", "1 2"),), ("NCCL_SOCKET_IFNAME",))
    text = script.read_text()
    assert text.index("export COCKPIT_HOST=") < text.index("unset NCCL_SOCKET_IFNAME") < \
        text.index("export NCCL_SHM_DISABLE='1 2'") < text.index("\nexec ")
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0


def test_a_script_python_cannot_compile_is_not_retried(tmp_path):
    # the rank log of a real Slurm attempt (tests/slurm/test_slurm_recover.py's script, broken once): python
    # prints no "Traceback" line for a file it cannot compile, only the place and the error
    from cockpit.launch.recovery import failure_outcome
    from cockpit.run.records import FirstFailure
    from cockpit.run.store import RunStatus

    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "rank-0.n1.log").write_text(
        '  File "/tmp/node_fault.py", line 10\n'
        '    f.write(json.dumps({"time": time.time(), "step": step}) + "\n'
        "                                                              ^\n"
        "SyntaxError: unterminated string literal (detected at line 10)\n")
    status = RunStatus(run_id="r", name="r", launcher="slurm", job_file="j", hosts=["n1"], world_size=1)
    status.first_failure = FirstFailure(0, "n1", 1, 1.0, "exit code 1")
    now = failure_outcome(tmp_path, status)
    assert now.bad_input and now.cause.startswith("rank 0 raised SyntaxError"), now
    assert decide(POLICY, [], now, 0).words.startswith("not retried: the script cannot run as given")


def test_the_cause_is_read_from_the_failing_rank_log_on_its_own_host(tmp_path):
    # a relaunch on another node (Slurm --exclude) leaves two logs for rank 0: the cause is in the failing host's
    from cockpit.launch.recovery import failure_outcome
    from cockpit.run.records import FirstFailure
    from cockpit.run.store import RunStatus

    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "rank-0.n1.log").write_text("x\n[cockpit] attempt 1 (COCKPIT_ATTEMPT=1) of 2 starts\n")
    xid = "[Wed Jul 31 23:14:18 2024] NVRM: Xid (PCI:0000:00:05): 43, pid=1045242, name=pt_main_thread, Ch 00000008"
    (tmp_path / "logs" / "rank-0.n2.log").write_text(f"{xid}\n")
    status = RunStatus(run_id="r", name="r", launcher="slurm", job_file="j", hosts=["n2"], world_size=1)
    status.first_failure = FirstFailure(0, "n2", 1, 1.0, "exit code 1")
    now = failure_outcome(tmp_path, status)
    assert (now.host, now.remedy, now.cause) == ("n2", "hardware", "rank 0 had a GPU fault (Xid)"), now


def test_the_resume_step_is_read_from_rank_0s_log_of_this_attempt_when_it_moved_node(tmp_path):
    # attempt 0 on n1 resumed from step 10, attempt 1 on n2 (the newer log) from step 20: the newer one counts,
    # whichever order the directory lists them in
    import os

    from cockpit.launch.attempt_files import resumed_from

    logs = tmp_path / "logs"
    logs.mkdir()
    for host, step, mtime in (("n2", 20, 2_000_000_000), ("n1", 10, 1_000_000_000), ("a", 5, 1_500_000_000)):
        path = logs / f"rank-0.{host}.log"
        path.write_text(f"[cockpit] resumed from checkpoint step={step}\n")
        os.utime(path, (mtime, mtime))
    (logs / "rank-1.n3.log").write_text("[cockpit] resumed from checkpoint step=99\n")
    os.utime(logs / "rank-1.n3.log", (3_000_000_000, 3_000_000_000))
    assert resumed_from(tmp_path) == 20
    os.utime(logs / "rank-0.n1.log", (2_500_000_000, 2_500_000_000))
    assert resumed_from(tmp_path) == 10
    assert resumed_from(tmp_path / "nothing") is None


def test_the_attempt_marker_goes_to_every_log_of_a_rank_on_every_host(tmp_path):
    # rank 0 ran on n1 (attempt 0) and n2 (attempt 1): attempt 2's marker ends both, so neither earlier
    # failure is read as attempt 2's
    from cockpit.launch.attempt_files import mark
    from cockpit.launch.recovery import MARK, Outcome, section

    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("rank-0.n1.log", "rank-0.n2.log", "rank-1.n2.log", "agent.n2.log"):
        (logs / name).write_text("Traceback (most recent call last):\nRuntimeError: boom\n")
    (logs / "rank-0.n1.exit").write_text("1\n")
    mark(tmp_path, 2, Outcome(end="failure", rank=0, host="n2", cause="rank 0 raised"), relaunches=3)
    for name in ("rank-0.n1.log", "rank-0.n2.log", "rank-1.n2.log", "agent.n2.log"):
        text = (logs / name).read_text()
        assert text.count(MARK) == 1 and text.endswith("of attempt 1 (rank 0 on n2)\n"), (name, text)
        assert section(logs / name) == []  # nothing of attempt 2 yet: the earlier failure is behind the marker
    assert (logs / "rank-0.n1.exit").read_text() == "1\n"


def test_a_node_srun_reports_failed_is_blamed_over_its_ranks_sigterm(tmp_path):
    """As the test Slurm wrote it (slurmd stopped, node set DOWN, --no-requeue): the rank's log says nothing, the
    batch log has srun's line; the node is left out of the next attempt (Slurm: --exclude)."""
    from cockpit.launch.recovery import failure_outcome
    from cockpit.run.records import FirstFailure
    from cockpit.run.status import RunStatus

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank-0.n1.log").write_text("[down] attempt=0 node=n1\n")
    (logs / "agent.sbatch.log").write_text("cockpit: start restart=0 job=7 nodes=n1\nsrun: Job step aborted: "
                                           "Waiting up to 32 seconds for job step to finish.\n"
                                           "srun: error: Node failure on n1\n")
    s = RunStatus("r", "t", "slurm", "/j.yaml", ["n1"], 1)
    s.first_failure = FirstFailure(0, "n1", 143, 10.5, "killed by SIGTERM (status 143)")
    out = failure_outcome(tmp_path, s)
    assert (out.node, out.remedy, blame(out)) == ("n1", "hardware", ("n1",))
    assert out.cause == "Slurm lost node n1 (srun: Node failure on n1), and rank 0 was killed by SIGTERM (status 143)"
    s.launcher = "ssh"  # the line means nothing to another launcher
    assert failure_outcome(tmp_path, s).node is None
    (logs / "agent.sbatch.log").write_text("srun: error: Node failure on n1\n[cockpit] attempt 1 (COCKPIT_ATTEMPT=1)"
                                           " of 2 starts: relaunched\n")
    s.launcher = "slurm"  # an earlier attempt's node failure is not this one's
    assert failure_outcome(tmp_path, s).node is None
