"""torchrun's own restarts (a job's ``max_restarts``): the rounds it ended and restarted the workers from.

The rank wrapper sets a round's exit records aside in logs/restart-<K>/ when torchrun starts round K+1
(cockpit.render.rankwrap), so logs/ holds the current round's alone; the supervisor reads the rounds back from
there into status.json's ``restarts``, and lets torchrun restart while it has restarts left."""

from __future__ import annotations

import os
import time
from pathlib import Path

from cockpit.run import layout
from cockpit.run.records import FirstFailure, RankExit
from cockpit.run.store import first_failure, rank_exits

NO_RECORD = "no exit record says which rank failed"
SETTLE_S = 5.0
"""Seconds after the last record moved into a round's logs/restart-<K>/ in which the round is read again (its
wrappers move their records one by one); after that its failure stands, so that the next round's lines, appended
to the same rank logs, never change which rank the round blames."""


def restarts_left(max_restarts: int | None, made: int, torchrun_ended: bool, stopping: bool) -> bool:
    """Whether a rank's failure now is torchrun's to handle, by restarting the workers (round ``made`` of at most
    ``max_restarts`` restarts), rather than the end of the run: not once torchrun itself ended or a stop was
    asked for."""
    return bool(max_restarts) and not stopping and not torchrun_ended and made < (max_restarts or 0)


def set_aside_ranks(aside: Path) -> set[int]:
    """The ranks whose exit record is in ``aside`` (a logs/restart-<K>/)."""
    try:
        names = os.listdir(aside)
    except OSError:
        return set()
    return {parsed[0] for parsed in map(layout.parse_rank_file, names) if parsed is not None and parsed[2] == "exit"}


def this_round(run_dir: Path, exits: dict[int, RankExit]) -> dict[int, RankExit]:
    """``exits`` (logs/) without the records of the round torchrun restarted from that their wrappers have not set
    aside yet: once torchrun restarted, a rank's record in logs/ is this round's only where the same rank's record
    is in the latest logs/restart-<K>/ (each wrapper moves its own at its start, one after another; a node's copy
    follows a moment later). Without this, the moment between two wrappers' moves shows a stale failure."""
    dirs = layout.restart_dirs(run_dir)
    if not dirs:
        return exits
    moved = set_aside_ranks(dirs[-1])
    return {r: e for r, e in exits.items() if r in moved}


def round_failure(aside: Path, run_dir: Path | None = None) -> FirstFailure | None:
    """The first failure among the exit records of a round set aside in ``aside``; None where there is none.
    Chosen as the run's own first failure is (cockpit.run.store.first_failure): given the run's ``run_dir``, a rank
    whose log says it lost its peer is not blamed over one that died first, however the two were stamped."""
    files: dict[int, tuple[str, Path]] = {}
    try:
        names = os.listdir(aside)
    except OSError:
        return None
    for name in names:
        parsed = layout.parse_rank_file(name)
        if parsed is not None and parsed[2] == "exit":
            files[parsed[0]] = (parsed[1], aside / name)
    first = first_failure(rank_exits(aside, files), run_dir)
    if first is None:
        return None
    from cockpit.logs.diagnose.peerloss import EARLY_EXIT

    return FirstFailure.of(first, EARLY_EXIT if first.status == 0 else first.describe())


def restarts(run_dir: Path, known: list[FirstFailure]) -> list[FirstFailure]:
    """Each restart torchrun made so far, by the failure that ended its round: ``known`` kept for the rounds
    whose records are all set aside (every round before the latest), the latest read again while records still
    arrive (its ranks' wrappers move them one by one: ``SETTLE_S``), its ranks' logs looked at for a lost peer."""
    dirs = layout.restart_dirs(run_dir)
    out = list(known[:max(len(dirs) - 1, 0)])
    if dirs and len(known) >= len(dirs) and time.time() - _mtime(dirs[-1]) > SETTLE_S:
        out.append(known[len(dirs) - 1])
    for aside in dirs[len(out):]:
        found = round_failure(aside, run_dir)
        out.append(found or FirstFailure(None, "", 0, _mtime(aside), NO_RECORD))
    return out


def restart_words(failure: FirstFailure, k: int, most: int) -> str:
    """One restart, as the summary and the diagnosis say it."""
    who = (f"rank {failure.rank} on {failure.host} failed ({failure.description})" if failure.rank is not None
           else f"a round ended ({failure.description})")
    return f"{who}; torchrun restarted the workers (restart {k} of {most})"


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
