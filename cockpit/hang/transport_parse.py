"""Raw transport text -> cockpit.hang.transport records. Pure; one parser per source, shared by the
recorded fixtures (tests/fixtures/deadlink/) and what the node agent sends live.

    parse_ss            `ss -tinoe[p][H]` (netlink tcp_info): every field the finding uses
    parse_proc_net_tcp  /proc/<pid>/net/tcp and tcp6 (hex addresses, clock ticks): no RTT, no byte counters
    parse_fd_sockets    /proc/<pid>/fd listing lines "N -> socket:[INODE]" -> the rank's socket inodes
    parse_iface         /sys/class/net/<iface>/{operstate,carrier,carrier_down_count}
    parse_ib_port       /sys/class/infiniband/<dev>/ports/<n>/{state,phys_state,link_layer,counters/*}

Bad input raises TransportParseError naming the source, the line and what was wrong, never anything else.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from typing import Any, cast

from cockpit.hang.transport import Endpoint, IbPort, IfaceState, TcpSocket, TcpState, Timer, normal_host

USER_HZ = 100  # /proc/net/tcp's tm->when and rto columns are in clock ticks (USER_HZ, 100 on Linux)
STATES: tuple[str, ...] = ("ESTAB", "SYN-SENT", "SYN-RECV", "FIN-WAIT-1", "FIN-WAIT-2", "TIME-WAIT", "CLOSE",
                           "CLOSE-WAIT", "LAST-ACK", "LISTEN", "CLOSING", "UNCONN")
PROC_STATES = {1: "ESTAB", 2: "SYN-SENT", 3: "SYN-RECV", 4: "FIN-WAIT-1", 5: "FIN-WAIT-2", 6: "TIME-WAIT",
               7: "CLOSE", 8: "CLOSE-WAIT", 9: "LAST-ACK", 10: "LISTEN", 11: "CLOSING"}
PROC_TIMERS: dict[int, Timer] = {0: "none", 1: "on", 2: "keepalive", 3: "timewait", 4: "persist"}
_PID = re.compile(r"pid=(\d+)")
_FD = re.compile(r"socket:\[(\d+)\]")


class TransportParseError(ValueError):
    """What could not be read, where (source:line) and a hint."""

    def __init__(self, source: str, line: int, what: str, hint: str = "") -> None:
        self.source, self.line, self.what, self.hint = source, line, what, hint
        super().__init__(f"{source}:{line}: {what}" + (f" (hint: {hint})" if hint else ""))


def endpoint(text: str) -> Endpoint:
    """``10.0.0.1:80``, ``[::ffff:10.0.0.1]:80``, ``*:22`` -> Endpoint (ValueError when not one)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ValueError(f"not an address:port: {text!r}")
    return Endpoint(normal_host(host), int(port) if port != "*" else 0)


def parse_ss(text: str, source: str = "ss") -> list[TcpSocket]:
    """Every socket of ``ss -tinoe`` output (with or without -p, -m, -H, and with the header)."""
    out: list[TcpSocket] = []
    head: tuple[int, list[str]] | None = None
    extra: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith(("State", "Netid", "Recv-Q")):
            continue
        if line[0].isspace() and head is not None:
            extra += line.split()
            continue
        if head is not None:
            out.append(_ss_record(source, *head, extra))
        head, extra = (n, line.split()), []
    if head is not None:
        out.append(_ss_record(source, *head, extra))
    return out


def _ss_record(source: str, n: int, words: list[str], extra: list[str]) -> TcpSocket:
    if words and words[0] == "tcp":  # ss -a prints a Netid column first
        words = words[1:]
    try:
        state, recv_q, send_q, local, peer = words[0], int(words[1]), int(words[2]), words[3], words[4]
        local_ep, peer_ep = endpoint(local), endpoint(peer)
    except (IndexError, ValueError):
        raise TransportParseError(source, n, f"not an ss socket line: {' '.join(words)[:80]!r}",
                                  "expected `ss -tinoe` output: State Recv-Q Send-Q Local Peer ...") from None
    if state not in STATES:
        raise TransportParseError(source, n, f"unknown TCP state {state!r}", f"one of {', '.join(STATES)}")
    fields = _ss_fields(words[5:] + extra)
    return TcpSocket(local_ep, peer_ep, cast(TcpState, state if state != "UNCONN" else "UNKNOWN"), send_q,
                     recv_q, **fields)


