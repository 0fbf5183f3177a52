"""The Flight Recorder decides culprit and victim when stacks alone cannot: a rank that sits inside a collective
but never enqueued the one the others wait in (stuck in a collective of another group, say) is the culprit,
not one more victim, whichever rank number it has; the collective named is the one it never enqueued."""

from __future__ import annotations

import pytest

from cockpit.hang.evidence import Evidence
from cockpit.hang.finding import hang_finding
from cockpit.hang.stacks import FlightRecord
from cockpit.run.progress import RankProgress as P

WORLD = 3


@pytest.mark.parametrize("behind", range(WORLD))
def test_a_rank_behind_in_the_flight_recorder_is_the_culprit_even_inside_a_collective(behind):
    progress, evidence = {}, {}
    for rank in range(WORLD):
        op = "barrier" if rank == behind else "all_reduce"  # the one behind waits in a subgroup's barrier
        progress[rank] = P("a", "running", collective=op, in_since=10.0)
        seq = 6 if rank == behind else 7
        evidence[rank] = Evidence(rank, "a", "", FlightRecord(seq, 6, "gloo:all_reduce"), {"in": op, "since": 10.0})
    f = hang_finding("stall", 30, progress, evidence, now=40.0)
    assert [c["rank"] for c in f["culprits"]] == [behind]
    assert sorted(v["rank"] for v in f["victims"]) == [r for r in range(WORLD) if r != behind]
    assert not f["mismatch"] and f["collective"]["seq"] == 7
    assert f"rank {behind} (a)" in f["text"]
