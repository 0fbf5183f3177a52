"""Reading a run's rank files, and asking its ranks for their stacks where the answers land in the run
directory as it is seen here (a local run; a Slurm run, its directory on the shared filesystem). How the
ranks get SIGURG is the run's launcher's (cockpit.launch.protocol ``stacks``): the local one signals the pids
the rank wrapper wrote, the Slurm one ``scancel --signal=URG``, and the ssh one asks the node agent instead.

Before signalling, a marker line is appended to each rank's .stacks file and a new request number is
written to logs/dump.req (the hook answers it with a Flight Recorder dump), so the answer is exactly what
follows the marker.

Where the ranks run on this machine (a local run), the launcher also passes their pids: their TCP sockets are
read here the way the node agent reads them on an ssh run's nodes (cockpit.node.linkread), so the stacks
carry the same transport evidence (Evidence.link).
Where they run on nodes with no agent of cockpit's (Slurm), each rank's hook writes its own with its answer
(cockpit.node.ranklinks), read back here (cockpit.hang.ranklinks).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Collection
from dataclasses import replace
from pathlib import Path
from typing import Literal

from cockpit.fs import safeio
from cockpit.hang.evidence import Evidence, WorkerStack, new_request, workers_of
from cockpit.hang.progress import RankSample
from cockpit.hang.rankdir import RankDir
from cockpit.hang.stacks import last_dump, marker, parse_flight_record
from cockpit.hang.transport import TransportGather
from cockpit.run import layout
from cockpit.run.store import RunStatus, rank_exits, rank_files

TAIL_BYTES = 4096
SHORT_TAIL = 1024
ANSWER_BYTES = 16 << 20  # one rank's stacks and Flight Recorder dump: far less
Tails = dict[str, tuple[tuple[int, int, int], dict | None]]  # path -> ((inode, size, mtime_ns), its last JSON line)


def last_json_line(path: str | os.PathLike[str], kept: Tails | None = None) -> dict | None:
    """The last complete JSON line of a file (metrics, beats), reading only its tail: a short one first (a
    beat or a metrics record is a few hundred bytes, and the watchdog reads two per rank each second), the
    longer one when no whole line is in it. ``kept``: what the caller read before, by path (``Tails``): a file
    whose inode, size and mtime are those of the last read is not read again (a rank's metrics during a stall,
    or between the steps of a slow one); the caller must not change what it gets."""
    try:
        fd, st = safeio.open_stat(path)  # a regular file only, never a link
    except OSError:
        if kept is not None:
            kept.pop(os.fspath(path), None)
        return None
    stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
    try:
        if kept is not None and (old := kept.get(os.fspath(path))) is not None and old[0] == stamp:
            return old[1]
        found = _last_of(fd, st.st_size)
    except OSError:
        found = None
    finally:
        os.close(fd)
    if kept is not None:
        kept[os.fspath(path)] = (stamp, found)
    return found


def _last_of(fd: int, size: int) -> dict | None:
    """``last_json_line`` of an open file of ``size`` bytes (its stat's: no seek to the end)."""
    start = max(0, size - SHORT_TAIL)
    lines = os.pread(fd, size - start, start).splitlines()
    if start:
        lines = lines[1:]  # the first is cut: a line's end is never a line
    found = _last_dict(lines)
    if found is not None or not start:
        return found
    start = max(0, size - TAIL_BYTES)
    return _last_dict(os.pread(fd, size - start, start).splitlines())


def _last_dict(lines: list[bytes]) -> dict | None:
    for line in reversed(lines):
        found = _object(line)
        if found is not None:
            return found
        try:
            value = safeio.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


_DECODER = json.JSONDecoder()


def _object(line: bytes) -> dict | None:
    """A line that is one JSON object, the way beats and metrics records are written (UTF-8, ``{`` first), decoded
    without json.loads' layers (the encoding guessed, the whitespace matched): two a rank at each look, 8,192 at
    4,096 ranks, a third of what reading them cost. None for anything else, which ``safeio.loads`` then judges as
    before (so what is read is unchanged)."""
    if line[:1] != b"{":
        return None
    try:
        text = line.decode()
        value, end = _DECODER.raw_decode(text)
    except (ValueError, RecursionError):  # (UnicodeDecodeError is a ValueError)
        return None
    return value if end == len(text) and isinstance(value, dict) else None


def proc_state(pid: int) -> Literal["running", "stopped", "exited"] | None:
    """running | stopped | exited for a local pid (None if it cannot be read)."""
    return _proc(pid)[0]


ProcState = Literal["running", "stopped", "exited"] | None


def _proc(pid: int) -> tuple[ProcState, bytes | None]:
    """``proc_state`` of a local pid, and its start time (clock ticks since boot, as /proc says it: a pid the
    kernel gave to another process since has another)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        state, start = fields[0], fields[19]
    except (OSError, IndexError):
        return "exited", None
    if state in (b"T", b"t"):
        return "stopped", start
    return ("exited" if state in (b"Z", b"X") else "running"), start


def read_pid(path: str | os.PathLike[str]) -> int | None:
    try:
        return int(safeio.read_bytes(path, 64).split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _pid(path: str, rankdir: RankDir | None, states: dict[int, tuple[ProcState, bytes | None]]) -> int | None:
    """The pid in a rank's pid file, its process state and start time put into ``states`` (by pid: a process of
    many ranks). Kept by ``rankdir`` with the start time of its process: a pid file is written anew only by a new
    process of the rank (a restart), after the one it names ended, so the file is read again only when that
    process ended, or its pid is another process's now (another start time)."""
    kept = rankdir.pids.get(path) if rankdir is not None else None
    if kept is not None:
        old, start = kept
        if old not in states:
            states[old] = _proc(old)
        if states[old][0] != "exited" and states[old][1] == start:
            return old
    pid = read_pid(path)
    if pid and pid not in states:
        states[pid] = _proc(pid)
    if pid and rankdir is not None:
        rankdir.pids[path] = (pid, states[pid][1])
    return pid


