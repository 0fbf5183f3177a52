"""A slow link's straggler finding: "rank 1 (node2)'s wait is network: its connections run at 0.9 Mbit/s with
180 ms RTT, the others' at 0.2 ms", with the link finding and its connection table (cockpit.hang.linkwords)
under ``link``. Pure: the slow link, its pair of gathers and the ranks' progress in, status.json's dict out."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from cockpit.hang.linkfind import ConnRow, LinkFinding
from cockpit.hang.linkwatch import Pair, send_rates
from cockpit.hang.linkwords import link_dict
from cockpit.run.progress import RankProgress

Json = dict[str, Any]


def rate_words(bps: float) -> str:
    return f"{bps / 1e6:.1f} Mbit/s" if bps >= 1e5 else f"{bps / 1e3:.0f} kbit/s"


def ms_words(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    one = f"{lo:.1f} ms" if lo < 10 else f"{lo:.0f} ms"
    return one if hi < 1.2 * lo else f"{lo:.0f}-{hi:.0f} ms"


def _key(r: ConnRow) -> tuple[str, str, str]:
    return r.observer, r.local, r.peer


def network_finding(f: LinkFinding, pair: Pair, since: float, ranks: Mapping[int, RankProgress],
                    run_ref: str = "RUN") -> Json:
    """The straggler finding for a slow link on ``f.node``: its ranks (those on that host), the slow
    connections' send rate, RTT and retransmissions, the other connections' RTT; ``since``: when the run's slow
    signs began (cockpit.hang.linkwatch)."""
    node = f.node
    mine = sorted(r for r, p in ranks.items() if p.host == node)
    slow = [r for r in f.table if r.kind == "slow"]
    rest = [r for r in f.table if r.kind != "slow" and r.srtt_ms is not None]
    rates = send_rates(pair)
    fastest = max((rates[_key(r)] for r in slow if _key(r) in rates), default=None)
    rtt = [r.srtt_ms for r in slow if r.srtt_ms is not None]
    retrans = sum(r.retransmits or 0 for r in slow)
    who = (f"rank {mine[0]} ({node})" if len(mine) == 1 else
           f"ranks {', '.join(map(str, mine))} ({node})" if mine else node)
    run = f" run at {rate_words(fastest)}" if fastest is not None else " run"
    others = f", the others' at {ms_words([statistics.median(r.srtt_ms for r in rest if r.srtt_ms is not None)])} RTT" \
        if rest else ""
    link = f"{node}'s link" + (f" ({f.iface})" if f.iface else "")
    peers = sorted({r.peer_node if r.observer == node else r.observer for r in slow})
    own = [w for r in mine if (w := ranks[r].wait) is not None]
    other = [p.wait for r, p in ranks.items() if r not in mine and p.wait is not None]
    share = (f"; {'it waits' if len(mine) == 1 else 'they wait'} {100 * statistics.median(own):.0f}% of the time "
             f"in collectives, the others {100 * statistics.median(other):.0f}%" if own and other else "")
    text = (f"{who}'s wait is network: its connections{run} with {ms_words(rtt) if rtt else '?'} RTT and "
            f"{retrans} retransmissions{others}: {link} is slow (its connections to {', '.join(peers)}){share}")
    iface = f.iface or "IFACE"
    hint = (f"check {link} and its switch port: `ip -s link show {iface}` on {node} (errors, drops), `tc qdisc show "
            f"dev {iface}` (a shaper left on), `ethtool {iface}` (speed, duplex); run again without it: "
            f"`cockpit run JOB --exclude {node}`, or list spares in spare_nodes")
    return {"kind": "straggler", "severity": "warning", "rank": mine[0] if mine else None, "host": node,
            "wait_share": round(statistics.median(own), 3) if own else None,
            "others_share": round(statistics.median(other), 3) if other else None,
            "began": round(since, 3), "found": round(pair.ended, 3),
            "link": {**link_dict(f, run_ref=run_ref), "cause": "network", "ranks": mine,
                     "send_bps": round(fastest) if fastest is not None else None},
            "text": text, "hint": hint}
