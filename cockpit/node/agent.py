"""What the ssh launcher runs ON a node, sent as source (``python3 -c SOURCE COMMAND JSON``): the node may
not have cockpit installed, only the job's Python. Stdlib only, one JSON object per output line. Its one
cockpit import, cockpit.node.ifaces (stdlib only too), is inlined into the source that is sent
(cockpit.launch.ssh.shell.agent_source), so the agent lists interfaces exactly as the probe does.

    check JSON   facts for the preflight and the launch: can this node resolve and reach the master's
                 port, does the workdir / script exist, does its hostname resolve to loopback, does it
                 see the marker cockpit wrote in the local runs directory (a shared filesystem), and
                 where its own runs directory would be otherwise; and the node's interfaces.
    listen JSON  bind the master port (0: any free one), print it (or why not), accept connections until
                 stdin closes: the other nodes' `check` connects to it, which proves the port is reachable.
    watch JSON   follow a started node: new bytes of the run directory's logs/ and metrics/ files (base64,
                 from given offsets, so a reconnect resumes), and of logs/restart-<K>/, with a "moved" line for
                 each copied file set aside there (torchrun restarted the workers); then how the node's
                 torchrun ended, read from the exit record its launch shell writes, or "gone" if that shell
                 vanished without one. Ends after reporting the end, or when stdin closes (cockpit's side went
                 away); with "once", after one round, reporting {"running": true} if the node's torchrun still runs.
                 With "batch" (cockpit asks for it), a round's file messages (its ranks' beats, log lines, metrics,
                 moves) go out together, {"batch": [message, ...]}, as few lines as fit under BATCH_BYTES: the
                 client handles a message per node per round, not one per changed file (4,096 ranks: ~12,000 a
                 second otherwise, a beat, a log line and a metrics record per rank).
    stacks JSON  ask this node's ranks of a run for their stacks (cockpit.hang.gather): a marker into each
                 rank's .stacks file, a dump request, SIGURG to each rank's pid; then one line for the node,
                 {"host", "ranks": [...]}: per rank, the text after the marker, its last beat and a digest of
                 its Flight Recorder dump (the client handles a message per node, not per rank). First, when asked
                 ("transport": true), one {"transport": ...} line: the ranks' TCP sockets, the node's
                 interfaces and IB ports as raw text (cockpit.node.linkread), read before the ranks answer,
                 and, with "ras": ADDR (an nccl job), NCCL's RAS answer there (cockpit.node.rasask).
    links JSON   that {"transport": ...} line alone, for the running (not exited) ranks of a run on this
                 node: no signal, no marker, the ranks are not disturbed (the slow-link watch, while the
                 run trains: cockpit.hang.linkwatch).
"""

from __future__ import annotations

import base64
import json
import os
import select
import socket
import sys
import time
from collections.abc import Callable

from cockpit.node.ifaces import interfaces  # stdlib only: shipped inlined (cockpit.launch.ssh.shell.agent_source)
from cockpit.node.linkread import link_read  # the same
from cockpit.node.rasask import ras_ask  # the same

CHUNK = 16384  # bytes per message: a base64 line stays well under asyncio's 64 KiB line limit
BATCH_BYTES = 40000  # base64 bytes per batch line: one CHUNK (21,848) always fits, the line stays under 64 KiB
FOLLOWED = ("logs", "metrics")


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class Batch:
    """A round's file messages, sent as {"batch": [message, ...]} lines of at most BATCH_BYTES of data each, in the
    order they were made (a move before the bytes that follow it)."""

    def __init__(self) -> None:
        self.msgs: list = []
        self.size = 0

    def add(self, msg: dict) -> None:
        size = len(msg.get("data", "")) + len(msg["path"]) + 40
        if self.msgs and self.size + size > BATCH_BYTES:
            self.flush()
        self.msgs.append(msg)
        self.size += size

    def flush(self) -> None:
        if self.msgs:
            emit({"batch": self.msgs})
        self.msgs, self.size = [], 0


