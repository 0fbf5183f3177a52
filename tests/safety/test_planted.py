"""Writes follow planted symlinks; pids from planted files are signalled (issue 27, 2). A run of another user is
never stopped, signalled or written (exit 2, even for root); in the caller's own run a pid is signalled only when
the process is the run's (COCKPIT_RUN_ID in its environment; for the supervisor: its command line and run
directory), never because a file names it. Real users, real symlinks, real processes that record a signal."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from helpers import wait_for
from safety.hostile import USER_PYTHON, as_user, cockpit, make_run, rank_file

from cockpit.fs import safeio
from cockpit.launch import procs
from cockpit.run.store import read_status

# A process that records each signal it gets in a file, and says when its handlers are set.
CATCHER = textwrap.dedent('''
    import signal, sys, time
    out = sys.argv[1]
    def record(sig, _frame):
        with open(out, "a") as f:
            f.write(signal.Signals(sig).name + "\\n")
    for sig in (signal.SIGTERM, signal.SIGURG, signal.SIGUSR1):
        signal.signal(sig, record)
    print("ready", flush=True)
    while True:
        time.sleep(0.05)
''')


class Catcher:
    """A process (of ``user``, root for None) that writes down every SIGTERM / SIGURG it gets."""

    def __init__(self, where: Path, user=None):
        self.record = where / f"signals-{time.monotonic_ns()}"
        self.record.touch()
        if user is not None:
            os.chown(self.record, user.uid, user.gid)
        python = sys.executable if user is None else USER_PYTHON
        self.proc = subprocess.Popen(as_user(user, [python, "-c", CATCHER, str(self.record)]), stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout.readline().strip() == "ready"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def got(self) -> str:
        return self.record.read_text()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def end(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


def test_stop_and_stacks_refuse_a_planted_run_for_the_victim_and_for_root(users, tmp_shared):
    """The attacker plants a running run whose status.json names the victim's process (with its real start time)
    as the supervisor and whose pid file names it too, and a rank-0 .stacks symlink to a file of the victim's.
    Neither the victim's nor root's `cockpit stop` / `cockpit stacks` touches either."""
    victim, attacker = users
    runs, spot = tmp_shared(0o1777), tmp_shared(0o1777)
    target = Catcher(spot, victim)
    try:
        start = procs.start_time(target.pid)
        planted = make_run(runs, "planted-20260101-000000-dddd", state="running", owner=attacker, mode=0o755,
                           supervisor={"pid": target.pid, "start": start})
        precious = spot / "victims-notes"
        precious.write_text("mine\n")
        os.chown(precious, victim.uid, victim.gid)
        rank_file(planted, "log").write_text("[rank0] step 1\n")
        rank_file(planted, "pid").write_text(f"{target.pid}\n")
        rank_file(planted, "stacks").symlink_to(precious)
        for who in (victim, None):
            stop = cockpit("stop", planted.name, "--grace", "1", runs=runs, user=who)
            stacks = cockpit("stacks", planted.name, "--timeout", "1", runs=runs, user=who)
            for r in (stop, stacks):
                assert r.returncode == 2 and f"belongs to {attacker.name}" in r.stderr, r.stderr
                assert "hint:" in r.stderr and "Traceback" not in r.stderr
        assert target.alive() and target.got() == ""
        assert precious.read_text() == "mine\n"
        assert read_status(planted).state == "running"  # nothing written into it
    finally:
        target.end()


def test_a_status_naming_someone_elses_process_with_its_start_time_is_not_signalled(tmp_path):
    """In the caller's own run (a status.json copied, or damaged): the supervisor named is a process with the
    right start time but not the run's supervisor. `cockpit stop` does not SIGTERM it; the run is stopped as one
    without a supervisor."""
    runs = tmp_path / "runs"
    runs.mkdir()
    bystander = Catcher(tmp_path)
    try:
        run = make_run(runs, "mine-20260101-000000-eeee", state="running",
                       supervisor={"pid": bystander.pid, "start": procs.start_time(bystander.pid)})
        r = cockpit("stop", run.name, "--grace", "1", runs=runs)
        assert r.returncode == 0 and "stopped" in r.stderr, r.stderr
        assert bystander.alive() and bystander.got() == ""
        assert read_status(run).state == "stopped"
    finally:
        bystander.end()


def test_stacks_signals_only_the_runs_own_ranks_and_never_appends_through_a_link(tmp_path):
    """The caller's own running run with two ranks: rank 0's pid file names a process of the run (COCKPIT_RUN_ID in
    its environment), rank 1's a stale pid now taken by another process. Only rank 0 gets SIGURG. Then a symlink
    at rank 0's .stacks name: stacks refuses to append through it, and the file it points at is unchanged."""
    runs = tmp_path / "runs"
    runs.mkdir()
    run = make_run(runs, "mine-20260101-000000-ffff", state="running", world_size=2)
    os.environ["COCKPIT_RUN_ID"] = run.name
    try:
        rank0 = Catcher(tmp_path)
    finally:
        del os.environ["COCKPIT_RUN_ID"]
    stale = Catcher(tmp_path)
    try:
        for rank, proc in ((0, rank0), (1, stale)):
            rank_file(run, "log", rank).write_text(f"[rank{rank}] step 1\n")
            rank_file(run, "pid", rank).write_text(f"{proc.pid}\n")
        r = cockpit("stacks", run.name, "--timeout", "1", runs=runs)
        assert "Traceback" not in r.stderr, r.stderr
        wait_for(lambda: rank0.got(), 10, "rank 0's SIGURG")
        assert rank0.got() == "SIGURG\n" and stale.got() == ""
        elsewhere = tmp_path / "elsewhere"
        elsewhere.write_text("untouched\n")
        stacks = rank_file(run, "stacks")
        stacks.unlink()
        stacks.symlink_to(elsewhere)
        r = cockpit("stacks", run.name, "--timeout", "1", runs=runs)
        assert r.returncode == 2 and "symbolic link" in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert elsewhere.read_text() == "untouched\n"
    finally:
        rank0.end()
        stale.end()


