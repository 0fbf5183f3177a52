"""The Runs screen's table of runs as cells, fitted to the terminal's width. Pure: no textual, no IO.

At 80 columns a run id of 34 characters (``own-lightning-20261128-071827-eeb1``) or a long HEALTH cell pushed
LAUNCHER off the right edge (issue 33). Users copy run ids, so RUN is never cut; what gives way, in order:

- AGE is short always, as kubectl's AGE is (``45s``, ``12m``, ``5h``, ``3d``): ps's ``12.3 min`` took 8 cells
  for a figure nobody reads to the tenth here.
- NODES, last, is cut with "…" to the room the others leave, and left out where that is under its header's
  width (a sliver of a host list said nothing, and its header alone took 7 cells).
- HEALTH, before NODES in priority, is cut with "…" to what RUN, STATE, AGE, RANKS and LAUNCHER leave (never
  narrower than its header); the run view's title says it whole.

Where even that does not fit (under ~70 columns with a long id), the table scrolls sideways.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# ps's order (RUN STATE LAUNCHER NODES ... HEALTH) but HEALTH next to STATE: what a narrow terminal (80 columns)
# must still show comes first; NODES, a host list as long as the run has hosts, last, cut to the room it has
COLUMNS = ("RUN", "STATE", "HEALTH", "AGE", "RANKS", "LAUNCHER", "NODES")
PAD = 2  # a DataTable column's cell padding: one on each side
MOST_NODES = 24  # the NODES cell at most, however wide the terminal
_HEALTH, _NODES = COLUMNS.index("HEALTH"), COLUMNS.index("NODES")


@dataclass(frozen=True)
class Fitted:
    """The columns shown (COLUMNS, or all but NODES) and each row's cells for them."""

    columns: tuple[str, ...]
    rows: list[tuple[str, ...]]


def age(seconds: float) -> str:
    """A run's age in at most 4 characters, whole units as kubectl says it: 45s, 12m, 5h, 3d."""
    seconds = max(0.0, seconds)
    if seconds < 100:
        return f"{int(seconds)}s"
    if seconds < 100 * 60:
        return f"{int(seconds // 60)}m"
    return f"{int(seconds // 3600)}h" if seconds < 48 * 3600 else f"{int(seconds // 86400)}d"


def cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def fit(rows: Sequence[tuple[str, ...]], width: int) -> Fitted:
    """``rows`` (cells in COLUMNS' order) fitted to ``width`` columns (see the module's docstring): HEALTH cut to
    the room the columns that stay whole leave, NODES to what is left after it, or left out."""
    if not rows:
        return Fitted(COLUMNS, [])
    natural = [max(len(title), *(len(r[i]) for r in rows)) for i, title in enumerate(COLUMNS)]
    whole = sum(w + PAD for i, w in enumerate(natural) if i not in (_HEALTH, _NODES))
    room = width - whole  # for HEALTH and NODES, their padding included
    health = min(natural[_HEALTH], max(len(COLUMNS[_HEALTH]), room - PAD))
    nodes = min(natural[_NODES], room - health - 2 * PAD, MOST_NODES)
    keep = nodes >= len(COLUMNS[_NODES])
    out = []
    for r in rows:
        cells = (*r[:_HEALTH], cut(r[_HEALTH], health), *r[_HEALTH + 1:_NODES])
        out.append((*cells, cut(r[_NODES], nodes)) if keep else cells)
    return Fitted(COLUMNS if keep else COLUMNS[:_NODES], out)
