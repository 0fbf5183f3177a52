"""Another user can run code as you (issue 27, 1): whoever can rename a run directory, or any directory above it,
can put their own rank-wrapper.<host>.sh where torchrun will run it as you. cockpit refuses such a runs directory
(exit 2, the reason and the fix) before it makes anything; in a sticky shared one (/tmp-like) the kernel stops the
rename, which the attack below tries for the whole run. Real users (useradd), real renames, a real torchrun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from safety.hostile import USER_PYTHON, as_user, cockpit, make_run

from cockpit.run.store import list_runs

SCRIPT = 'import os\nprint("rank", os.environ.get("RANK"), "ok", flush=True)\n'


def job_file(where: Path, name: str = "trusty") -> Path:
    (where / "train.py").write_text(SCRIPT)
    job = where / f"{name}.yaml"
    job.write_text(f"name: {name}\nscript: {where / 'train.py'}\nlauncher: local\ngpus: none\nprocs_per_node: 1\n"
                   "env:\n  API_KEY: secret-of-the-victim\n")
    for path in (where, where / "train.py", job):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return job


def refused(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "hint:" in r.stderr, r.stderr
    for word in words:
        assert word in r.stderr, r.stderr


def test_a_runs_directory_of_another_user_is_refused_before_anything_is_made(users, tmp_shared):
    victim, attacker = users
    jobs = tmp_shared(0o755)
    for mode in (0o777, 0o1777):  # sticky or not: its owner may rename anything in it
        runs = tmp_shared(mode, owner=attacker)
        r = cockpit("run", str(job_file(jobs)), "--no-preflight", runs=runs, user=victim)
        refused(r, f"belongs to {attacker.name}", str(runs))
        assert list(runs.iterdir()) == []


def test_a_runs_directory_others_may_write_without_the_sticky_bit_is_refused(users, tmp_shared):
    victim, _ = users
    jobs, runs = tmp_shared(0o755), tmp_shared(0o777)  # root's, but anyone may rename what is in it
    r = cockpit("run", str(job_file(jobs)), "--no-preflight", runs=runs, user=victim)
    refused(r, "writable by other users (mode 0777) and not sticky", f"chmod +t {runs}")
    assert list(runs.iterdir()) == []


def test_a_directory_above_the_runs_directory_of_another_user_is_refused(users, tmp_shared):
    victim, attacker = users
    jobs, above = tmp_shared(0o755), tmp_shared(0o755, owner=attacker)
    runs = above / "runs"
    runs.mkdir(mode=0o700)
    os.chown(runs, victim.uid, victim.gid)  # the victim's own directory, in one the attacker may rename
    r = cockpit("run", str(job_file(jobs)), "--no-preflight", runs=runs, user=victim)
    refused(r, f"{above} belongs to {attacker.name}")
    assert list(runs.iterdir()) == []


def test_a_sticky_shared_directory_and_the_users_own_group_writable_one_are_accepted(users, tmp_shared):
    """What may hold a run: a 1777 directory of root's (each run directory the caller's own, 0700), and a
    directory of the caller's writable by its user-private group (umask 002 distributions). The run gets past
    the check and is made (the system python has no torch, so torchrun fails: that is not what is tested)."""
    victim, _ = users
    jobs, sticky, above = tmp_shared(0o755), tmp_shared(0o1777), tmp_shared(0o755)
    grouped = above / "runs"
    grouped.mkdir()
    grouped.chmod(0o775)
    os.chown(grouped, victim.uid, victim.gid)
    for runs in (sticky, grouped):
        r = cockpit("run", str(job_file(jobs)), "--no-preflight", "-q", runs=runs, user=victim, timeout=120)
        assert r.returncode != 2 and "hint: chmod" not in r.stderr, r.stderr
        (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
        st = run_dir.stat()
        assert (st.st_uid, st.st_mode & 0o777) == (victim.uid, 0o700)
        assert "cockpit supervisor:" not in (run_dir / "logs" / "supervisor.log").read_text()


ATTACK = textwrap.dedent('''
    import os, signal, sys, time
    runs, marker = sys.argv[1], sys.argv[2]
    me, tried, moved, until = os.getuid(), 0, 0, time.monotonic() + float(sys.argv[3])
    wrapper = "#!/bin/sh\\necho attacker ran as $(id -un) >" + marker + "\\n"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while time.monotonic() < until:
            for name in os.listdir(runs):
                path = os.path.join(runs, name)
                try:
                    if os.lstat(path).st_uid == me:
                        continue
                    tried += 1
                    os.rename(path, path + ".moved")  # the issue's attack: then plant a directory of ours there
                    moved += 1
                    os.makedirs(os.path.join(path, "logs"))
                    for host in ("node0", os.uname().nodename):
                        with open(os.path.join(path, f"rank-wrapper.{host}.sh"), "w") as f:
                            f.write(wrapper)
                except OSError:
                    continue
            time.sleep(0.005)
    finally:
        print(tried, moved, flush=True)
''')


@pytest.mark.slow
def test_the_rename_attack_fails_in_a_sticky_shared_runs_directory_and_the_run_is_the_victims(users, tmp_shared):
    """The issue's attack, replayed for the whole run: the attacker renames every entry of the shared runs
    directory that is not theirs as soon as it appears and plants a rank wrapper in its place. In a 1777
    directory (root's, like /tmp) every rename fails; the run succeeds with cockpit's own wrapper. The victim
    is root here: only root's interpreter has torch (torchrun), and root is a victim like any other."""
    _, attacker = users
    jobs, runs, spot = tmp_shared(0o755), tmp_shared(0o1777), tmp_shared(0o1777)
    marker = spot / "attacker-ran"
    attack = subprocess.Popen(as_user(attacker, [USER_PYTHON, "-c", ATTACK, str(runs), str(marker), "60"]),
                              stdout=subprocess.PIPE, text=True)
    try:
        r = cockpit("run", str(job_file(jobs)), "-q", runs=runs, timeout=120)
    finally:
        attack.terminate()
        out, _ = attack.communicate(timeout=10)
    ((run_dir, status),) = list_runs(runs)
    assert r.returncode == 0 and status.state == "succeeded", r.stdout + r.stderr
    assert not marker.exists() and not Path(f"{run_dir}.moved").exists()
    st = run_dir.stat()
    assert st.st_uid == 0 and st.st_mode & 0o777 == 0o700
    assert "rank 0 ok" in (run_dir / "logs" / f"rank-0.{status.hosts[0]}.log").read_text()
    tried, moved = map(int, out.split())
    assert moved == 0 and tried >= 10, out  # it tried all along the run, and never once succeeded


def test_the_supervisor_runs_nothing_from_a_run_directory_that_is_not_the_callers(users, tmp_shared):
    """The supervisor checks the path again before it starts the node script: a run directory of another
    user (or one it cannot trust) ends it at once, exit 2, said in its log, nothing run."""
    _, attacker = users
    runs = tmp_shared(0o1777)
    run = make_run(runs, "planted-run", state="starting", owner=attacker)
    (run / "commands").mkdir()
    marker = runs / "ran"
    (run / "commands" / "node-0.sh").write_text(f"touch {marker}\n")
    r = subprocess.run([sys.executable, "-m", "cockpit.launch.supervisor", str(run)], capture_output=True, text=True,
                       timeout=60, check=False, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert r.returncode == 2 and f"belongs to {attacker.name}" in r.stderr, r.stderr
    assert not marker.exists()


def test_ps_in_a_shared_directory_lists_others_runs_read_only_and_never_writes_them(users, tmp_shared):
    """Another user's readable run is listed with its owner, their private (0700) run is not listed, and ps does
    not work out (or write back) a run that is not the caller's, even one whose supervisor looks dead; symlinks
    planted at the temporary names an older cockpit used point at a file of the victim's, which stays as it was."""
    victim, attacker = users
    runs = tmp_shared(0o1777)
    mine = make_run(runs, "mine-20260101-000000-aaaa", owner=victim)
    theirs = make_run(runs, "theirs-20260101-000000-bbbb", state="running", owner=attacker, mode=0o755,
                      supervisor={"pid": 4_000_000, "start": "1"})
    make_run(runs, "private-20260101-000000-cccc", owner=attacker, mode=0o700)
    precious = runs / "victims-file"
    precious.write_text("the victim's own data\n")
    os.chown(precious, victim.uid, victim.gid)
    for pid in range(2, 4000):  # where the old write_atomic's temporary would have been
        (theirs / f".status.json.{pid}.tmp").symlink_to(precious)
    before = sorted(p.name for p in theirs.iterdir()), (theirs / "status.json").read_bytes()
    r = cockpit("ps", runs=runs, user=victim)
    assert r.returncode == 0, r.stderr
    assert mine.name in r.stdout and theirs.name in r.stdout and "private" not in r.stdout
    assert f"owner: {attacker.name}" in r.stdout and "running" in r.stdout
    rows = json.loads(cockpit("ps", "--json", runs=runs, user=victim).stdout)["runs"]
    assert {row["run_id"]: row.get("owner") for row in rows} == {mine.name: None, theirs.name: attacker.name}
    assert precious.read_text() == "the victim's own data\n"
    assert (sorted(p.name for p in theirs.iterdir()), (theirs / "status.json").read_bytes()) == before
    logs = cockpit("logs", theirs.name, runs=runs, user=victim)  # reading is allowed: bounded, regular files
    assert logs.returncode == 0, logs.stderr
    last = cockpit("attach", "last", runs=runs, user=victim)  # `last` is the caller's own latest, not the newest
    assert last.returncode == 0 and mine.name in last.stdout and theirs.name not in last.stdout, last.stderr
