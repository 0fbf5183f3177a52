"""Run directories and the registry of runs.

A run directory (mode 0700) holds everything about one launch, so that any cockpit — the one that started
it, a later `cockpit attach`, the TUI — can pick it up from disk alone:

    job.yaml            the job file as given
    commands/           the rendered scripts that ran (node-<n>.sh)
    status.json         state, pids, times, per-rank exits, first failure (written atomically)
    logs/               rank-<R>.<host>.log and .exit per rank, agent.<host>.log (torchrun), supervisor.log
    metrics/            rank-<R>.jsonl, written by cockpit.train
    checkpoints/        written by cockpit.train

Where each file lives is cockpit.run.layout's to say (the full list is there); this module writes and reads
status.json and the exit records. status.json's typed value is cockpit.run.status.RunStatus (its records:
cockpit.run.records), named here too for the callers that read runs, as is the layout's ``rank_files``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import signal
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from cockpit.fs import safeio
from cockpit.fs.paths import too_long
from cockpit.run import layout, summary
from cockpit.run.layout import rank_files
from cockpit.run.records import FirstFailure, NodeRecord, RankExit
from cockpit.run.status import FINAL_STATES, STATES, RunState, RunStatus, StatusError
from cockpit.run.trust import check_new_run_dir, owner, trusted_runs_dir

__all__ = ["FINAL_STATES", "STATES", "FirstFailure", "NodeRecord", "RankExit", "RunStatus", "StatusError"]


def new_run_id(name: str, now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now if now is not None else time.time()))
    import secrets  # (with hashlib: 10-20 ms of a start that listing runs does not need)

    return f"{name}-{stamp}-{secrets.token_hex(2)}"


def create_run_dir(runs_dir: Path, run_id: str) -> Path:
    """Make the run directory, 0700, in a runs directory nobody else can change (cockpit.run.trust; the runs
    directory is created 0700 if new). Never reuses an existing one. Returned by its path with no symlink
    left: that is the path torchrun and the ranks run scripts from."""
    runs_dir = trusted_runs_dir(runs_dir)
    parent = os.open(runs_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.mkdir(run_id, 0o700, dir_fd=parent)
        fd = os.open(run_id, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    finally:
        os.close(parent)
    run_dir = runs_dir / run_id
    try:
        check_new_run_dir(fd, run_dir)
        for sub in (layout.COMMANDS, layout.LOGS):
            os.mkdir(sub, 0o700, dir_fd=fd)
    finally:
        os.close(fd)
    install_hook(run_dir)
    return run_dir


def install_hook(run_dir: Path) -> None:
    """The rank-side hook (cockpit.node.rankhook) as <run>/hook/sitecustomize.py, with its companions (the
    rank's links reader among them: a Slurm rank imports it when asked); the rank wrapper puts that folder
    first on each rank's PYTHONPATH."""
    hook = layout.hook_dir(run_dir)
    hook.mkdir(mode=0o700, exist_ok=True)
    for name, source in (*layout.HOOK_FILES, *layout.RANK_LINK_FILES):
        write_private(hook / name, (Path(__file__).parents[1] / "node" / source).read_text(encoding="utf-8"))


def write_private(path: Path, text: str) -> None:
    """Write ``path`` readable by its owner only (0600, whatever the umask), in a directory of the caller's,
    never through a symlink (cockpit.fs.safeio): job files and node scripts hold env values such as API keys."""
    safeio.write_private(path, text)


def write_atomic(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never half of one; the file is 0600; a symlink at the
    temporary's name is never followed (cockpit.fs.safeio.write_atomic). On an error (a full disk, a read-only
    file system) the old file stays as it was, no temporary file is left behind, and the OSError is raised
    for the caller to record."""
    safeio.write_atomic(path, text)


def write_run_file(run_dir: Path, name: str, text: str) -> None:
    """write_atomic into a run directory, which must be the caller's (safeio.Untrusted otherwise): cockpit
    never writes into a run of another user."""
    safeio.write_atomic(run_dir / name, text, own_dir=True)


def write_status(run_dir: Path, status: RunStatus) -> None:
    """status.json; with a final status, its summary.json too (cockpit.run.summary), unless status.json was
    replaced by another writer meanwhile (read back: then theirs stands, and the next listing makes it)."""
    text = status.to_json()
    write_run_file(run_dir, layout.STATUS, text)
    if not summary.summarises(status):
        return
    try:
        raw, stamp = read_stamped(run_dir / layout.STATUS)
    except OSError:  # replaced this instant by something that is no status: no summary of ours to write
        return
    if raw == text.encode("utf-8"):
        with contextlib.suppress(OSError):  # a cache: one not written is made by the next listing
            summary.write(run_dir, summary.of_status(status, stamp))


STOP_FILE = layout.STOP  # a stop asked for: {"grace": seconds, "by": who}, read by the supervisor


def request_stop(run_dir: Path, grace: float, by: str = "cockpit stop") -> None:
    """Leave the stop's grace (cockpit stop --grace) for the supervisor, which reads it when told to stop."""
    write_run_file(run_dir, STOP_FILE, json.dumps({"grace": float(grace), "by": by}) + "\n")


def stop_request(run_dir: Path) -> dict:
    """What the last stop asked for ({} when none was written or it cannot be read)."""
    try:
        data = safeio.loads(safeio.read_bytes(run_dir / STOP_FILE, SMALL_FILE_BYTES))
        return data if isinstance(data, dict) and isinstance(data.get("grace"), (int, float)) else {}
    except (OSError, ValueError):
        return {}


def read_status(run_dir: Path) -> RunStatus | None:
    """The run's status; None when there is none yet or it cannot be read (load_status says why)."""
    try:
        return load_status(run_dir)
    except (FileNotFoundError, NotADirectoryError, StatusError):
        return None


def list_runs(runs_dir: Path) -> list[tuple[Path, RunStatus]]:
    """Every run under ``runs_dir`` with a status, oldest first. A run whose status.json cannot be read (not
    JSON, nested too deep, a FIFO, a device, too large) is listed too, as state ``unreadable`` with the reason
    in ``note``, so that one bad file neither hides the run nor breaks the list. Entries that are not
    directories (a symlink among them: a run directory is never one) are no runs."""
    found = [(d, got[0]) for d in run_dirs(runs_dir) if (got := listed_status(d)) is not None]
    return sorted(found, key=lambda item: item[1].created)


def run_dirs(runs_dir: Path) -> list[Path]:
    """The directories in ``runs_dir`` that may be runs (a symlink never is one); [] when it cannot be read.
    (The directory's entries are gone through as read, not held beside the paths: thousands in a listing.)"""
    base = Path(runs_dir)  # (base / name: half the cost of parsing each whole path again)
    try:
        with os.scandir(runs_dir) as entries:
            return [base / entry.name for entry in entries if _may_be_run(entry)]
    except OSError:
        return []


def _may_be_run(entry: os.DirEntry) -> bool:
    """Whether the entry may be a run directory: a directory, not a symlink; one that cannot be told, too (reading
    its status says what it is)."""
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return True


def listed_status(d: Path) -> tuple[RunStatus, summary.Stamp | None] | None:
    """How list_runs lists the directory ``d``: its status and the identity of the status.json read; an
    unreadable one (no stamp) with the reason; None for no run of the caller's to list (see list_runs)."""
    try:
        return load_stamped(d)
    except (FileNotFoundError, NotADirectoryError):
        return None  # no status.json (yet): not a run, or one being created this instant
    except StatusError as exc:
        if isinstance(exc.__cause__, PermissionError) and owner(d) is not None:
            return None  # another user's private run (0700) in a shared runs directory: theirs to list
        return unreadable_status(d, str(exc)), None
    except OSError as exc:
        return unreadable_status(d, str(exc)), None


UNREADABLE: RunState = "unreadable"  # list_runs' state for a run whose status.json cannot be read; never written
MAX_STATUS_BYTES = 16 << 20  # a status is a few KB; a sweep of 10,000 trials stays far below this
MAX_STATUS_DEPTH = 32  # status.json nests 5 deep; a deeper one is no status (and would break json.dumps)
SMALL_FILE_BYTES = 64 << 10  # an exit record, a pid file, stop.json: a line each


def read_stamped(path: Path) -> tuple[bytes, summary.Stamp]:
    """A status.json's bytes (at most MAX_STATUS_BYTES: safeio.TooLarge beyond) and its identity, from one
    descriptor: the stamp is that of the bytes read (cockpit.run.summary)."""
    with safeio.open_regular(path) as f:
        st = os.fstat(f.fileno())
        raw = safeio.read_capped(f, MAX_STATUS_BYTES)
    if len(raw) > MAX_STATUS_BYTES:
        raise safeio.TooLarge(errno.EFBIG, f"larger than {MAX_STATUS_BYTES} bytes", os.fspath(path))
    return raw, (st.st_ino, st.st_mtime_ns, st.st_size)


def load_status(run_dir: Path) -> RunStatus:
    """The run's status.json, checked field by field. Raises FileNotFoundError / NotADirectoryError when there
    is none, StatusError (with the reason) when it is there but unusable: not a regular file (a FIFO is
    never waited on), a symlink, too large, not JSON, nested too deep."""
    return load_stamped(run_dir)[0]


def load_stamped(run_dir: Path) -> tuple[RunStatus, summary.Stamp]:
    """load_status, and the identity of the status.json it read (cockpit.run.summary)."""
    path = run_dir / layout.STATUS
    try:
        raw, stamp = read_stamped(path)
    except (FileNotFoundError, NotADirectoryError):
        raise
    except safeio.TooLarge:
        raise StatusError(f"{path}: larger than {MAX_STATUS_BYTES} bytes") from None
    except OSError as exc:
        raise StatusError(f"{path}: cannot read it: {exc.strerror or exc}") from exc
    try:
        data = safeio.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        what = "empty" if not raw.strip() else f"not valid JSON ({exc}; truncated?)"
        raise StatusError(f"{path}: {what}") from None
    if not safeio.depth_at_most(data, MAX_STATUS_DEPTH):
        raise StatusError(f"{path}: nested deeper than {MAX_STATUS_DEPTH} levels: not a run status")
    return RunStatus.from_dict(data, f"{path}: "), stamp


def unreadable_status(run_dir: Path, reason: str) -> RunStatus:
    """A stand-in for a run whose status.json cannot be read: it shows in lists with the reason; nothing
    acts on it or writes it back."""
    try:
        created = run_dir.stat().st_mtime
    except OSError:
        created = 0.0
    return RunStatus(run_id=run_dir.name, name="?", launcher="?", job_file="", hosts=[], world_size=None,
                     state=UNREADABLE, created=created, note=reason)


class RunNotFound(LookupError):
    pass


def resolve_run(runs_dir: Path, ref: str) -> Path:
    """A run directory from a run id, a unique prefix of one, `last`, or a path to a run directory; any of
    these followed by /trial-I names a sweep's trial (`last/trial-2`)."""
    if (why := too_long(ref)) is not None:
        shown = ref if len(ref) <= 40 else ref[:37] + "..."
        raise RunNotFound(f"no run {shown!r}: {why} (hint: cockpit ps lists runs)")
    as_path = Path(ref)
    if (as_path / layout.STATUS).exists():
        return as_path
    head, sep, tail = ref.partition("/")
    if sep and re.fullmatch(r"trial-\d+", tail):
        trial = resolve_run(runs_dir, head) / tail
        if not (trial / layout.STATUS).exists():
            raise RunNotFound(f"run {trial.parent.name} has no {tail} (hint: cockpit sweep show "
                              f"{trial.parent.name} lists its trials)")
        return trial
    if len(as_path.parts) > 1 and as_path.is_dir():  # a path (not a bare id that a folder here happens to share)
        raise RunNotFound(f"{ref} is not a run directory (it has no {layout.STATUS}; hint: cockpit ps lists runs)")
    runs = list_runs(runs_dir)
    if ref in ("last", "latest"):  # the caller's own latest: a shared runs directory holds others' too
        mine = [d for d, _ in runs if owner(d) is None]
        if not mine:
            raise RunNotFound(f"no runs of yours in {runs_dir}" if runs else f"no runs in {runs_dir}")
        return mine[-1]
    matches = [d for d, _ in runs if d.name == ref] or [d for d, _ in runs if d.name.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RunNotFound(f"no run {ref!r} in {runs_dir} (hint: cockpit ps lists them)")
    names = ", ".join(m.name for m in matches[:5])
    raise RunNotFound(f"{ref!r} matches {len(matches)} runs: {names} (hint: give more of the id)")


def rank_exits(run_dir: Path, files: Mapping[int, tuple[str, Path | str]] | None = None,
               skip: frozenset[str] = frozenset()) -> dict[int, RankExit]:
    """rank -> how it ended, from its exit record; ``files``: ``rank_files(run_dir, "exit", skip)`` when listed
    already; ``skip``: hosts an earlier attempt left out (recover:), whose cut-off ranks may still write one when
    their own timeouts end them, long after the run moved on without them."""
    out = {}
    for rank, (host, path) in (rank_files(run_dir, "exit", skip) if files is None else files).items():
        try:
            status_text, when = safeio.read_bytes(path, SMALL_FILE_BYTES).decode().split()[:2]
            out[rank] = RankExit(rank, host, int(status_text), float(when))
        except (OSError, ValueError):
            continue  # being written right now; the next look will see it whole
    return out


def tail_lines(path: Path, n: int, block: int = 65536) -> list[str]:
    """The last ``n`` lines of a file (from its last ``block`` bytes, read from the end); [] when it cannot be
    read or is not a regular file (a FIFO, /dev/zero: cockpit.fs.safeio)."""
    try:
        data, _whole = safeio.tail_bytes(path, block)
    except OSError:
        return []
    return data.decode("utf-8", "replace").splitlines()[-n:]


def rank_record(run_dir: Path, e: RankExit) -> RankExit:
    """How one rank ended, for status.json; ``teardown_abort`` when it finished its work and then aborted at
    interpreter exit (cockpit.logs.diagnose.teardown)."""
    from cockpit.logs.diagnose import teardown

    if e.status == teardown.SIGABRT_STATUS:
        log = rank_files(run_dir, "log").get(e.rank)
        if log and teardown.is_teardown_abort(e.status, tail_lines(log[1], 40)):
            return replace(e, teardown_abort=True)
    return e


def failure_record(run_dir: Path, e: RankExit) -> FirstFailure:
    """status.json's first_failure: the rank's record and what to call it."""
    from cockpit.logs.diagnose import teardown
    from cockpit.logs.diagnose.peerloss import EARLY_EXIT

    rec = rank_record(run_dir, e)
    return FirstFailure.of(rec, teardown.DESCRIBE if rec.teardown_abort else EARLY_EXIT if e.status == 0
                           else e.describe())


# Deaths that come from outside the rank or from its own crash, never as the reaction to a peer's end (a peer
# that vanished shows as an error, exit 1, or a C++ abort, SIGABRT; a teardown as SIGTERM, SIGINT or SIGHUP).
_CAUSE_SIGNALS = frozenset({signal.SIGKILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE})
CAUSE_WINDOW = 1.0
"""Seconds after the earliest exit within which exit records are told apart by what they say, not by their
order (first_failure)."""


def first_failure(exits: dict[int, RankExit], run_dir: Path | None = None) -> RankExit | None:
    """The earliest non-zero rank exit: later ones are usually ranks torn down because of it. Among the exits
    within ``CAUSE_WINDOW`` of the earliest (each wrapper stamps its rank's end when its own wait returns, so on a
    busy machine a peer that reacted at once can be stamped first): a rank killed by a signal only a cause sends
    (SIGKILL, SIGSEGV, SIGBUS, SIGILL, SIGFPE) comes first; then, given the run's ``run_dir``, a rank whose log
    does not say it lost a peer (cockpit.logs.diagnose.peerloss) comes before one that does; and where every failure
    lost its peer, a rank that had exited 0 before them is the first failure (an early exit: it left them
    waiting in a collective; ``failure_record`` says so)."""
    failed = sorted((e for e in exits.values() if e.status != 0), key=lambda e: (e.time, e.rank))
    if not failed:
        return None
    close = [e for e in failed if e.time - failed[0].time <= CAUSE_WINDOW]
    causes = [e for e in close if e.signal in _CAUSE_SIGNALS]
    if causes:
        return causes[0]
    if run_dir is not None:
        from cockpit.logs.diagnose.peerloss import lost_a_peer

        logs = rank_files(run_dir, "log")
        own = [e for e in close if e.rank not in logs or not lost_a_peer(tail_lines(logs[e.rank][1], 40))]
        if own and len(close) > 1:
            return own[0]
        early = sorted((e for e in exits.values() if e.status == 0 and e.time <= failed[0].time + CAUSE_WINDOW),
                       key=lambda e: (e.time, e.rank))  # a wrapper on a busy machine may stamp its end late
        if not own and early:  # every failure lost its peer, and a rank had left before: it left them waiting
            return early[0]
    return failed[0]


def is_sweep(status: RunStatus) -> bool:
    """A sweep's own run: its nodes are trials, each a run of its own."""
    return any(n.trial is not None for n in status.nodes)
