"""Load a recorded snapshot of tests/fixtures/deadlink/tcp/<scenario>/<tNNs> as the node agent's raw
transport records (cockpit.hang.transport_raw), so the fixtures go through the same parser as live data."""

from __future__ import annotations

from pathlib import Path

from helpers import REPO

TCP = REPO / "tests" / "fixtures" / "deadlink" / "tcp"


def meta(snapshot: Path) -> dict[str, dict]:
    """node -> {"rank", "addr", "pid"} from meta.txt."""
    out = {}
    for line in (snapshot / "meta.txt").read_text().splitlines():
        w = line.split()
        if w and w[0] == "rank":
            out[w[3]] = {"rank": int(w[1]), "addr": w[5], "pid": int(w[7])}
    return out


def raw_nodes(scenario: str, label: str, source: str = "ss") -> list[dict]:
    """One raw record per node; ``source`` "ss" (ss -tinpoem) or "proc" (/proc/<pid>/net/tcp{,6} only)."""
    snap = TCP / scenario / label
    out = []
    for node, m in sorted(meta(snap).items()):
        sysnet = {}
        for line in (snap / f"{node}.sys-class-net-eth0.txt").read_text().splitlines():
            key, _, value = line.partition(":")
            sysnet[key.strip()] = value.strip()
        rank = {"rank": m["rank"], "pid": m["pid"], "fd": (snap / f"{node}.fd-sockets.txt").read_text(),
                "tcp": (snap / f"{node}.proc-net-tcp.txt").read_text(),
                "tcp6": (snap / f"{node}.proc-net-tcp6.txt").read_text()}
        out.append({"host": node, "time": 0.0, "addresses": [m["addr"]], "ranks": [rank],
                    "ss": (snap / f"{node}.ss-tinpoem.txt").read_text() if source == "ss" else None,
                    "ifaces": {"eth0": sysnet}, "ib": {}})
    return out
