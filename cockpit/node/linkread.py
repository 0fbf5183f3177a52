"""A node's transport evidence for a stalled job, as raw text (parsed in cockpit: cockpit.hang.transport_raw):
for each rank pid, its socket inodes (/proc/<pid>/fd) and its rows of /proc/<pid>/net/tcp{,6}; the node's
`ss -tinoepH` rows of those sockets when iproute2 is installed; each interface's operstate, carrier and
carrier_down_count with its addresses; InfiniBand/RoCE ports' state and counters.

Stdlib only, and no import of cockpit: inlined into the node agent (cockpit.launch.ssh.shell.agent_source).
Bounded: only the ranks' own rows are kept, each file read is capped, `ss` has a short timeout.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

LINK_READ_CAP = 1 << 20  # bytes per file read: a /proc/net/tcp of ~7000 sockets
LINK_SS_TIMEOUT = 3.0
LINK_IB = "/sys/class/infiniband"
LINK_INO = re.compile(r"\bino:(\d+)\b")


def link_file(path: str, cap: int = LINK_READ_CAP) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(cap).decode("utf-8", "replace")
    except OSError:
        return None  # gone, or unreadable (EINVAL: `carrier` of an interface set down)


def link_inodes(pid: int) -> tuple[str, set[str]]:
    """The fd listing of a pid's sockets ("N -> socket:[INODE]" lines) and their inodes."""
    lines, inodes = [], set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return "", set()
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:["):
            lines.append(f"{name} -> {target}")
            inodes.add(target[8:-1])
    return "\n".join(lines) + "\n", inodes


def link_tables(pid: int, tables: dict) -> tuple[str | None, str | None]:
    """The pid's /proc/net/tcp and tcp6: its network namespace's tables, read once per namespace (``tables``,
    namespace -> both), since the kernel writes them afresh at each read and every process of a namespace
    sees the same ones (a node's ranks: one read, not one per rank)."""
    try:
        space = os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        space = f"pid {pid}"  # its namespace cannot be told: its own read
    if space not in tables:
        tables[space] = (link_file(f"/proc/{pid}/net/tcp"), link_file(f"/proc/{pid}/net/tcp6"))
    return tables[space]


def link_rows(text: str | None, inodes: set[str], indexed: dict | None = None) -> str | None:
    """/proc/net/tcp's header and the rows of ``inodes`` only, in the table's order. ``indexed``: the tables
    split by socket inode already, by text (one namespace's table serves every process in it: split once)."""
    if text is None:
        return None
    indexed = {} if indexed is None else indexed
    if text not in indexed:
        lines = text.splitlines()
        rows: dict[str, list[tuple[int, str]]] = {}
        for at, ln in enumerate(lines[1:]):
            fields = ln.split()
            if len(fields) > 9:
                rows.setdefault(fields[9], []).append((at, ln))
        indexed[text] = (lines[:1], rows)
    head, rows = indexed[text]
    keep = sorted(row for inode in inodes for row in rows.get(inode, ()))
    return "\n".join(head + [ln for _at, ln in keep]) + "\n"


def link_ss(inodes: set[str]) -> str | None:
    """`ss -tinoepH` records (a line and its indented continuation) of the given socket inodes; None without ss."""
    ss = shutil.which("ss") or next((p for p in ("/usr/sbin/ss", "/sbin/ss") if os.path.exists(p)), None)
    if ss is None:
        return None
    try:
        out = subprocess.run([ss, "-tinoepH"], capture_output=True, text=True, timeout=LINK_SS_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    keep: list[str] = []
    record: list[str] = []
    for line in out.stdout.splitlines():
        if line[:1].isspace() and record:
            record.append(line)
            continue
        if record and any(m in inodes for m in LINK_INO.findall(" ".join(record))):
            keep += record
        record = [line]
    if record and any(m in inodes for m in LINK_INO.findall(" ".join(record))):
        keep += record
    return "\n".join(keep) + "\n"


def link_ifaces(ifaces: list[dict] | None) -> dict:
    out = {}
    for i in ifaces or []:
        name = i.get("name")
        if not name or i.get("loopback"):
            continue
        base = f"/sys/class/net/{name}"
        files: dict = {k: link_file(f"{base}/{k}", 256) for k in ("operstate", "carrier", "carrier_down_count")}
        files["addresses"] = [a.split("/")[0] for a in (i.get("ipv4") or []) + (i.get("ipv6") or [])]
        out[name] = files
    return out


def link_ib() -> dict:
    out: dict = {}
    try:
        devices = sorted(os.listdir(LINK_IB))
    except OSError:
        return out
    for dev in devices[:64]:
        ports = f"{LINK_IB}/{dev}/ports"
        try:
            numbers = sorted(os.listdir(ports))[:8]
        except OSError:
            continue
        for port in numbers:
            base = f"{ports}/{port}"
            files = {k: link_file(f"{base}/{k}", 256) for k in ("state", "phys_state", "link_layer")}
            try:
                counters = sorted(os.listdir(f"{base}/counters"))[:64]
            except OSError:
                counters = []
            files.update({f"counters/{c}": link_file(f"{base}/counters/{c}", 64) for c in counters})
            out[f"{dev}/{port}"] = files
    return out


def link_read(host: str, pids: dict[int, int], ifaces: list[dict] | None) -> dict:
    """The raw transport record of this node's ranks (rank -> pid); see cockpit.hang.transport_raw."""
    ranks: list[dict] = []
    every: set[str] = set()
    read: dict[int, dict] = {}
    tables: dict[str, tuple[str | None, str | None]] = {}
    indexed: dict = {}
    for rank, pid in sorted(pids.items()):
        if pid not in read:  # a process standing for several ranks is read once
            fd, inodes = link_inodes(pid)
            every |= inodes
            tcp, tcp6 = link_tables(pid, tables)
            read[pid] = {"fd": fd, "tcp": link_rows(tcp, inodes, indexed), "tcp6": link_rows(tcp6, inodes, indexed)}
        ranks.append({"rank": rank, "pid": pid, **read[pid]})
    iface = link_ifaces(ifaces)
    addresses = sorted({a for i in iface.values() for a in i["addresses"]})
    return {"host": host, "time": time.time(), "addresses": addresses, "ranks": ranks,
            "ss": link_ss(every) if every else None, "ifaces": iface, "ib": link_ib()}
