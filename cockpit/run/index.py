"""runs/.index: the summaries (cockpit.run.summary) of a runs directory's finished runs in one file, so that
`cockpit ps` over thousands of runs reads the directory, this file, and only the files of the runs it does not
hold, instead of opening every run's summary.json.

It is a cache, never the truth: each entry is stamped with the identities ([inode, mtime ns, size]) of the
files it was made from, and is used only while all of them are still those files:

    status.json   replaced whole (a rename) at every write: a run relaunched, requeued or resumed after it ended
                  has a new one, so its entry is stale
    summary.json  the run's own summary, which the entry copies (a summary rewritten, removed or corrupted since
                  makes the entry stale, and the run is read the slow way, which rebuilds the summary)
    metrics       rank 0's metrics file, which the stored forecast was made from (null: there was none)

Checking an entry costs a stat of each (no open, no read), done by the listing (cockpit.insight.listing). The
listing also keeps the index: it writes it again (atomically: a temporary renamed over it) when any entry was
missing, stale or of a run that is gone, and only into a runs directory of the caller's. Two listings writing
at once: the last rename wins, and a run the other one added is read the slow way next time and added again.
The writers of status.json do not write it: a finished run's forecast is insight, made by the first listing
after the run ended, so that listing is the first that can write a complete entry.

The file, UTF-8 text, one line each:

    {"index": "cockpit ps", "version": INDEX_VERSION, "row": ROW_FIELDS, "forecast": the forecast's fields}
    NAME <TAB> CRC <TAB> [status stamp, summary stamp or null, metrics stamp or null, [row], [forecast]]

The row and the forecast are their fields' values in the header's order (a run's fields' names, written once).
CRC is the CRC-32 of the rest of the line, in hex: a line cut short, overwritten or joined to another is no
entry, so a reader may take the values of a line that passes as the writer's (typed records, made from a status
and a forecast that were checked field by field), without checking each field of thousands again. An index that
is not the caller's own regular file, too large, or of another version, row or forecast is no index (the
listing reads every run and writes a new one).
"""

from __future__ import annotations

import contextlib
import json
import os
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from cockpit.fs import safeio
from cockpit.run import layout
from cockpit.run.summary import ROW_FIELDS, Stamp

T = TypeVar("T")

INDEX_VERSION = 1
MAX_INDEX_BYTES = 256 << 20  # an entry is ~0.4 KB: a runs directory of 500,000 runs; a larger file is no index
_decode = json.JSONDecoder().decode
_LISTS = frozenset({"history", "attempts"})  # row fields status.json leaves out when empty (read back as [])


def header(forecast_fields: Sequence[str]) -> bytes:
    """The index's first line, for forecasts of ``forecast_fields`` (the caller's: the forecast is insight)."""
    return json.dumps({"index": "cockpit ps", "version": INDEX_VERSION, "row": list(ROW_FIELDS),
                       "forecast": list(forecast_fields)}, separators=(",", ":")).encode() + b"\n"


@dataclass(frozen=True)
class Entry:
    """One finished run's entry, as written (``line``)."""

    status: Stamp  # status.json's identity when it was summarised
    summary: Stamp | None  # summary.json's, None: the run had none (another user's run is never written)
    metrics: Stamp | None  # rank 0's metrics file's when the forecast was made; None: there was none
    row: list  # the values of the run's ROW_FIELDS, in that order
    forecast: list  # the values of its stored forecast's fields, in the header's order


def read(runs_dir: str | Path, head: bytes) -> dict[str, bytes] | None:
    """The lines of ``runs_dir``'s index by run directory name, unparsed (``entry`` parses one); None when there
    is no usable index: none, not the caller's own regular file, a symlink, too large, or not of ``head``
    (``header``: another version)."""
    fd = _open(runs_dir)
    if fd is None:
        return None
    try:
        return _scan(fd, head, lambda text, at: text)
    except OSError:
        return None
    finally:
        os.close(fd)