def samples(run_dir: Path, status: RunStatus, runs_here: bool, rankdir: RankDir | None = None,
            only: Collection[int] | None = None) -> list[RankSample]:
    """One look at every rank that has a log (or the ranks ``only`` names), for cockpit.hang.progress.
    ``runs_here``: the ranks run on this machine (their launcher's ``runs_here``), so their pids' process states
    are read too; ``rankdir``: the run's logs/ as the caller keeps it listed (cockpit.hang.rankdir)."""
    if rankdir is None:
        files = layout.rank_file_names(run_dir, ("log", "exit", "pid"))  # one listing of logs/, paths as text
        exits = rank_exits(run_dir, files["exit"])
    else:
        files, exits = rankdir.names(("log", "exit", "pid")), rankdir.exits()
    logs, pids = files["log"], files["pid"]
    if only is not None:
        logs = {r: logs[r] for r in only if r in logs}
    states: dict[int, tuple[ProcState, bytes | None]] = {}  # by pid: a process of many ranks
    # a relaunched run (recover:) appends to the same logs and metrics: what came before this attempt is no progress
    since = status.attempts[-1].started if status.attempts else None
    out = []
    tails = rankdir.tails if rankdir is not None else None
    root = os.fspath(run_dir)  # text paths: a Path per file costs more than its read, 4,096 ranks a second
    for rank, (host, path) in sorted(logs.items()):
        text = path
        try:
            st = os.stat(text)
            size, mtime = st.st_size, st.st_mtime
        except OSError:
            size, mtime = None, None
        if since is not None and mtime is not None and mtime < since:
            size, mtime = None, None  # the log as an earlier attempt left it: not this attempt's first output
        metrics = last_json_line(f"{root}/{layout.metrics_name(rank)}", tails)
        step = metrics.get("step") if metrics else None
        when = metrics.get("time") if metrics else None
        if since is not None and isinstance(when, (int, float)) and when < since:
            step = None
        state: Literal["running", "stopped", "exited"] | None = None
        if rank in exits:
            state = "exited"
        elif runs_here and rank in pids:
            pid = _pid(pids[rank][1], rankdir, states)
            state = states[pid][0] if pid else None
        beat = last_json_line(text[:-len(".log")] + ".beat", tails)
        out.append(RankSample(rank, host, size, mtime, step if isinstance(step, int) else None, state, beat,
                              when if isinstance(when, (int, float)) else None))
    return out


