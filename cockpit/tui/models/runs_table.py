"""The Runs screen's table of runs as cells, fitted to the terminal's width. Pure: no textual, no IO."""

from __future__ import annotations

from collections.abc import Sequence

# ps's order (RUN STATE LAUNCHER NODES ... HEALTH) but HEALTH next to STATE: what a narrow terminal (80 columns)
# must still show comes first; NODES, a host list as long as the run has hosts, last, cut to the room it has
COLUMNS = ("RUN", "STATE", "HEALTH", "AGE", "RANKS", "LAUNCHER", "NODES")
PAD = 2  # a DataTable column's cell padding: one on each side
MOST_NODES = 24  # the NODES cell at most, however wide the terminal


def fit(rows: Sequence[tuple[str, ...]], width: int) -> list[tuple[str, ...]]:
    """``rows`` (cells in COLUMNS' order) with the last cell, NODES, cut with "…" to what the other columns leave
    of ``width``: at 80 columns LAUNCHER, after NODES, was off the screen's edge (issue 33's new-user pass).
    Never narrower than the NODES header; where even that does not fit, the table scrolls sideways."""
    if not rows:
        return []
    used = sum(max(len(title), *(len(r[i]) for r in rows)) + PAD for i, title in enumerate(COLUMNS[:-1]))
    room = min(max(width - used - PAD, len(COLUMNS[-1])), MOST_NODES)
    return [(*r[:-1], r[-1] if len(r[-1]) <= room else r[-1][:room - 1] + "…") for r in rows]
