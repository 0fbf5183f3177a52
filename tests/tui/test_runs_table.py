"""The Runs table's cells fitted to the terminal (cockpit.tui.models.runs_table), pure: at 80 columns LAUNCHER
was cut off the right edge (issue 33's new-user pass); NODES, now last, gives up its room first."""

from __future__ import annotations

from cockpit.tui.models.runs_table import COLUMNS, MOST_NODES, PAD, fit

RUN = ("demo-heal-20261128-070537-97f9", "succeeded", "-", "24.1 s", "2", "local", "gpu-node-01,gpu-node-02")


def widths(rows) -> list[int]:
    return [max(len(title), *(len(r[i]) for r in rows)) + PAD for i, title in enumerate(COLUMNS)]


def test_at_80_columns_every_column_to_launcher_is_whole_and_nodes_takes_the_rest():
    [row] = fit([RUN], 80)
    assert row[:-1] == RUN[:-1] and row[-1].endswith("…") and RUN[-1].startswith(row[-1][:-1])
    assert COLUMNS.index("LAUNCHER") < COLUMNS.index("NODES") == len(COLUMNS) - 1
    assert COLUMNS.index("HEALTH") == 2
    assert sum(widths([row])[:-1]) <= 80, widths([row])  # a 30-character run id: NODES' header is cut
    [short] = fit([("demo-20261128-070736-6a65", *RUN[1:])], 80)  # the demo's: the whole table fits
    assert sum(widths([short])) <= 80 and short[-1].endswith("…"), (widths([short]), short)


def test_wide_enough_nothing_is_cut_and_never_more_than_most_nodes():
    assert fit([RUN], 160) == [RUN]
    many = ",".join(f"node{i:02}" for i in range(20))
    [row] = fit([(*RUN[:-1], many)], 400)
    assert len(row[-1]) == MOST_NODES and row[-1].endswith("…")


def test_too_narrow_for_nodes_leaves_its_header_width():
    [row] = fit([RUN], 60)
    assert len(row[-1]) == len("NODES") and row[:-1] == RUN[:-1]
    assert fit([], 80) == []