def test_write_atomic_replaces_a_symlink_at_its_name_and_never_writes_through_it(tmp_path):
    """status.json replaced by a symlink to another file: the write replaces the link, the other file stays."""
    other = tmp_path / "other"
    other.write_text("keep\n")
    (tmp_path / "run").mkdir(mode=0o700)
    link = tmp_path / "run" / "status.json"
    link.symlink_to(other)
    safeio.write_atomic(link, "{}\n", own_dir=True)
    assert other.read_text() == "keep\n" and not link.is_symlink() and link.read_text() == "{}\n"
    assert sorted(p.name for p in link.parent.iterdir()) == ["status.json"]  # no temporary left


def test_writes_into_a_directory_of_another_user_are_refused(users, tmp_shared):
    """Root's cockpit writes a run file only into a directory root owns: an attacker's run directory gets
    nothing, not even through a name that does not exist yet."""
    _, attacker = users
    runs = tmp_shared(0o1777)
    planted = make_run(runs, "planted-20260101-000000-9999", state="running", owner=attacker, mode=0o777)
    for write in (lambda: safeio.write_atomic(planted / "stop.json", "{}", own_dir=True),
                  lambda: safeio.write_private(planted / "job.yaml", "x"),
                  lambda: safeio.open_append(planted / "logs" / "x.stacks")):
        try:
            write()
        except safeio.Untrusted as exc:
            assert attacker.name in str(exc)
        else:
            raise AssertionError("wrote into another user's directory")
    assert sorted(p.name for p in planted.iterdir()) == ["logs", "metrics", "status.json"]


def test_a_signal_goes_only_to_a_process_of_the_run(tmp_path):
    """procs.has_run_id: a process with the run id in its environment is the run's; the same pid number after
    that process ended, or a process without it, is not."""
    os.environ["COCKPIT_RUN_ID"] = "run-a"
    try:
        member = Catcher(tmp_path)
    finally:
        del os.environ["COCKPIT_RUN_ID"]
    outsider = Catcher(tmp_path)
    try:
        assert procs.has_run_id(member.pid, "run-a")
        assert not procs.has_run_id(member.pid, "run-b") and not procs.has_run_id(outsider.pid, "run-a")
    finally:
        member.end()
        outsider.end()
    assert not procs.has_run_id(member.pid, "run-a")
