"""Score the log parser on a corpus folder: the check of tests/logs/test_corpus.py, file by file, as a number.

    python tests/logs/score_corpus.py tests/fixtures/nccl [--json]

Reads every ``labels*.json`` in the folder (merged; a file labelled twice keeps the last label read, in name
order) and diagnoses the labelled ``.log`` files in one run, as `cockpit diagnose --json` would. A file is right
when all of test_corpus's checks hold: the NCCL version exactly; every labelled network and none beyond
``networks_also_ok``; every labelled kind (or an ``also_ok_map`` alternative) and nothing outside kinds +
also_ok + ``_optional``; the Init COMPLETE ranks exactly. Prints the score (files right / files labelled),
the misses per kind (missed: labelled, not found; extra: found, not allowed) and each failing file with why.
Exits 0 (a score is no verdict); 2 where the folder has no labels. Not collected by pytest (no ``test_`` name).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from anywhere: this checkout's cockpit

from cockpit.logs.report import diagnose_paths, report_to_dict  # noqa: E402

_NAMED_RANK = re.compile(r"\brank (\d+)\b")


def first_failure_rank(findings: list[dict]) -> int | None:
    """The rank the first-failure finding names first (None: no such finding, or it names no single rank)."""
    first = next((f for f in findings if f["code"] == "first_failure"), None)
    named = _NAMED_RANK.search(first["title"]) if first else None
    return int(named[1]) if named else None


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
    if "first_failure_rank" in label and got.get("first_failure_rank") != label["first_failure_rank"]:
        reasons.append(f"first_failure_rank {got.get('first_failure_rank')} != {label['first_failure_rank']}")
    return reasons, missed, extra


def score(folder: Path) -> dict:
    """The score of one corpus folder as a dict (what --json prints)."""
    labels = load_labels(folder)
    present = {name: label for name, label in labels.items() if (folder / name).is_file()}
    files = report_to_dict(diagnose_paths([folder / name for name in sorted(present)]))["files"] if present else []
    got = {Path(f["path"]).name: f for f in files}
    for name in present:  # the first failure of the file alone (in one report, files would name each other's)
        alone = report_to_dict(diagnose_paths([folder / name]))["findings"]
        got[name]["first_failure_rank"] = first_failure_rank(alone)
    failing, missed, extra = {}, Counter(), Counter()
    for name in sorted(present):
        reasons, m, x = check(present[name], got[name])
        missed.update(m)
        extra.update(x)
        if reasons:
            failing[name] = {"reasons": reasons, "kinds": got[name]["kinds"], "labelled": present[name].get("kinds")}
    return {"folder": str(folder), "files": len(present), "right": len(present) - len(failing),
            "score": (len(present) - len(failing)) / len(present) if present else None,
            "missed_by_kind": dict(missed.most_common()), "extra_by_kind": dict(extra.most_common()),
            "unlabelled_missing_logs": sorted(set(labels) - set(present)), "failing": failing}


def render(result: dict) -> str:
    pct = f"{100 * result['score']:.1f}%" if result["score"] is not None else "n/a"
    lines = [f"{result['folder']}: {result['right']}/{result['files']} files right ({pct})"]
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
