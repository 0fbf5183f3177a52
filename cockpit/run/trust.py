"""Whose runs are whose: which runs directory may hold the caller's runs, and which runs the caller may act on.

The threat (a login node, a team's runs directory): torchrun runs ``$COCKPIT_RUN_DIR/rank-wrapper.HOST.sh``
by path, the ranks import ``$COCKPIT_RUN_DIR/hook/sitecustomize.py`` by path, and the supervisor runs
``commands/node-0.sh`` by path — all as the caller. Whoever can rename the run directory, or any directory
above it, can put a directory of their own at that path and have their code run as the caller. Holding a
descriptor does not help here: torchrun and bash open those paths themselves, long after cockpit checked.

So the path itself must be one nobody else can change, and that is what ``trusted_runs_dir`` checks, once,
before a run directory is made: every directory from / down to the runs directory belongs to root or to the
caller, and none that another user may write lacks the sticky bit (with it, the kernel lets only an entry's
owner, the directory's owner or root rename the entry: /tmp, a 1777 or 3770 team directory owned by root).
The run directory itself is created by the caller, 0700, in that checked directory: from then on no other user
can rename, replace or write anything on its path, so the scripts run by path are the ones cockpit wrote. A
per-user directory inside a shared one would not be enough alone (its owner, or a non-sticky parent's
writers, could still rename it); the check on the whole path is what makes the paths sound.

Acting on a run (stop, stacks, writing its status) needs the run directory to be the caller's (``own_run``);
reading one (ps, logs, plot, diagnose, attach) does not: reads are bounded and regular-file-only
(cockpit.fs.safeio), and a run of another user is listed read-only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cockpit.fs.safeio import Untrusted, not_owned_reason, others_may_write, owned, user_name

HINT_OWN = ("set COCKPIT_RUNS_DIR (or --runs-dir) to a directory of yours that only you can write, e.g. "
            "~/.local/state/cockpit/runs, the default")


def _refuse(path: Path, st: os.stat_result) -> str | None:
    """Why ``path`` (a directory on the way to ``runs_dir``) lets another user replace what is below it."""
    me = os.geteuid()
    if st.st_uid not in (0, me):
        return (f"{path} belongs to {user_name(st.st_uid)}, who can rename or replace anything under it (your "
                f"run directories, and the scripts torchrun runs as you) (hint: {HINT_OWN}; or have root own "
                f"{path}, mode 1777 or 3770)")
    if others_may_write(st) and not st.st_mode & stat.S_ISVTX:
        mode = f"{stat.S_IMODE(st.st_mode):04o}"
        return (f"{path} is writable by other users (mode {mode}) and not sticky: another user could rename "
                f"your run directory and put their own scripts in its place, which torchrun would run as you "
                f"(hint: chmod +t {path}, so that only an entry's owner may rename it; or {HINT_OWN})")
    return None


def trusted_runs_dir(runs_dir: Path) -> Path:
    """The runs directory, created (0700) if missing, as a path with no symlink left, checked from / down
    (module doc); Untrusted says why not and what to do."""
    real = Path(os.path.realpath(runs_dir))
    _check_path(real, real)  # the part that exists, before anything is created under it
    real.mkdir(mode=0o700, parents=True, exist_ok=True)
    real = Path(os.path.realpath(real))
    _check_path(real, real)
    return real


def _check_path(path: Path, runs_dir: Path) -> None:
    for part in (*reversed(path.parents), path):
        try:
            st = os.lstat(part)
        except FileNotFoundError:
            return  # made by the caller from here on (0700)
        if stat.S_ISLNK(st.st_mode):  # replaced by a link after realpath: someone is changing the path
            raise Untrusted(f"{part} became a symbolic link while cockpit checked it (hint: {HINT_OWN})")
        why = _refuse(part, st)
        if why is not None:
            raise Untrusted(f"runs directory {runs_dir}: {why}")


def check_run_dir(run_dir: Path) -> None:
    """Before anything of a run is executed (the supervisor, at its start): the run directory is the caller's,
    nobody else may write it, and nobody else may change the path to it (trusted_runs_dir's rule)."""
    real = Path(os.path.realpath(run_dir))
    _check_path(real.parent, real.parent)
    st = os.lstat(real)
    if not stat.S_ISDIR(st.st_mode) or not owned(st):
        raise Untrusted(f"run directory {real}: {not_owned_reason(real, st)}: cockpit runs nothing from it "
                        f"(hint: {HINT_OWN})")


def check_new_run_dir(fd: int, run_dir: Path) -> None:
    """A run directory just made: the caller's, 0700 (a sticky shared runs directory holds only such)."""
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o077:
        raise Untrusted(f"{not_owned_reason(run_dir, st)}: a new run directory must be yours, mode 0700")


def owner(run_dir: Path) -> str | None:
    """None for a run directory of the caller's own; else who it belongs to (or why it is not the caller's
    alone: writable by others)."""
    try:
        st = os.stat(run_dir)
    except OSError:
        return None  # gone: nothing to act on, the caller's command will say so
    if owned(st):
        return None
    return user_name(st.st_uid) if st.st_uid != os.geteuid() else "writable by others"


def own_run(run_dir: Path, command: str, doing: str) -> None:
    """Untrusted unless ``run_dir`` is the caller's: cockpit never writes into, signals for or stops a run of
    another user (``command``: the cockpit command asked for; ``doing``: what it would do, in words)."""
    who = owner(run_dir)
    if who is None:
        return
    if who == "writable by others":
        raise Untrusted(f"run {run_dir.name}: {run_dir} is writable by other users, so it may not be what you "
                        f"started: cockpit does not {doing} it (hint: chmod 700 {run_dir} if it is yours)")
    raise Untrusted(f"run {run_dir.name} belongs to {who}: cockpit does not {doing} a run of another user "
                    f"(hint: {who} can: cockpit {command} {run_dir.name}; root can do it as them: "
                    f"runuser -u {who} -- cockpit {command} {run_dir})")