class Lines:
    """The lines of an index by run directory name, as ``read`` has them, each read from the file when it is taken:
    a listing of thousands of runs holds an offset per run, not its line (ps --json's memory stays flat). The file
    read is the one opened, whatever replaces it meanwhile (a rename: cockpit.fs.safeio.write_atomic)."""

    def __init__(self, fd: int, at: dict[str, tuple[int, int]]):
        self._fd, self._at = fd, at

    def take(self, name: str) -> bytes | None:
        """Run directory ``name``'s line (given once: taken), None when the index has none."""
        at = self._at.pop(name, None)
        if at is None:
            return None
        try:
            return os.pread(self._fd, at[1], at[0])
        except OSError:  # (its CRC tells a short one: no entry)
            return None

    def left(self) -> int:
        """How many lines were not taken (of runs that are gone)."""
        return len(self._at)


@contextlib.contextmanager
def lines(runs_dir: str | Path, head: bytes) -> Iterator[Lines | None]:
    """``read``'s lines as Lines, or None where ``read`` says None; the file is closed on leaving."""
    fd = _open(runs_dir)
    try:
        at = None if fd is None else _scan(fd, head, lambda text, start: (start, len(text)))
    except OSError:
        at = None
    try:
        yield None if fd is None or at is None else Lines(fd, at)
    finally:
        if fd is not None:
            os.close(fd)


def _open(runs_dir: str | Path) -> int | None:
    """A descriptor of ``runs_dir``'s index, when it is the caller's own regular file (not a symlink)."""
    try:
        fd = safeio.open_fd(f"{runs_dir}/{layout.INDEX}")
    except (OSError, ValueError):
        return None
    try:
        mine = os.fstat(fd).st_uid == os.geteuid()  # another user's file in a shared directory: not believed
    except OSError:
        mine = False
    if not mine:
        os.close(fd)
    return fd if mine else None


def _scan(fd: int, head: bytes, value: Callable[[bytes, int], T]) -> dict[str, T] | None:
    """``value(line, offset)`` of each line after ``head`` of the file at ``fd``, by run directory name, read a block
    at a time (the file is never held whole); None past MAX_INDEX_BYTES or without ``head``."""
    with open(fd, "rb", buffering=1 << 16, closefd=False) as f:
        if f.read(len(head)) != head:
            return None
        entries, size = {}, len(head)
        while text := f.readline(MAX_INDEX_BYTES - size + 1):  # (bounded: a line without newline too)
            at, size = size, size + len(text)
            if size > MAX_INDEX_BYTES:
                return None
            name, tab, _ = text.partition(b"\t")
            if tab:
                entries[name.decode("utf-8", "surrogateescape")] = value(text.removesuffix(b"\n"), at)
    return entries


def entry(text: bytes) -> Entry | None:
    """A line of ``read``'s as an Entry; None when it is not one (its CRC does not match: cut short, overwritten)."""
    parts = text.split(b"\t", 2)
    if len(parts) != 3 or parts[1] != b"%08x" % zlib.crc32(parts[2]):
        return None
    try:
        status, kept, metrics, row, forecast = _decode(parts[2].decode())  # (str: json.loads' bytes detection)
    except (ValueError, TypeError):  # (the CRC of another writer's line? not ours to read)
        return None
    return Entry(tuple(status), kept and tuple(kept), metrics and tuple(metrics), row, forecast)


def line(name: str, status: Stamp, kept: Stamp | None, metrics: Stamp | None, row: dict[str, object],
         forecast: Sequence[object]) -> bytes | None:
    """The line of run directory ``name``'s entry: ``row`` (summary.row_dict's), ``forecast``'s values in the
    header's order; None for a name a line cannot hold (a tab, a newline)."""
    if "\t" in name or "\n" in name:
        return None
    values = [row.get(k, [] if k in _LISTS else None) for k in ROW_FIELDS]
    body = json.dumps([status, kept, metrics, values, list(forecast)], separators=(",", ":")).encode()
    return b"%s\t%08x\t%s" % (name.encode("utf-8", "surrogateescape"), zlib.crc32(body), body)


def write(runs_dir: Path, head: bytes, lines: Iterable[bytes]) -> None:
    """The index of ``runs_dir``, atomically, with ``lines`` (``line``'s, or ``read``'s of an entry still fresh,
    written back as read); into a runs directory of the
    caller's only (safeio.Untrusted otherwise; OSError: read-only, full). Not flushed to disk first: after a
    crash it may be empty or old, which ``read`` takes for no index or entries that are stale."""
    safeio.write_atomic(runs_dir / layout.INDEX, head + b"".join(t + b"\n" for t in lines), own_dir=True, sync=False)