def stdin_closed(timeout: float) -> bool:
    """Wait up to ``timeout`` for stdin; True when it reached EOF (the reader is gone)."""
    try:
        ready, _, _ = select.select([sys.stdin], [], [], timeout)
    except (OSError, ValueError):
        time.sleep(timeout)
        return False
    return bool(ready) and not os.read(sys.stdin.fileno(), 4096)


def check(args: dict) -> dict:
    out: dict = {"hostname": socket.gethostname(), "home": os.path.expanduser("~")}
    try:
        out["hostname_addr"] = socket.gethostbyname(out["hostname"])
    except OSError as exc:
        out["hostname_addr"], out["hostname_error"] = None, str(exc)
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(out["home"], ".local", "state")
    out["runs_dir"] = os.environ.get("COCKPIT_RUNS_DIR") or os.path.join(state, "cockpit", "runs")
    out["workdir"] = os.path.isdir(args["workdir"])
    script = args.get("script")
    out["script"] = None if script is None else os.path.isfile(os.path.join(args["workdir"], script))
    try:
        with open(args["marker"], encoding="utf-8") as f:
            out["shared"] = f.read().strip() == args["token"]
    except OSError:
        out["shared"] = False
    if args.get("master"):
        out.update(reach(args["master"], args["port"], args.get("timeout", 5.0)))
    out["interfaces"] = interfaces()
    return out


def reach(host: str, port: int, timeout: float) -> dict:
    try:
        addr = socket.gethostbyname(host)
    except OSError as exc:
        return {"resolved": None, "reached": False, "reach_error": f"cannot resolve {host}: {exc}"}
    try:
        with socket.create_connection((addr, port), timeout=timeout):
            return {"resolved": addr, "reached": True, "reach_error": None}
    except OSError as exc:
        return {"resolved": addr, "reached": False, "reach_error": f"{addr}:{port}: {exc.strerror or exc}"}


def listen(args: dict) -> int:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as torch's TCPStore binds
    try:
        s.bind(("", int(args["port"])))
        s.listen(128)
    except OSError as exc:
        emit({"port": int(args["port"]), "free": False, "error": exc.strerror or str(exc)})
        return 0
    emit({"port": s.getsockname()[1], "free": True, "error": None})
    deadline = time.monotonic() + float(args.get("max_seconds", 120))
    while time.monotonic() < deadline:
        ready, _, _ = select.select([s, sys.stdin], [], [], 1.0)
        if s in ready:
            conn, _ = s.accept()
            conn.close()
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 4096):
            break
    s.close()
    return 0


def alive(pid: int, start: str | None) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != b"Z" and (start is None or fields[19].decode() == start)


def restart_subs(run_dir: str) -> list[str]:
    """logs/restart-<K>/ of the run, by K: where the rank wrapper sets a round's exit records aside when torchrun
    restarts the workers (max_restarts; cockpit.run.layout.restart_dirs)."""
    try:
        names = os.listdir(os.path.join(run_dir, "logs"))
    except OSError:
        return []
    rounds = sorted(int(n[8:]) for n in names if n.startswith("restart-") and n[8:].isdigit())
    return [f"logs/restart-{k}" for k in rounds]


def moves(run_dir: str, offsets: dict[str, int], out: Callable[[dict], None] = emit) -> None:
    """Emit {"path": "logs/X", "moved": "logs/restart-K/X"} for each followed file of logs/ that the rank wrapper
    set aside since it was copied (a round's exit record, at a restart), oldest round first, so cockpit's side
    moves its copy too; its offset moves with it. Before any new byte: a new record of the same name in logs/
    is the next round's."""
    for sub in restart_subs(run_dir):
        try:
            names = sorted(os.listdir(os.path.join(run_dir, sub)))
        except OSError:
            continue
        for name in names:
            old, new = f"logs/{name}", f"{sub}/{name}"
            if old in offsets and new not in offsets:
                out({"path": old, "moved": new})
                offsets[new] = offsets.pop(old)


