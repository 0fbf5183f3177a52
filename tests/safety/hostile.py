"""What the hostile-case tests share: two throwaway local users (created with useradd as root, as CI runs, and
removed at the end), cockpit run as one of them (setpriv, the system python, which every user can run), and run
directories written by hand the way cockpit's supervisor leaves them.

Shared directories are made under /tmp, not pytest's tmp_path: /tmp/pytest-of-root is root's alone (0700), and
the other users must reach them, exactly as on a login node."""

from __future__ import annotations

import grp
import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import REPO

HOST = "node0"
USER_PYTHON = "/usr/bin/python3"  # root's interpreter lives under /root (0700): other users cannot run it


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int


def add_user(prefix: str) -> User:
    name = f"{prefix}{secrets.token_hex(3)}"
    subprocess.run(["useradd", "--no-create-home", "--user-group", "--shell", "/bin/sh", name], check=True,
                   capture_output=True)
    entry = pwd.getpwnam(name)
    return User(name, entry.pw_uid, entry.pw_gid)


def remove_user(user: User) -> None:
    subprocess.run(["userdel", user.name], check=False, capture_output=True)
    try:  # --user-group made a group of the same name; userdel removes it where USERGROUPS_ENAB is on
        grp.getgrnam(user.name)
        subprocess.run(["groupdel", user.name], check=False, capture_output=True)
    except KeyError:
        pass


def as_user(user: User | None, argv: list[str]) -> list[str]:
    """``argv`` run as ``user`` (its own uid and group, no others), or as root for None."""
    if user is None:
        return argv
    return ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups", "--", *argv]


def cockpit(*args: str, runs: Path, user: User | None = None, timeout: float = 60,
            cwd: str = "/") -> subprocess.CompletedProcess:
    """`cockpit ARGS` with COCKPIT_RUNS_DIR=runs, as ``user`` (root: None). ``timeout`` is a hang guard only."""
    python = sys.executable if user is None else USER_PYTHON
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "NO_COLOR": "1",
           "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1", "COCKPIT_RUNS_DIR": str(runs),
           "COLUMNS": "160"}
    return subprocess.run(as_user(user, [python, "-m", "cockpit", *args]), capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=cwd, check=False)


def shared_dir(mode: int, owner: User | None = None) -> Path:
    """A new directory in /tmp with ``mode``, owned by ``owner`` (root: None)."""
    path = Path(tempfile.mkdtemp(prefix="cockpit-safety-", dir="/tmp"))
    path.chmod(mode)
    if owner is not None:
        os.chown(path, owner.uid, owner.gid)
    return path


def status(run_id: str, state: str, **more) -> dict:
    now = time.time()
    final = state in ("succeeded", "failed", "stopped", "lost")
    s = {"run_id": run_id, "name": "hostile", "launcher": "local", "job_file": "/nonexistent/job.yaml",
         "hosts": [HOST], "world_size": 1, "state": state, "created": now - 60, "started": now - 59,
         "ended": now - 1 if final else None, "exit_code": (1 if state == "failed" else 0) if final else None,
         "supervisor": None, "nodes": [], "ranks": {}, "first_failure": None, "stop_requested": False,
         "stopped_at": None, "note": None}
    return {**s, **more}


def make_run(runs: Path, name: str, state: str = "succeeded", owner: User | None = None, mode: int = 0o700,
             **more) -> Path:
    """A run directory as the supervisor leaves it (status.json, logs/, metrics/), owned by ``owner``."""
    run = runs / name
    for sub in ("logs", "metrics"):
        (run / sub).mkdir(parents=True)
    (run / "status.json").write_text(json.dumps(status(name, state, **more)))
    run.chmod(mode)
    if owner is not None:
        chown_tree(run, owner)
    return run


def chown_tree(path: Path, user: User) -> None:
    for p in [path, *path.rglob("*")]:
        os.chown(p, user.uid, user.gid, follow_symlinks=False)


def rank_file(run: Path, kind: str, rank: int = 0) -> Path:
    return run / "logs" / f"rank-{rank}.{HOST}.{kind}"


@pytest.fixture(scope="session")
def users():
    """(victim, attacker): two throwaway local users, removed at the end."""
    if os.geteuid() != 0:
        pytest.fail("the hostile-user tests create local users: run them as root (CI does)")
    for tool in ("useradd", "userdel", "setpriv"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing (util-linux / passwd)")
    made = [add_user("ckv"), add_user("cka")]
    try:
        yield tuple(made)
    finally:
        for user in made:
            remove_user(user)


@pytest.fixture
def tmp_shared():
    """Directories made in /tmp by the test, removed after it."""
    made: list[Path] = []

    def make(mode: int, owner: User | None = None) -> Path:
        made.append(shared_dir(mode, owner))
        return made[-1]

    yield make
    for path in made:
        shutil.rmtree(path, ignore_errors=True)
