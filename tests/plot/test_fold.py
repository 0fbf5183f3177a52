"""The charts of 4,096 ranks folded (issue 32, cockpit.plot.fold): the median and the p10-p90 band instead of a
line per rank, the rank that stands apart drawn on its own, and the heat maps a row per node, the straggler's
node flagged. Not timed."""

from __future__ import annotations

import random

from cockpit.plot import chart
from cockpit.plot.chart import HIGH, LOW, MEAN
from cockpit.plot.fold import FOLD_FROM
from cockpit.plot.series import BEATS, RankSeries

T0 = 1_790_000_000.0
RANKS = 4096
HOSTS = {r: f"n{r // 8:03d}" for r in range(RANKS)}
SLOW = 3073  # on n384


def stepping(rank: int, every: float, rng: random.Random, points: int = 40) -> RankSeries:
    """A rank that steps every ``every`` s (jittered by up to 5%), its loss falling."""
    times, t = [], T0
    for _ in range(points):
        t += every * rng.uniform(0.95, 1.05)
        times.append(t)
    return RankSeries(rank, tuple(range(1, points + 1)), tuple(times), tuple(1.0 / s for s in range(1, points + 1)))


def run(slow: float | None = 2.0) -> list[RankSeries]:
    rng = random.Random(7)
    # over the same 40 s: the straggler makes half the steps
    return [stepping(r, slow, rng, 20) if r == SLOW and slow else stepping(r, 1.0, rng) for r in range(RANKS)]


def test_a_straggler_stands_out_of_4096_ranks_in_the_folded_rate_chart():
    lines = chart.rate_chart(run(), "r: steps/s per rank", 120).lines
    assert [(line.label, line.role) for line in lines] == [
        ("p90 of 4096", HIGH), ("p50 of 4096", MEAN), ("p10", LOW), (f"rank {SLOW} (outlier)", "rank")]
    p10, p50 = lines[2].ys, lines[1].ys
    assert all(0.9 < y < 1.1 for y in p50) and all(y > 0.9 for y in p10[1:-1])  # the one rank moves no band
    assert max(lines[3].ys) < 0.6  # its own line: half the others' rate


def test_ranks_that_move_as_one_have_no_outlier():
    lines = chart.rate_chart(run(slow=None), "r", 120).lines
    assert [line.role for line in lines] == [HIGH, MEAN, LOW]


def test_up_to_64_ranks_the_band_is_still_the_mean_with_min_and_max():
    lines = chart.loss_chart(run()[:FOLD_FROM], "r", 120).lines
    assert [line.label for line in lines] == [f"max of {FOLD_FROM}", f"mean of {FOLD_FROM}", "min"]


def holds(label: str, node: int) -> bool:
    """Whether the heat map's row ``label`` ("n378" or "n378+20": n378 and the 20 after it) holds node ``node``."""
    first, _, more = label.partition("+")
    return int(first[1:]) <= node <= int(first[1:]) + int(more or 0)


def beats(rank: int, share: float) -> RankSeries:
    """A rank's beats: 1 collective/s, ``share`` of each second waited inside it."""
    times = tuple(T0 + s for s in range(30))
    return RankSeries(rank, tuple(range(30)), times, (None,) * 30, BEATS, tuple(share * s for s in range(30)))


def test_the_wait_map_folds_by_node_and_flags_the_stragglers_node():
    series = [beats(r, 0.02 if r == SLOW else 0.6) for r in range(RANKS)]
    c = chart.build("wait", [], "r", 100, 30, beats=series, hosts=HOSTS)
    rows = c.heat.labels
    assert c.heat.who == "node" and len(rows) <= 25 and rows[0] == "n000+20"
    assert c.flagged == tuple(lb for lb in rows if holds(lb, 384))  # the row holding n384, alone
    assert f"rank {SLOW} waits 2%" in c.note


def test_the_heat_map_by_node_shows_the_stalled_ranks_node_and_drills_down_to_its_ranks():
    series = run()
    stalled = stepping(SLOW, 1.0, random.Random(1), points=10)  # stopped after 10 s; the others went on 40 s
    series[SLOW] = stalled
    c = chart.build("heat", series, "r", 100, 30, hosts=HOSTS, quiet=5.0)
    assert "per node (its slowest rank)" in c.title and c.heat.who == "node"
    [row] = [i for i, lb in enumerate(c.heat.labels) if holds(lb, 384)]
    assert 0.0 in c.heat.cells[row][-5:]  # the stall shows on its node's row
    assert all(0.0 not in cells[-5:] for i, cells in enumerate(c.heat.cells) if i != row)
    node = [s for s in series if HOSTS[s.rank] == "n384"]  # the drill-down: that node's own ranks
    one = chart.build("heat", node, "r", 100, 30, hosts=HOSTS, quiet=5.0)
    assert one.heat.labels == tuple(str(r) for r in range(3072, 3080)) and one.heat.who == "rank"
    assert 0.0 in one.heat.cells[1][-5:] and 0.0 not in one.heat.cells[0][-5:]