def copy_new(run_dir: str, offsets: dict[str, int], out: Callable[[dict], None] = emit) -> None:
    """Emit (``out``) every new byte of the followed files since ``offsets`` (updated in place), after the moves of
    files set aside at a restart (``moves``)."""
    moves(run_dir, offsets, out)
    for sub in (*FOLLOWED, *restart_subs(run_dir)):
        try:
            names = sorted(os.listdir(os.path.join(run_dir, sub)))
        except OSError:
            continue
        for name in names:
            rel = f"{sub}/{name}"
            path = os.path.join(run_dir, rel)
            try:
                size = os.path.getsize(path)
                if not os.path.isfile(path):
                    continue
                if size < offsets.get(rel, 0):
                    offsets[rel] = 0
                    out({"path": rel, "truncate": True})
                if size == offsets.get(rel, 0):
                    continue
                with open(path, "rb") as f:
                    f.seek(offsets.get(rel, 0))
                    while True:
                        data = f.read(CHUNK)
                        if not data:
                            break
                        out({"path": rel, "offset": offsets.get(rel, 0), "data": base64.b64encode(data).decode()})
                        offsets[rel] = offsets.get(rel, 0) + len(data)
            except OSError:
                continue  # appeared or vanished while we looked: the next round sees it


def read_exit(path: str) -> tuple[int, float] | None:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        status, when = text.split()[:2]
        return int(status), float(when)
    except (OSError, ValueError):
        return None  # not there yet, or being written


def watch(args: dict) -> int:
    run_dir, exit_path = args["run_dir"], args["exit_file"]
    pid, start, copy = int(args["pid"]), args.get("start"), bool(args.get("copy"))
    offsets = {k: int(v) for k, v in (args.get("offsets") or {}).items()}
    interval = float(args.get("interval", 0.3))
    batch = Batch() if args.get("batch") else None

    def copy_round() -> None:  # the round's files, before anything said after them (the end)
        if copy:
            copy_new(run_dir, offsets, batch.add if batch is not None else emit)
        if batch is not None:
            batch.flush()

    emit({"hello": True, "alive": alive(pid, start)})
    while True:
        copy_round()
        ended = read_exit(exit_path)
        if ended is None and not alive(pid, start):
            time.sleep(0.2)  # the launch shell may be writing its record right now
            ended = read_exit(exit_path)
            if ended is None:
                copy_round()
                emit({"gone": True, "time": time.time()})
                return 0
        if ended is not None:
            copy_round()
            emit({"exit": ended[0], "time": ended[1]})
            return 0
        if args.get("once"):  # one look (cockpit without a supervisor): the files so far, and "still running"
            emit({"running": True, "time": time.time()})
            return 0
        if stdin_closed(interval):
            return 0


