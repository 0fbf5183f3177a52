"""deadlink (issue 31): NCCL RAS reports, text and JSON, on the recorded fixtures (tests/fixtures/deadlink/ras)."""

from __future__ import annotations

import pytest
from helpers import REPO

from cockpit.hang.ras import parse_ras_json, parse_ras_text
from cockpit.hang.transport_parse import TransportParseError

RAS = REPO / "tests" / "fixtures" / "deadlink" / "ras"


@pytest.mark.parametrize("name", sorted(p.name for p in RAS.iterdir() if p.suffix in (".txt", ".json")))
def test_deadlink_every_ras_fixture_parses(name):
    text = (RAS / name).read_text()
    report = parse_ras_json(text) if name.endswith(".json") else parse_ras_text(text)
    assert report.repaired == name.endswith("INVALID-json.json")


def test_deadlink_ras_running_ok_while_pytorch_timed_out():
    r = parse_ras_text((RAS / "nccl1730-2.26.2-256ranks-running-ok.txt").read_text())
    assert r.ok and r.version == "2.26.2" and r.comm_states == (("group 0", "RUNNING OK"),)


def test_deadlink_ras_recorded_on_an_h100_reads_healthy_in_both_formats():
    """Recorded on a lent H100 (tests/gpu/record_ras.py, NCCL 2.28.9): the text and the JSON of one job agree."""
    text = parse_ras_text((RAS / "h100-2.28.9-1rank-healthy.txt").read_text())
    json_ = parse_ras_json((RAS / "h100-2.28.9-1rank-healthy.json").read_text())
    assert text.ok and json_.ok and text.version == json_.version == "2.28.9"
    assert (text.processes, json_.processes, text.repaired, json_.repaired) == ((), (), False, False)


def test_deadlink_ras_names_missing_and_dead_processes():
    r = parse_ras_text((RAS / "example-2.30.7-exit-incomplete.txt").read_text())
    assert not r.ok and (r.processes[-1].rank, r.processes[-1].pid, r.processes[-1].host) == (7, 3748990, "node1")
    r = parse_ras_text((RAS / "docs-errors-dead.txt").read_text())
    assert [(p.state, p.pid, p.host) for p in r.processes] == [("DEAD", 3487984, "172.16.64.213")]
    r = parse_ras_text((RAS / "example-2.30.7-sleep-straggler-mismatch.txt").read_text())
    assert [(p.state, p.rank) for p in r.processes] == [("MISMATCH", 7)]


def test_deadlink_ras_json_2_28_missing_comma_is_repaired():
    r = parse_ras_json((RAS / "ray-2.28.9-unresponsive-rank-INVALID-json.json").read_text())
    assert r.repaired and [(p.state, p.rank, p.pid) for p in r.processes] == [("unresponsive", 1, 10017)]
    r = parse_ras_json((RAS / "ray-a10g-2.28.9-4nodes-mismatch.json").read_text())
    assert [(p.state, p.rank) for p in r.processes] == [("MISMATCH", 1)]  # AllReduce 100, the others 101


@pytest.mark.parametrize("bad", ["{", "[1, 2]", '{"communicators": 3}', "not json at all"])
def test_deadlink_bad_ras_json_is_a_clear_error(bad):
    with pytest.raises(TransportParseError) as e:
        parse_ras_json(bad, "node1 ncclras")
    assert str(e.value).startswith("node1 ncclras:")


def test_deadlink_text_that_is_not_a_ras_report_is_refused():
    with pytest.raises(TransportParseError):
        parse_ras_text((RAS / "nccl1730-pytorch-watchdog-same-job.log").read_text())
