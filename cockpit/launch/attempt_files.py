"""Between two attempts of a run (the job's ``recover:``, `cockpit run --resume`), in its run directory:

- ``set_aside`` and ``mark``: the ended attempt's exit records, pids, beats and stacks moved to
  logs/attempt-<N>/ (as a Slurm requeue does), and a marker line appended to every log, so that the logs
  of a run read on across attempts and each attempt's part can be found again (cockpit.launch.recovery.section);
- ``apply_fix``: the diagnosis's fix written into the node scripts (recover.apply_fixes);
- ``end_attempt`` and ``account``: each attempt's record closed (how it ended, who, the step it resumed from),
  and at the run's end its steps from rank 0's metrics and the run's goodput.

What an attempt WAS and whether another starts is cockpit.launch.recovery (``decide`` is pure).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import replace
from pathlib import Path

from cockpit.fs import safeio
from cockpit.launch.recovery import MARK, Outcome, section
from cockpit.run import layout
from cockpit.run.attempts import goodput, lost_seconds
from cockpit.run.store import RunStatus

_SET_ASIDE = re.compile(r"^(rank-\d+\..+\.(exit|pid|beat|stacks|fr\.json|workers)|agent\..+\.exit|dump\.req)$")
_RESTART_DIR = re.compile(rf"^{layout.RESTART_PREFIX}\d+$")  # torchrun's rounds set aside (cockpit.run.restarts)
_RESUMED = re.compile(r"\[cockpit\] resumed from .* step=(\d+)")


def resumed_from(run_dir: Path) -> int | None:
    """The checkpoint step this attempt's rank 0 said it resumed from (cockpit.train), None: it did not say.
    Read from rank 0's log written last: a relaunch on another node (Slurm --exclude, an ssh spare) leaves
    rank 0 one log per host, and only the newest is this attempt's."""
    log = _newest_log(run_dir, 0)
    found = [m for line in section(log) if (m := _RESUMED.search(line))] if log else []
    return int(found[-1][1]) if found else None


def _every_rank_log(run_dir: Path) -> list[Path]:
    """Every rank's log on every host it ran on: a rank relaunched on another node has one per host, and each
    must end its attempt at the marker, or a parser takes an earlier attempt's failure for this one's."""
    try:
        names = sorted((run_dir / layout.LOGS).iterdir())
    except OSError:
        return []
    return [p for p in names if (parsed := layout.parse_rank_file(p.name)) and parsed[2] == "log"]


def _newest_log(run_dir: Path, rank: int) -> Path | None:
    """``rank``'s log modified last, among its logs on every host it ran on."""
    newest: tuple[int, Path] | None = None
    with contextlib.suppress(OSError):
        for path in (run_dir / layout.LOGS).iterdir():
            parsed = layout.parse_rank_file(path.name)
            if parsed and parsed[0] == rank and parsed[2] == "log":
                with contextlib.suppress(OSError):
                    mtime = path.stat().st_mtime_ns
                    if newest is None or mtime > newest[0]:
                        newest = (mtime, path)
    return newest[1] if newest else None


def set_aside(run_dir: Path, attempt: int) -> int:
    """Move attempt ``attempt``'s exit records (torchrun's rounds' too), pids, beats, stacks and dump request to
    logs/attempt-<N>/, so the next attempt's are the only ones in logs/ (the supervisor, the watchdog and the
    followers read them there)."""
    logs = run_dir / layout.LOGS
    aside = logs / f"attempt-{attempt}"
    aside.mkdir(mode=0o700, exist_ok=True)
    moved = 0
    for path in logs.iterdir():
        if _SET_ASIDE.match(path.name) and path.is_file() and not path.is_symlink():
            os.replace(path, aside / path.name)
            moved += 1
        elif _RESTART_DIR.match(path.name) and path.is_dir() and not path.is_symlink():  # torchrun's rounds
            os.replace(path, aside / path.name)
    return moved