def stacks(args: dict) -> int:
    logs, host, request = os.path.join(args["run_dir"], "logs"), args["host"], args["request"]
    wanted = set(args.get("ranks") or ())
    targets = {}
    for name in sorted(os.listdir(logs)):
        parts = name.split(".")
        if not (name.startswith("rank-") and name.endswith(f".{host}.pid")) or os.path.exists(
                os.path.join(logs, name[:-4] + ".exit")):
            continue
        rank = int(parts[0][5:])
        if wanted and rank not in wanted:
            continue
        base = os.path.join(logs, name[:-4])
        with open(base + ".stacks", "a", encoding="utf-8") as f:
            f.write(args["marker"])
        targets[rank] = (base, os.path.getsize(base + ".stacks"))
    with open(os.path.join(logs, "dump.req.tmp"), "w") as f:
        f.write(request + "\n")
    os.replace(os.path.join(logs, "dump.req.tmp"), os.path.join(logs, "dump.req"))
    pids = {}
    for rank, (base, _) in targets.items():
        try:
            with open(base + ".pid") as f:
                pids[rank] = int(f.read().split()[0])
            os.kill(pids[rank], 23)  # SIGURG
        except (OSError, ValueError, IndexError):
            continue
    if args.get("transport"):  # the kernel's view of the ranks' connections, while they wait
        try:
            record = link_read(host, pids, interfaces())
            if args.get("ras") and pids:  # an nccl job: NCCL's RAS service on this node (bounded, quiet if none)
                record["ras"] = ras_ask(str(args["ras"]))
            emit({"transport": record})
        except Exception as exc:  # noqa: BLE001 - the stacks still count: say why there is no transport
            emit({"transport_error": f"{type(exc).__name__}: {exc}"})
    deadline = time.monotonic() + float(args.get("timeout", 5.0))
    answers, pending = {}, dict(targets)
    while pending:  # an answered rank is read once; the node's hundreds of ranks are not all read each round
        for rank, (base, offset) in list(pending.items()):
            answers[rank] = _answer(base, offset, request)
            if answers[rank]["text"] and (answers[rank]["beat"] or {}).get("req") == request:
                del pending[rank]
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    # one message for the node, its ranks' answers in it: the client handles one per node, not one per rank
    emit({"host": host, "ranks": [{"rank": rank, "host": host, **answer} for rank, answer in sorted(answers.items())]})
    return 0


def links(args: dict) -> int:
    """The transport record of this node's running ranks of a run (rank -> pid from their .pid files)."""
    logs, host = os.path.join(args["run_dir"], "logs"), args["host"]
    pids = {}
    for name in sorted(os.listdir(logs)):
        if not (name.startswith("rank-") and name.endswith(f".{host}.pid")) or os.path.exists(
                os.path.join(logs, name[:-4] + ".exit")):
            continue
        try:
            with open(os.path.join(logs, name)) as f:
                pids[int(name.split(".")[0][5:])] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # being written, or a name that is not a rank's
    try:
        emit({"transport": link_read(host, pids, interfaces())})
    except Exception as exc:  # noqa: BLE001 - said, not raised: the watch goes on without this node
        emit({"transport_error": f"{type(exc).__name__}: {exc}"})
    return 0


def _answer(base: str, offset: int, request: str) -> dict:
    out: dict = {"text": "", "beat": None, "fr": None, "workers": None}
    try:
        with open(base + ".stacks", encoding="utf-8", errors="replace") as f:
            f.seek(offset)
            out["text"] = f.read()[-200000:]
        with open(base + ".beat", encoding="utf-8", errors="replace") as f:
            lines = f.read()[-4096:].splitlines()
        out["beat"] = json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        pass  # not written yet: the caller shows what came
    if (out["beat"] or {}).get("req") == request:
        try:
            with open(base + ".fr.json", encoding="utf-8", errors="replace") as f:
                fr = json.load(f)
            entries = [e for e in fr.get("entries") or () if isinstance(e, dict) and not e.get("is_p2p")]
            out["fr"] = json.dumps({"pg_status": fr.get("pg_status"), "entries": entries[-1:]})
        except (OSError, ValueError, AttributeError):
            pass  # no Flight Recorder dump (an old torch, FR off)
        try:  # its DataLoader workers' stacks (cockpit_rankworkers), when it has workers
            with open(base + ".workers", encoding="utf-8", errors="replace") as f:
                out["workers"] = json.loads(f.read(4 << 20))
        except (OSError, ValueError):
            out["workers"] = None  # no forked children: no file
    return out


def main(argv: list[str]) -> int:
    command, args = argv[0], json.loads(argv[1])
    if command == "check":
        emit(check(args))
        return 0
    if command == "listen":
        return listen(args)
    if command == "stacks":
        return stacks(args)
    if command == "links":
        return links(args)
    if command == "watch":
        try:
            return watch(args)
        except BrokenPipeError:
            return 0  # cockpit's side went away
    raise SystemExit(f"cockpit ssh agent: unknown command {command!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