def collect(run_dir: Path, status: RunStatus, ranks: set[int] | None = None, timeout: float = 5.0, *,
            signal_ranks: Callable[[set[int]], None],
            rank_pids: Callable[[set[int]], dict[int, int]] | None = None,
            rank_links: bool = False) -> dict[int, Evidence]:
    """Ask the run's ranks (all, or ``ranks``) for their stacks and Flight Recorder state; returns what came
    within ``timeout``. ``signal_ranks(targets)`` delivers SIGURG to the ranks asked that have not exited
    (the run's launcher knows how); ``rank_pids(targets)``: where they run here, rank -> pid (checked to be
    the run's), whose sockets are then read; ``rank_links``: the ranks read their own (a Slurm run's hook writes
    logs/rank-R.HOST.links with its answer: cockpit.hang.ranklinks).

    One fan-out, one wait: every rank is marked and signalled at once, then only the ranks that have not
    answered yet are looked at again (``wait_answers``), so 4,096 ranks cost one read of each answer and a
    beat read per round of the ones still pending, not 4,096 full reads per round."""
    request = new_request()
    logs = run_dir / layout.LOGS
    files = layout.rank_file_names(run_dir, ("log", "exit"))  # one listing of logs/ (25,000 files at 4,096 ranks)
    targets = {r: hp for r, hp in files["log"].items() if ranks is None or r in ranks}
    exits = rank_exits(run_dir, files["exit"])
    targets = {r: hp for r, hp in targets.items() if r not in exits}
    offsets = {}
    dfd = safeio.open_dir(logs)  # a directory of the caller's, checked once; never a file through a link
    try:
        for rank, (host, _path) in targets.items():
            offsets[rank] = safeio.append_at(dfd, layout.rank_file_name(rank, host, "stacks"),
                                             marker(request, time.time()).encode())
    finally:
        os.close(dfd)
    safeio.write_atomic(logs / layout.DUMP_REQUEST, request + "\n", own_dir=True)
    signal_ranks(set(targets))
    hosts = {r: host for r, (host, _) in targets.items()}
    link = (local_link(run_dir, rank_pids(set(targets)), hosts, ras=True) if rank_pids is not None and targets
            else None)
    asked = {r: (host, offsets[r]) for r, (host, _) in targets.items()}
    answered = wait_answers(logs, asked, request, time.monotonic() + timeout)
    if rank_links and link is None and targets:  # written before the beat that says the request was answered
        from cockpit.hang.ranklinks import read_rank_links

        link = read_rank_links(run_dir, hosts, request)
    return {r: replace(e, link=link) for r, e in answered.items()} if link is not None else answered