def mark(run_dir: Path, attempt: int, after: Outcome, relaunches: int) -> None:
    """Append attempt ``attempt``'s marker line to every rank log and agent log of the run. It names the trigger
    and the culprit, not the cause's words: an exception's text here would read as a new one to a log parser."""
    who = f" (rank {after.rank} on {after.host})" if after.rank is not None else ""
    mark_line(run_dir, f"{MARK}{attempt} (COCKPIT_ATTEMPT={attempt}) of {relaunches + 1} starts: relaunched after "
                       f"a {after.end} of attempt {attempt - 1}{who}")


def mark_line(run_dir: Path, text: str) -> None:
    """Append one marker line to every rank log (on every host) and agent log of the run; a log that cannot be
    opened (gone, a symlink) is passed over."""
    line = f"{text}\n".encode()
    for path in _every_rank_log(run_dir) + [p for _h, p in layout.agent_logs(run_dir)]:
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)


def apply_fix(run_dir: Path, env: tuple[tuple[str, str], ...], unset: tuple[str, ...]) -> None:
    """The diagnosis's fix written into each node script, after the job's own env: lines (which would set a
    variable again) and before the launch: the next attempt runs with it, and the script says so."""
    from cockpit.render.shell import export, quote

    lines = ["# cockpit: recover.apply_fixes: the fix the diagnosis offered for the last attempt's failure",
             *(f"unset {quote(k)}" for k in unset), *(export(k, v) for k, v in env)]
    for script in sorted((run_dir / layout.COMMANDS).glob("node-*.sh")):
        text = script.read_text(encoding="utf-8")
        at = text.rfind("\nexec ")
        if at >= 0:
            script.write_text(text[:at + 1] + "\n".join(lines) + "\n" + text[at + 1:], encoding="utf-8")


def metrics_records(run_dir: Path, rank: int = 0, limit: int = 5_000_000) -> list[tuple[float, int]]:
    """(time, step) of every record of a rank's metrics (cockpit.train), in file order; lines that are not one
    are skipped. Bounded: at most ``limit`` records, lines of at most 4 KiB."""
    import json

    out: list[tuple[float, int]] = []
    try:
        with safeio.open_regular(layout.metrics_file(run_dir, rank), follow=False) as f:
            for raw in iter(lambda: f.readline(4097), b""):
                if len(raw) > 4096 or len(out) >= limit:
                    continue  # a line cut at 4 KiB (its rest follows as a line of its own): no record of ours
                with contextlib.suppress(ValueError):
                    rec = json.loads(raw)
                    t, step = rec.get("time"), rec.get("step")
                    if isinstance(t, (int, float)) and isinstance(step, int) and not isinstance(step, bool):
                        out.append((float(t), step))
    except OSError:
        return out
    return out


def end_attempt(run_dir: Path, status: RunStatus, end: str, outcome: Outcome | None = None,
                decision: str | None = None) -> None:
    """Close the current attempt's record: when, how, who and what, the step it resumed from, what came next."""
    if not status.attempts or status.attempts[-1].ended is not None:
        return
    status.attempts[-1] = replace(
        status.attempts[-1], ended=round(time.time(), 3), end=end, decision=decision,
        culprit_rank=outcome.rank if outcome else None, culprit_host=outcome.host if outcome else None,
        cause=outcome.cause if outcome else None, failed=outcome.at if outcome else None,
        resumed_from=resumed_from(run_dir))


def account(run_dir: Path, status: RunStatus) -> None:
    """At the run's end: each attempt's first and last step from rank 0's metrics, and the run's goodput."""
    records = metrics_records(run_dir)
    starts = [a.started for a in status.attempts[1:]] + [float("inf")]
    for i, a in enumerate(status.attempts):
        mine = [(t, step) for t, step in records if a.started <= t < starts[i]]
        if mine:
            status.attempts[i] = replace(a, first_step=round(mine[0][0], 3), step=max(step for _, step in mine))
    lost = lost_seconds(status.attempts, records)
    status.attempts = [replace(a, lost_s=s) for a, s in zip(status.attempts, lost, strict=True)]
    if status.started is not None and status.ended is not None:
        status.goodput = goodput(status.attempts, records, status.started, status.ended)
