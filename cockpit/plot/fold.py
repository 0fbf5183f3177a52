"""The charts of many ranks, folded (issue 32): beyond FOLD_FROM ranks a line per rank is a solid block and a
min-max band is as wide as the one worst rank makes it, so the line charts draw the median (p50) with the
p10-p90 band, which a single rank cannot move, plus the ranks that stand apart from it (the outliers: a straggler,
a stalled or diverged rank) as lines of their own; and the heat maps fold by node, a row per node (or run of
nodes) showing its slowest rank, with a node's own ranks one pick away. Pure.

An outlier is a rank whose points sit apart from the median by more than OUTLIER band widths, on average over
its points or over its last quarter (a rank that stalled at the end): the band's width at a point is p90 - p10
there, at least SPREAD_FLOOR of the median's size (ranks that move as one have no width between them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from cockpit.plot.series import Heat

FOLD_FROM = 64  # ranks drawn as lines of their own up to here (cockpit.plot.chart.lines_for's band beyond 8)
OUTLIER = 1.5  # band widths from the median
SPREAD_FLOOR = 0.05  # of |p50|
MOST_OUTLIERS = 3

Points = tuple[tuple[float, float], ...]


def fold_lines(named: Sequence[tuple[str, Points]], buckets: int,
               most: int = MOST_OUTLIERS) -> tuple[tuple[tuple[float, ...], ...], list[int]]:
    """((xs, p10, p50, p90) per x bucket, empty buckets left out; the indices into ``named`` of the ranks that
    stand apart from the median, the farthest first: module docstring). One pass to bucket the points, one
    to score the ranks (4,096 ranks x 250 points: about a second of a worker thread on this machine)."""
    if not any(pts for _, pts in named) or buckets < 1:
        return ((), (), (), ()), []
    xs = [x for _, pts in named for x, _ in pts]
    lo_x, hi_x = min(xs), max(xs)
    scale, top = buckets / ((hi_x - lo_x) or 1.0), buckets - 1
    slots: list[list[float]] = [[] for _ in range(buckets)]
    where: list[list[int]] = []
    for _, pts in named:
        idx = [min(top, int((x - lo_x) * scale)) for x, _ in pts]
        where.append(idx)
        for (_, y), i in zip(pts, idx, strict=True):
            slots[i].append(y)
    width = 1.0 / scale
    rows, mid, spread = [], [0.0] * buckets, [1.0] * buckets
    for i, vals in enumerate(slots):
        if vals:
            vals.sort()
            p10, p50, p90 = _quantile(vals, 0.1), _quantile(vals, 0.5), _quantile(vals, 0.9)
            rows.append((lo_x + (i + 0.5) * width, p10, p50, p90))
            mid[i], spread[i] = p50, 1.0 / max(p90 - p10, SPREAD_FLOOR * abs(p50), 1e-12)
    band = tuple(tuple(r[k] for r in rows) for k in range(4))
    return band, (_outliers(named, where, mid, spread, most) if len(named) >= 3 else [])


def _outliers(named: Sequence[tuple[str, Points]], where: list[list[int]], mid: list[float], spread: list[float],
              most: int) -> list[int]:
    """The ranks (indices) more than OUTLIER band widths from the median (``mid``; ``spread``: 1 / the band's
    width) on average, over all their points or their last quarter; the farthest ``most``."""
    scored = []
    for k, ((_, pts), idx) in enumerate(zip(named, where, strict=True)):
        if not pts:
            continue
        devs = [(y - mid[i]) * spread[i] for (_, y), i in zip(pts, idx, strict=True)]
        tail = devs[len(devs) * 3 // 4:] or devs
        score = max(abs(sum(devs) / len(devs)), abs(sum(tail) / len(tail)))
        if score > OUTLIER:
            scored.append((score, k))
    return [k for _, k in sorted(scored, key=lambda s: (-s[0], s[1]))[:most]]


def _quantile(values: list[float], q: float) -> float:
    """The q-quantile of sorted ``values`` (linear between the nearest two)."""
    pos = q * (len(values) - 1)
    i = int(pos)
    j = min(i + 1, len(values) - 1)
    return values[i] + (values[j] - values[i]) * (pos - i)


def by_node(heat: Heat, hosts: Mapping[int, str], rows: int) -> tuple[Heat, dict[str, tuple[int, ...]]]:
    """``heat`` (a row per rank, labelled with its rank) folded by node: a row per host, in the order of their
    lowest ranks, showing the slowest of its ranks in each slice (heat's own rule for shared rows: a straggler
    is not averaged away); more hosts than ``rows``: consecutive hosts share a row ("n384+19": n384 and the 19
    after it). Rows whose rank has no host stay as they are, each its own "host". With it, each row's ranks."""
    groups: dict[str, list[int]] = {}
    for i, label in enumerate(heat.labels):
        host = hosts.get(int(label)) if label.isdigit() else None
        groups.setdefault(host or label, []).append(i)
    names = list(groups)
    per = -(-len(names) // max(1, rows))
    labels: list[str] = []
    cells: list[tuple[float | None, ...]] = []
    members_of: dict[str, tuple[int, ...]] = {}
    columns = len(heat.cells[0]) if heat.cells else 0
    for start in range(0, len(names), per):
        chunk = names[start:start + per]
        members = [i for name in chunk for i in groups[name]]
        labels.append(chunk[0] if len(chunk) == 1 else f"{chunk[0]}+{len(chunk) - 1}")
        members_of[labels[-1]] = tuple(int(heat.labels[i]) for i in members if heat.labels[i].isdigit())
        cells.append(tuple(_slowest([heat.cells[i][c] for i in members]) for c in range(columns)))
    return replace(heat, labels=tuple(labels), cells=tuple(cells), who="node"), members_of


def _slowest(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None
