"""Every real log excerpt in tests/fixtures/nccl against its labels (semantics: tests/fixtures/nccl/README.md).

Per file: the NCCL version exactly; networks: every labelled one and nothing beyond networks_also_ok;
kinds: every labelled kind (or an also_ok_map alternative) and nothing outside kinds + also_ok + _optional;
the Init COMPLETE ranks exactly. Values are read from the `cockpit diagnose --json` object, so the test
covers the whole pipeline: read, parse, summarise, serialise.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cockpit.logs.report import diagnose_paths, report_to_dict

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "nccl"
LABELS = {entry["file"]: entry for entry in json.loads((CORPUS / "labels.json").read_text())}


def test_every_log_is_labelled_and_every_label_has_a_log():
    assert sorted(LABELS) == sorted(p.name for p in CORPUS.glob("*.log"))
    assert len(LABELS) >= 79


@pytest.fixture(scope="module")
def reports() -> dict[str, dict]:
    """One diagnose run over the whole corpus: each file's JSON entry by file name."""
    paths = [CORPUS / name for name in sorted(LABELS)]
    files = report_to_dict(diagnose_paths(paths))["files"]
    return {Path(f["path"]).name: f for f in files}


@pytest.mark.parametrize("name", sorted(LABELS))
def test_matches_labels(name: str, reports: dict[str, dict]):
    label, got = LABELS[name], reports[name]

    assert got["nccl_version"] == label["nccl_version"]

    networks = set(got["networks"])
    assert set(label["networks"]) <= networks
    assert networks <= set(label["networks"]) | set(label["networks_also_ok"])

    kinds = set(got["kinds"])
    alternatives = label["also_ok_map"]
    for kind in label["kinds"]:
        assert kind in kinds or kinds & set(alternatives.get(kind, [])), f"{kind} not found"
    allowed = set(label["kinds"]) | set(label["also_ok"]) | set(alternatives.get("_optional", []))
    assert kinds <= allowed, f"unexpected kinds {sorted(kinds - allowed)}"

    assert got["init_complete_ranks"] == label["init_complete_ranks"]


@pytest.mark.parametrize("name", sorted(LABELS))
def test_failure_events_point_at_real_lines(name: str, reports: dict[str, dict]):
    """Each event's line number is a line of the file, and that line holds the start of the event's text."""
    lines = (CORPUS / name).read_bytes().decode("utf-8", "replace").split("\n")
    for event in reports[name]["events"]:
        assert 1 <= event["line"] <= len(lines)
        first_words = event["text"].strip()[:20]
        assert first_words in lines[event["line"] - 1], (event["line"], first_words)


def test_clean_logs_report_no_failure():
    clean = [name for name, label in LABELS.items() if not label["kinds"] and not label["also_ok"]]
    assert len(clean) >= 20
    report = report_to_dict(diagnose_paths([CORPUS / name for name in clean]))
    assert [f["kinds"] for f in report["files"]] == [[] for _ in clean]
