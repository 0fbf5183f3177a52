"""Score the log parser on a corpus folder: the check of tests/logs/test_corpus.py, file by file, as a number.

    python tests/logs/score_corpus.py tests/fixtures/nccl [--json]

Reads every ``labels*.json`` in the folder (merged; a file labelled twice keeps the last label read, in name
order) and diagnoses the labelled ``.log`` files in one run, as `cockpit diagnose --json` would. A file is right
when all of test_corpus's checks hold: the NCCL version exactly; every labelled network and none beyond
``networks_also_ok``; every labelled kind (or an ``also_ok_map`` alternative) and nothing outside kinds +
also_ok + ``_optional``; the Init COMPLETE ranks exactly. Two optional label fields (tests/fixtures/nccl3/
README.md) are checked against a diagnosis of that file alone (a corpus folder's files are not one job):
``failed`` against whether the report has an error finding (what makes `cockpit diagnose FILE` exit 1),
``first_failure_rank`` against the rank of the report's ``first_failure`` finding (none when there is no such
finding or it names no rank). A label without them is scored as before. Prints the score (files right / files
labelled; with new fields, also the score on the original checks alone), the misses per kind (missed: labelled,
not found; extra: found, not allowed), the ``failed`` / ``first_failure_rank`` disagreements and each failing file
with why. Exits 0 (a score is no verdict); 2 where the folder has no labels. Not collected by pytest (no ``test_``
name).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from anywhere: this checkout's cockpit

from cockpit.logs.diagnose.report import diagnose_paths, report_to_dict  # noqa: E402


def load_labels(folder: Path) -> dict[str, dict]:
    """Every labels*.json in ``folder``, merged by file name."""
    labels: dict[str, dict] = {}
    for path in sorted(folder.glob("labels*.json")):
        for entry in json.loads(path.read_text()):
            labels[entry["file"]] = entry
    return labels


def check(label: dict, got: dict) -> tuple[list[str], list[str], list[str]]:
    """(reasons, missed kinds, extra kinds) of one file; no reasons: the file is right."""
    reasons: list[str] = []
    if got["nccl_version"] != label.get("nccl_version"):
        reasons.append(f"nccl_version {got['nccl_version']!r} != {label.get('nccl_version')!r}")
    networks, want = set(got["networks"]), set(label.get("networks", []))
    if not want <= networks:
        reasons.append(f"networks missing {sorted(want - networks)}")
    extra_nets = networks - want - set(label.get("networks_also_ok", []))
    if extra_nets:
        reasons.append(f"networks unexpected {sorted(extra_nets)}")
    kinds, alternatives = set(got["kinds"]), label.get("also_ok_map", {})
    missed = [k for k in label.get("kinds", []) if k not in kinds and not kinds & set(alternatives.get(k, []))]
    allowed = set(label.get("kinds", [])) | set(label.get("also_ok", [])) | set(alternatives.get("_optional", []))
    extra = sorted(kinds - allowed)
    if missed:
        reasons.append(f"kinds missed {missed}")
    if extra:
        reasons.append(f"kinds unexpected {extra}")
    if got["init_complete_ranks"] != label.get("init_complete_ranks", []):
        reasons.append(f"init_complete_ranks {got['init_complete_ranks']} != {label.get('init_complete_ranks')}")
    return reasons, missed, extra


NEW_FIELDS = ("failed", "first_failure_rank")
_RANK = re.compile(r"\brank (\d+)\b")


def first_failure_rank(report: dict) -> int | None:
    """The rank the report's ``first_failure`` finding names: its ``rank`` field where the JSON has one, else the
    first "rank N" of its title after the "First failure (...):" head; None without such a finding or rank."""
    finding = next((f for f in report["findings"] if f["code"] == "first_failure"), None)
    if finding is None:
        return None
    if isinstance(finding.get("rank"), int):
        return finding["rank"]
    match = _RANK.search(finding["title"].split("):", 1)[-1])
    return int(match[1]) if match else None


def alone_facts(path: Path) -> dict:
    """What the new fields are checked against: the diagnosis of ``path`` as the only file."""
    report = report_to_dict(diagnose_paths([path]))
    return {"failed": any(f["severity"] == "error" for f in report["findings"]),
            "first_failure_rank": first_failure_rank(report)}


def check_new(label: dict, alone: dict) -> list[str]:
    """Reasons a file is wrong on the labelled new fields (none where the label has none)."""
    return [f"{field} {alone[field]!r} != {label[field]!r}" for field in NEW_FIELDS
            if field in label and alone[field] != label[field]]


def score(folder: Path) -> dict:
    """The score of one corpus folder as a dict (what --json prints)."""
    labels = load_labels(folder)
    present = {name: label for name, label in labels.items() if (folder / name).is_file()}
    files = report_to_dict(diagnose_paths([folder / name for name in sorted(present)]))["files"] if present else []
    got = {Path(f["path"]).name: f for f in files}
    failing, missed, extra, new_wrong, base_wrong = {}, Counter(), Counter(), Counter(), 0
    for name in sorted(present):
        reasons, m, x = check(present[name], got[name])
        missed.update(m)
        extra.update(x)
        base_wrong += bool(reasons)
        if any(field in present[name] for field in NEW_FIELDS):
            new_reasons = check_new(present[name], alone_facts(folder / name))
            new_wrong.update(r.split(" ", 1)[0] for r in new_reasons)
            reasons += new_reasons
        if reasons:
            failing[name] = {"reasons": reasons, "kinds": got[name]["kinds"], "labelled": present[name].get("kinds")}
    result = {"folder": str(folder), "files": len(present), "right": len(present) - len(failing),
              "score": (len(present) - len(failing)) / len(present) if present else None,
              "missed_by_kind": dict(missed.most_common()), "extra_by_kind": dict(extra.most_common()),
              "unlabelled_missing_logs": sorted(set(labels) - set(present)), "failing": failing}
    if any(field in label for label in present.values() for field in NEW_FIELDS):
        result["right_original_checks"] = len(present) - base_wrong
        result["wrong_by_new_field"] = {field: new_wrong[field] for field in NEW_FIELDS}
    return result


def render(result: dict) -> str:
    pct = f"{100 * result['score']:.1f}%" if result["score"] is not None else "n/a"
    lines = [f"{result['folder']}: {result['right']}/{result['files']} files right ({pct})"]
    if "right_original_checks" in result:
        base = result["right_original_checks"]
        lines.append(f"original checks alone (version, networks, kinds, init ranks): {base}/{result['files']} right "
                     f"({100 * base / result['files']:.1f}%); wrong on " + ", ".join(
                         f"{field} x{n}" for field, n in result["wrong_by_new_field"].items()))
    for title, key in (("missed (labelled, not found)", "missed_by_kind"), ("extra (found, not allowed)",
                                                                            "extra_by_kind")):
        if result[key]:
            lines.append(f"{title}: " + ", ".join(f"{k} x{n}" for k, n in result[key].items()))
    if result["unlabelled_missing_logs"]:
        lines.append("labelled but no log: " + ", ".join(result["unlabelled_missing_logs"]))
    for name, why in result["failing"].items():
        lines.append(f"FAIL {name}: " + "; ".join(why["reasons"]) + f" (kinds found: {why['kinds']})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="corpus folder(s) with labels*.json and .log files")
    parser.add_argument("--json", action="store_true", help="one JSON object per folder, in a list")
    args = parser.parse_args(argv)
    results = []
    for folder in args.folders:
        if not any(folder.glob("labels*.json")):
            print(f"score_corpus: no labels*.json in {folder} (hint: the folder of a labelled corpus, e.g. "
                  "tests/fixtures/nccl)", file=sys.stderr)
            return 2
        results.append(score(folder))
    print(json.dumps(results, indent=2) if args.json else "\n\n".join(render(r) for r in results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
