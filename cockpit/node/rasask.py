"""Ask NCCL's RAS service on this node for its status, the way `ncclras` does (NCCL >= 2.24; the client
protocol of NCCL's src/ras/client_support.cc): "CLIENT PROTOCOL 2" (answered "SERVER PROTOCOL n"), "TIMEOUT
s" (RAS's own wait for unresponsive peers), "SET FORMAT json" (answered "OK"; NCCL < 2.28.7 answers "ERROR:
Unknown command" and keeps the connection: the answer is then text), then "VERBOSE STATUS", answered until
the service closes the connection.

Strictly bounded: RAS_CONNECT_S to connect, RAS_TOTAL_S for the whole answer, RAS_CAP bytes kept. A refused
connection (no NCCL process on the node, RAS off) is "none", said quietly: never an error that costs the
stacks. Stdlib only and no import of cockpit: inlined into the node agent (cockpit.launch.ssh.shell) and
shipped beside the rank hook (``<run>/hook/cockpit_rasask.py``) for Slurm runs.

The record (read by cockpit.hang.rasread)::

    {"addr": "localhost:28028", "state": "answered" | "none" | "error", "format": "json" | "text" | null,
     "text": "<the answer>" | null, "ms": float, "truncated": bool, "note": str | null}
"""

from __future__ import annotations

import os
import socket
import time

# NCCL's default (NCCL_RAS_ADDR unset): "localhost:28028", which NCCL binds as its resolver gives it (127.0.0.1
# or ::1): asked by name here too, so create_connection tries each address "localhost" has
RAS_DEFAULT_ADDR = "localhost:28028"
RAS_CONNECT_S = 1.0
RAS_TOTAL_S = 5.0
RAS_CAP = 1 << 20
RAS_PEER_TIMEOUT_S = 2  # asked of RAS ("TIMEOUT"): its wait for silent peers, so its answer fits RAS_TOTAL_S


def ras_target(env: dict | None = None) -> str | None:
    """The RAS address to ask for a rank with environment ``env`` (this process's by default): its
    NCCL_RAS_ADDR, else NCCL's default; None for a gloo job or RAS switched off (NCCL_RAS_ENABLE=0)."""
    env = dict(os.environ) if env is None else env
    if env.get("COCKPIT_PG_BACKEND") != "nccl" or env.get("NCCL_RAS_ENABLE", "1").strip() == "0":
        return None
    return (env.get("NCCL_RAS_ADDR") or "").strip() or RAS_DEFAULT_ADDR


def ras_split(addr: str) -> tuple[str, int]:
    """"host:port", "[v6]:port" -> (host, port); ValueError when it is not one."""
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"NCCL_RAS_ADDR {addr!r} is not host:port")
    return host.strip("[]"), int(port)


def ras_ask(addr: str, connect_s: float = RAS_CONNECT_S, total_s: float = RAS_TOTAL_S, cap: int = RAS_CAP) -> dict:
    """The RAS answer at ``addr`` as a record (above); never raises."""
    began = time.monotonic()
    out: dict = {"addr": addr, "state": "error", "format": None, "text": None, "ms": 0.0, "truncated": False,
                 "note": None}
    try:
        host, port = ras_split(addr)
        sock = socket.create_connection((host, port), timeout=connect_s)
    except (ConnectionRefusedError, TimeoutError) as exc:
        out.update(state="none", note="nothing listens (no NCCL process on the node, or RAS off)"
                   if isinstance(exc, ConnectionRefusedError) else f"no connection within {connect_s:g} s")
    except (OSError, ValueError) as exc:
        out["note"] = f"{type(exc).__name__}: {exc}"[:300]
    else:
        with sock:
            _converse(sock, out, began + total_s, cap)
    out["ms"] = round((time.monotonic() - began) * 1000, 1)
    return out


def _converse(sock: socket.socket, out: dict, deadline: float, cap: int) -> None:
    buf = bytearray()
    try:
        if not _line(sock, b"CLIENT PROTOCOL 2\n", buf, deadline).startswith("SERVER PROTOCOL"):
            out["note"] = "not NCCL's RAS service: no SERVER PROTOCOL line"
            return
        _line(sock, f"TIMEOUT {RAS_PEER_TIMEOUT_S}\n".encode(), buf, deadline)  # OK, or ERROR where unknown
        fmt = _line(sock, b"SET FORMAT json\n", buf, deadline)
        out["format"] = "json" if fmt.strip().upper() == "OK" else "text"
        _send(sock, b"VERBOSE STATUS\n", deadline)
        truncated = _rest(sock, buf, deadline, cap)
    except TimeoutError:
        out["note"] = "RAS did not finish its answer in time"
        truncated = len(buf) > cap
    except OSError as exc:
        out["note"] = f"{type(exc).__name__}: {exc}"[:300]
        return
    out["text"] = bytes(buf[:cap]).decode("utf-8", "replace")
    out["truncated"] = truncated
    out["state"] = "answered" if out["note"] is None else "error"
    if truncated:
        out["note"] = f"answer cut at {cap} bytes"


def _send(sock: socket.socket, data: bytes, deadline: float) -> None:
    sock.settimeout(max(0.01, deadline - time.monotonic()))
    sock.sendall(data)


def _line(sock: socket.socket, data: bytes, buf: bytearray, deadline: float) -> str:
    """Send ``data``; the one line it is answered with (``buf`` keeps what came after it)."""
    _send(sock, data, deadline)
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer line")
        sock.settimeout(left)
        chunk = sock.recv(4096)
        if not chunk:
            break
        buf += chunk
        if len(buf) > 4096:
            break  # no line this long answers a command: take what came as the line
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line.decode("utf-8", "replace")


def _rest(sock: socket.socket, buf: bytearray, deadline: float, cap: int) -> bool:
    """Read until the service closes (its answer's end) into ``buf``; True when cut at ``cap``."""
    while len(buf) <= cap:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("answer not finished")
        sock.settimeout(left)
        chunk = sock.recv(65536)
        if not chunk:
            return False
        buf += chunk
    return True
