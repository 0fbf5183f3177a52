"""A feed batch's per-rank parts in the compact form the feed process sends them in (cockpit.tui.models.feed_process).

Why: at 4,096 ranks a status holds 4,096 RankProgress records and a batch the counts of 4,096 sources. Pickled as
objects, each record came back as three objects for the garbage collector to track (the instance, its __dict__, its
``absent`` frozenset), and one ``pickle.loads`` of them took 15-20 ms of C that never hands the GIL over, so a key
press on the UI thread waited for the reader thread's whole decode (issue 32). Here they travel as rows of plain
values, pickled in chunks of CHUNK; the reader thread unpickles a chunk at a time and builds the records in Python,
which hands the GIL to the UI thread every switch interval. The records built are the same values, of the same
types, one object each.

Up to PACK_FROM ranks nothing changes: the objects are pickled as they are.

Pure: no IO, no textual.
"""

from __future__ import annotations

import pickle
from dataclasses import fields, replace
from operator import attrgetter

from cockpit.run.progress import RankProgress
from cockpit.run.status import RunStatus
from cockpit.tui.models.feed_state import SourceStats

PACK_FROM = 256  # records in a status (or counts in a batch) from which they travel packed
CHUNK = 512  # rows a pickle: unpickling one takes about a millisecond

_PROGRESS_FIELDS = tuple(f.name for f in fields(RankProgress))
_progress_row = attrgetter(*_PROGRESS_FIELDS)


def pack_progress(status: RunStatus) -> tuple[RunStatus, tuple | None]:
    """``status`` without its progress, and the progress packed; (status, None) where it is small."""
    progress = status.progress
    if len(progress) < PACK_FROM:
        return status, None
    # one frozenset for all records of one shape (each record read its own): the pickle's memo sends it once a chunk
    shapes: dict[frozenset, frozenset] = {}
    rows = []
    for rec in progress.values():
        row = _progress_row(rec)
        rows.append((*row[:-1], shapes.setdefault(row[-1], row[-1])))
    return replace(status, progress={}), (list(progress), _chunks(rows))


def unpack_progress(status: RunStatus, packed: tuple) -> None:
    """Put ``packed`` (pack_progress's) back into ``status``."""
    keys, chunks = packed
    rows = _rows(chunks)
    new = RankProgress
    status.progress = {key: new(*row) for key, row in zip(keys, rows, strict=True)}


def pack_stats(stats: dict[tuple, SourceStats]) -> tuple | dict:
    """A batch's per-source counts (source -> SourceStats), packed where there are many."""
    if len(stats) < PACK_FROM:
        return stats
    return list(stats), _chunks([tuple(s) for s in stats.values()])  # plain tuples: no class to call a row


def unpack_stats(packed: tuple | dict) -> dict[tuple, SourceStats]:
    """pack_stats's counts as source -> SourceStats."""
    if isinstance(packed, dict):
        return packed
    keys, chunks = packed
    make = SourceStats._make
    return {key: make(row) for key, row in zip(keys, _rows(chunks), strict=True)}


def _chunks(rows: list) -> list[bytes]:
    return [pickle.dumps(rows[i:i + CHUNK], protocol=pickle.HIGHEST_PROTOCOL) for i in range(0, len(rows), CHUNK)]


def _rows(chunks: list[bytes]):
    """The rows, a chunk unpickled at a time (between two, the reader thread may hand the GIL over)."""
    for chunk in chunks:
        yield from pickle.loads(chunk)  # noqa: S301 (our own child, over a private pipe)