def wait_answers(logs: Path, asked: dict[int, tuple[str, int]], request: str, deadline: float,
                 every: float = 0.1) -> dict[int, Evidence]:
    """Each asked rank's answer (rank -> (host, offset of its marker)), once it has given it or at
    ``deadline``. A rank has answered when its beat carries ``request`` (the hook's beat thread writes it once
    it has dumped the Flight Recorder; the SIGURG dump came before) and its dump is there; until then only its
    beat's tail is read each round, and only when the beat file changed since the round before (a beat a
    second, rounds ten times that: 4,096 ranks asked), and an answered rank is read once, whole, and not again."""
    answered: dict[int, Evidence] = {}
    pending = dict(asked)
    beats = {r: f"{logs}/rank-{r}.{host}.beat" for r, (host, _o) in asked.items()}  # layout.rank_base, as text
    seen: dict[int, tuple[int, int] | None] = {}  # rank -> (mtime_ns, size) of a beat read without the request
    while True:
        for rank, (host, offset) in list(pending.items()):
            stamp = _stamp(beats[rank])
            if stamp is not None and seen.get(rank) == stamp:
                continue  # unchanged since it was read without the request
            beat = last_json_line(beats[rank])
            if (beat or {}).get("req") != request:
                seen[rank] = stamp
                continue
            answer = _answer(logs, rank, host, offset, request, beat)
            if answer.text:
                answered[rank] = answer
                del pending[rank]
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(every)
    for rank, (host, offset) in pending.items():  # what the late ones gave by the deadline
        answered[rank] = _answer(logs, rank, host, offset, request)
    return dict(sorted(answered.items()))


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def local_link(run_dir: Path, pids: dict[int, int], hosts: dict[int, str] | None = None,
               ras: bool = False) -> TransportGather:
    """The transport evidence of ranks running on this machine (rank -> pid), as one node: the host name
    their rank files carry (``hosts``, rank -> host, when the caller has them); a record that cannot be read
    is said in ``errors``. ``ras``: for an nccl job, NCCL's RAS service is asked too, at the address the
    run's node script gives (cockpit.hang.rasread.ras_address; bounded, quiet when none listens)."""
    from cockpit.hang.transport_parse import TransportParseError
    from cockpit.hang.transport_raw import node_transport, silent
    from cockpit.node.ifaces import interfaces
    from cockpit.node.linkread import link_read

    if hosts is None:
        hosts = {r: h for r, (h, _p) in rank_files(run_dir, "log").items()}
    named = {h for r, h in hosts.items() if r in pids}
    host = min(named) if named else "localhost"  # a local run's ranks share one host name
    try:
        record = link_read(host, pids, interfaces())
        addr = run_ras_address(run_dir) if ras and pids else None
        if addr is not None:
            from cockpit.node.rasask import ras_ask

            record["ras"] = ras_ask(addr)
        return TransportGather((node_transport(record, host),))
    except TransportParseError as exc:
        return TransportGather((silent(host),), errors=(str(exc),))


def run_ras_address(run_dir: Path) -> str | None:
    """The RAS address of a run's first node script (cockpit.hang.rasread.ras_address); None when unreadable,
    or when the job is not on nccl."""
    from cockpit.hang.rasread import ras_address

    try:
        return ras_address(safeio.read_text(layout.node_script(run_dir, 0), 1 << 20))
    except OSError:
        return None


def _answer(logs: Path, rank: int, host: str, offset: int, request: str,
            beat: dict | None = None) -> Evidence:
    """What a rank wrote after its marker; ``beat``: its last beat, when the caller has just read it."""
    base = layout.rank_base(logs.parent, rank, host)
    try:
        fd, st = safeio.open_stat(f"{base}.stacks")
        try:  # what follows the marker, as long as it is now (no buffer of ANSWER_BYTES for each rank)
            data = os.pread(fd, min(max(0, st.st_size - offset), ANSWER_BYTES), offset)
        finally:
            os.close(fd)
        text = last_dump(data.decode("utf-8", "replace"))
    except OSError:
        text = ""
    beat = beat if beat is not None else last_json_line(Path(f"{base}.beat"))
    flight = None
    workers: tuple[WorkerStack, ...] = ()
    if beat and beat.get("req") == request:
        try:
            flight = parse_flight_record(safeio.read_text(f"{base}.fr.json", ANSWER_BYTES))
        except OSError:
            flight = None
        workers = workers_of(read_json(Path(f"{base}.workers")), request)
    return Evidence(rank, host, text, flight, beat, workers)


def read_json(path: Path, limit: int = 4 << 20) -> object:
    """A small JSON file's value (None when missing, not a regular file, too big or not JSON)."""
    try:
        return safeio.loads(safeio.read_bytes(path, limit))
    except (OSError, ValueError):
        return None
