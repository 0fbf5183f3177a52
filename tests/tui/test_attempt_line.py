"""The run view's timeline of attempts (cockpit.tui.models.attempt_line), pure: the bar's shares and end marks,
the rows, the goodput, and nothing at all for a run of one attempt."""

from __future__ import annotations

from cockpit.run.attempts import Attempt
from cockpit.tui.models.attempt_line import bar, rows, timeline

HEALED = [Attempt(0, 100.0, ended=140.0, failed=139.0, end="failure", culprit_rank=1, culprit_host="n1",
                  cause="rank 1 had a GPU fault (Xid)", step=30, lost_s=12.4),
          Attempt(1, 150.0, ended=200.0, end="succeeded", step=80, resumed_from=20)]


def test_the_bar_gives_each_attempt_its_share_and_its_end():
    # 100 s over 20 cells: attempt 0 is 40 s (8 cells, x at its end), the 10 s restart 2 dots, attempt 1 10 cells
    assert bar(HEALED, 200.0, 20) == "0000000x··111111111✓"
    running = [HEALED[0], Attempt(1, 150.0)]
    assert bar(running, 160.0, 12) == "0000000x··1▶"  # the last one runs: drawn up to now (60 s, 5 s a cell)
    assert bar(HEALED, 200.0, 3) == ""  # too narrow for one cell each


def test_the_rows_say_when_how_where_and_how_far():
    assert rows(HEALED, 200.0) == [
        "#0 +0 s, 40 s, failure rank 1 on n1, step 30, lost 12 s: rank 1 had a GPU fault (Xid)",
        "#1 +50 s, 50 s, succeeded, step 80 (resumed from 20)"]


def test_the_panel_is_empty_for_one_attempt_and_has_the_goodput():
    assert timeline(HEALED[:1], 0.5, 200.0, 80) == ""
    text = timeline(HEALED, 0.62, 200.0, 60)
    head, first, more, second = text.split("\n")
    assert head.startswith("attempts 2 · goodput 62% 0") and head.endswith("✓") and len(head) == 60
    assert first.startswith("#0 +0 s, 40 s, failure") and len(first) <= 60 and second.startswith("#1 +50 s")
    # the row longer than the width goes on under its text, whole: cut at 60, it lost its cause
    assert more.startswith("   ") and more.endswith("rank 1 had a GPU fault (Xid)") and len(more) <= 60
    assert " ".join([first, more.strip()]) == rows(HEALED, 200.0)[0]


def test_a_row_takes_two_lines_at_most():
    """At 80x24 the panel must leave the log its rows: a longer row ends in "…" on its second line."""
    long = Attempt(0, 0.0, ended=10.0, end="failure", culprit_rank=1, culprit_host="vm", cause="x " * 80, step=3)
    text = timeline([long, Attempt(1, 12.0, ended=20.0, end="succeeded")], None, 20.0, 78)
    lines = text.split("\n")
    assert len(lines) == 4 and lines[2].endswith("…") and all(len(t) <= 78 for t in lines), lines


def test_the_last_attempts_end_is_the_last_cell_whatever_the_rounding():
    """A real run (stopped, then resumed: wall times as status.json had them) drew `✓·` at 53 and 54 cells: its
    end, at the right edge, computed as 52.99999999 cells (issue 33's new-user pass at 80x24)."""
    run = [Attempt(0, 1795843235.57093, ended=1795843258.6, end="stopped"),
           Attempt(1, 1795843261.1, ended=1795843287.606, end="succeeded", resumed=True)]
    for width in range(20, 120):
        assert bar(run, 0.0, width).endswith("✓"), width