def _ss_fields(words: list[str]) -> dict[str, Any]:
    f: dict[str, Any] = {}
    info = False
    for w in words:
        key, _, value = w.partition(":")
        if w.startswith("timer:("):
            kind = w[7:].rstrip(")").split(",")[0]  # (kind,expiry,count): `on,,4` when due; backoff says more
            f["timer"] = kind if kind in ("on", "persist", "keepalive", "timewait") else "none"
        elif w.startswith("users:("):
            m = _PID.search(w)
            f["pid"] = int(m.group(1)) if m else None
        elif key == "ino":
            f["inode"] = _int(value)
        elif key == "rto":
            f["rto_ms"], info = _float(value), True
        elif key == "rtt":
            f["srtt_ms"] = _float(value.split("/")[0])
        elif key in ("backoff", "unacked", "lastsnd", "lastrcv", "lastack", "bytes_acked", "bytes_received",
                     "bytes_retrans"):
            f[{"lastsnd": "lastsnd_ms", "lastrcv": "lastrcv_ms", "lastack": "lastack_ms"}.get(key, key)] = _int(value)
        elif key == "retrans":
            f["retransmits"] = _int(value.split("/")[-1])
        elif key == "busy":
            f["busy_ms"] = _int(value.removesuffix("ms"))
        elif w == "app_limited":
            f["app_limited"] = True
    if info:  # ss -i prints backoff/unacked/retrans only when non-zero
        for k in ("backoff", "unacked", "retransmits", "bytes_retrans"):
            f.setdefault(k, 0)
        f.setdefault("app_limited", False)
    for i, w in enumerate(words[:-1]):  # "delivery_rate 889712bps": the value is the next word
        if w == "delivery_rate":
            f["delivery_bps"] = _float(words[i + 1].removesuffix("bps"))
    return f


def _int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


def _float(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _hex_endpoint(text: str) -> Endpoint:
    addr, _, port = text.partition(":")
    raw = bytes.fromhex(addr)
    if len(raw) == 4:  # one 32-bit word in host (little-endian) order
        host = socket.inet_ntop(socket.AF_INET, raw[::-1])
    elif len(raw) == 16:  # four such words
        host = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
    else:
        raise ValueError(f"address of {len(raw)} bytes")
    return Endpoint(normal_host(host), int(port, 16))


def parse_proc_net_tcp(text: str, inodes: set[int] | None = None, source: str = "/proc/net/tcp") -> list[TcpSocket]:
    """/proc/<pid>/net/tcp or tcp6 -> sockets (only those whose inode is in ``inodes`` when given)."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or words[0] == "sl":
            continue
        try:
            inode = int(words[9])
            if inodes is not None and inode not in inodes:
                continue
            tx, rx = (int(x, 16) for x in words[4].split(":"))
            tr = int(words[5].split(":")[0], 16)
            state = PROC_STATES.get(int(words[3], 16), "UNKNOWN")
            rto = int(words[12]) * 1000 / USER_HZ if len(words) > 12 else None
            out.append(TcpSocket(_hex_endpoint(words[1]), _hex_endpoint(words[2]), cast(TcpState, state), tx, rx,
                                 timer=PROC_TIMERS.get(tr, "none"), backoff=int(words[6], 16), rto_ms=rto,
                                 inode=inode))
        except (IndexError, ValueError):
            raise TransportParseError(source, n, f"not a /proc/net/tcp row: {line.strip()[:80]!r}",
                                      "expected the kernel's table: sl local_address rem_address st ...") from None
    return out


def parse_fd_sockets(text: str) -> set[int]:
    """The socket inodes among /proc/<pid>/fd link targets ("3 -> socket:[263694]" or bare "socket:[...]")."""
    return {int(m.group(1)) for m in _FD.finditer(text)}


def _value(files: Mapping[str, str], name: str) -> str | None:
    text = files.get(name)
    return None if text is None else text.strip() or None


def parse_iface(name: str, files: Mapping[str, str]) -> IfaceState:
    """From /sys/class/net/<name>'s files (name -> content; a missing or unreadable one is absent)."""
    carrier = _value(files, "carrier")
    down = _value(files, "carrier_down_count")
    return IfaceState(name, _value(files, "operstate"), None if carrier not in ("0", "1") else carrier == "1",
                      int(down) if down and down.isdigit() else None)


def parse_sys_class_net(name: str, text: str) -> IfaceState:
    """The recorded form: "operstate: down" lines (tests/fixtures/deadlink/tcp/*/sys-class-net-eth0.txt)."""
    files = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in text.splitlines()) if k.strip()}
    return parse_iface(name, files)


def parse_ib_port(device: str, port: int, files: Mapping[str, str]) -> IbPort:
    """From one port's sysfs files: "state", "phys_state", "link_layer", "counters/<name>" -> content.
    A counter reading "N/A (no PMA)" or anything not a number is None."""
    counters: dict[str, int | None] = {}
    for key, text in files.items():
        if key.startswith("counters/"):
            v = text.strip()
            counters[key[9:]] = int(v) if v.isdigit() else None
    return IbPort(device, port, _value(files, "state"), _value(files, "phys_state"), _value(files, "link_layer"),
                  counters)
