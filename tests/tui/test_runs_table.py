"""The Runs table's cells fitted to the terminal (cockpit.tui.models.runs_table), pure: at 80 columns LAUNCHER
was cut off the right edge (issue 33's new-user pass), and still was with a 34-character run id or a long HEALTH.
RUN is never cut (users copy it); AGE is short; HEALTH is cut to the room the whole columns leave, and NODES, last,
to what is left after it, or left out."""

from __future__ import annotations

from cockpit.tui.models.runs_table import COLUMNS, MOST_NODES, PAD, age, fit

RUN = ("demo-heal-20261128-070537-97f9", "succeeded", "-", "12m", "2", "local", "gpu-node-01,gpu-node-02")
LONG = ("own-lightning-20261128-071827-eeb1", "succeeded", "stalled 10 min (rank 3)", "12m", "2", "local", "vm")


def widths(columns, rows) -> list[int]:
    return [max(len(title), *(len(r[i]) for r in rows)) + PAD for i, title in enumerate(columns)]


def test_at_80_columns_every_column_to_launcher_is_whole_and_nodes_takes_the_rest():
    got = fit([RUN], 80)
    [row] = got.rows
    assert got.columns == COLUMNS and row[:-1] == RUN[:-1] and row[-1].endswith("…")
    assert RUN[-1].startswith(row[-1][:-1]) and sum(widths(got.columns, got.rows)) <= 80
    short = fit([("demo-20261128-070736-6a65", *RUN[1:])], 80)  # the demo's: the whole table fits
    assert sum(widths(short.columns, short.rows)) <= 80 and short.columns == COLUMNS


def test_a_long_run_id_and_health_leave_launcher_whole_at_80_columns():
    """HEALTH gives way before LAUNCHER, with an ellipsis; NODES, with no room for its header, is left out."""
    got = fit([LONG, RUN], 80)
    assert got.columns == COLUMNS[:-1]
    long, run = got.rows
    assert long[0] == LONG[0] and long[1] == "succeeded" and long[3:] == ("12m", "2", "local")
    assert long[2].endswith("…") and LONG[2].startswith(long[2][:-1]) and len(long[2]) >= len("HEALTH")
    assert run[2] == "-" and sum(widths(got.columns, got.rows)) <= 80, widths(got.columns, got.rows)
    assert fit([LONG], 120).rows == [LONG]  # room for all of it


def test_wide_enough_nothing_is_cut_and_never_more_than_most_nodes():
    assert fit([RUN], 160).rows == [RUN]
    many = ",".join(f"node{i:02}" for i in range(20))
    [row] = fit([(*RUN[:-1], many)], 400).rows
    assert len(row[-1]) == MOST_NODES and row[-1].endswith("…")


def test_too_narrow_health_keeps_its_header_width_and_the_table_scrolls():
    got = fit([LONG], 60)
    assert got.columns == COLUMNS[:-1] and len(got.rows[0][2]) == len("HEALTH") and got.rows[0][0] == LONG[0]
    assert fit([], 80).rows == []


def test_age_is_said_in_whole_units_in_at_most_4_characters():
    assert [age(s) for s in (-1, 45, 99.9, 100, 5999, 6000, 47 * 3600, 48 * 3600, 400 * 86400)] == [
        "0s", "45s", "99s", "1m", "99m", "1h", "47h", "2d", "400d"]
