"""The mutation check: does the suite fail when cockpit's core decisions break? (Not collected by pytest, not
run in CI: a few minutes to half an hour, like the benchmarks.)

    python tests/bench/mutate.py                 # every mutant, its tests, a report
    python tests/bench/mutate.py --list          # the mutants and the patch each one is
    python tests/bench/mutate.py straggler-highest-rank reconcile-partial-exits   # some of them
    python tests/bench/mutate.py --root /path/to/other/checkout --json out.json    # another checkout's tests

Each mutant is a plausible bug in one of the core decisions (culprit/victim, straggler, first failure,
reconcile, the stall clock, the preflight verdicts, the compose launch, the fallback probe's watch loop), written
as a concrete patch: one exact piece of cockpit/ source and what replaces it. For each mutant the script
copies the checkout (tracked and untracked-but-not-ignored files) to a scratch directory once, puts the
patch in, runs only the tests named for that mutant (``python -m pytest TESTS``, the copy first on
PYTHONPATH), reads which tests failed from pytest's JUnit XML, and takes the patch out again. Outcomes:

    killed     at least one test failed (named; each killer is rerun on the unpatched copy to show it passes
               there, so a flaky or already-broken test is not counted as a killer)
    hung       the run went past --budget seconds: the suite would hang instead of failing
    survived   every test passed with the bug in
    stale      the piece of source to replace is no longer there exactly once: update the mutant

Exit status: 0 when every mutant was killed, 1 otherwise (survived, hung or stale). tests/test_mutants.py (in
the suite) checks only that each patch still applies, so a refactor that moves the code is noticed at once.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Mutant:
    name: str
    bug: str  # what a user would lose
    path: str  # relative to the checkout
    old: str  # exact text, present exactly once
    new: str
    tests: tuple[str, ...]  # pytest arguments: the tests that should catch it
    extra: tuple[str, ...] = field(default=())  # more pytest arguments (-k ...)


MUTANTS: tuple[Mutant, ...] = (
    Mutant("compose-launches-file-on-disk",
           "the TUI launches the job file it opened instead of the edited form (edits lost)",
           "cockpit/tui/models/launching.py",
           "    path = job_file_for(text, spec, opened, base_dir, runs_dir)\n",
           "    path = opened or job_file_for(text, spec, opened, base_dir, runs_dir)\n",
           ("tests/tui/test_compose_launch.py", "tests/tui/test_launch_e2e.py", "tests/tui/test_compose_screen.py",
            "tests/tui/test_models.py", "tests/tui/test_tmux.py")),
    Mutant("straggler-highest-rank",
           "the straggler named is the highest rank number, not the rank that waits least",
           "cockpit/hang/straggler.py",
           "        slow = min(shares, key=lambda r: (shares[r], r))\n",
           "        slow = max(shares)\n",
           ("tests/hang", "tests/tui/test_hang_view.py")),
    Mutant("culprit-ignores-flight-recorder",
           "a rank inside a collective is called a victim even when the Flight Recorder shows it behind the others",
           "cockpit/hang/finding.py",
           "    if op is not None and not (top is not None and rank in seqs and seqs[rank] < top and op not in "
           "WAITS_AT_START):\n",
           "    if op is not None:\n",
           ("tests/hang", "tests/tui/test_hang_view.py")),
    Mutant("stall-clock-ignores-output",
           "log output no longer counts as progress: a run that prints but writes no metrics is called stalled",
           "cockpit/hang/progress.py",
           "    return grew, n, grew or (s.step is not None and s.step != r.step) or n > r.n\n",
           "    return grew, n, (s.step is not None and s.step != r.step) or n > r.n\n",
           ("tests/hang",)),
    Mutant("stall-clock-half-speed",
           "the stall clock runs at half speed: a hang is named after twice --stall-after",
           "cockpit/hang/progress.py",
           "verdict.quiet >= verdict.threshold\n",
           "verdict.quiet >= 2 * verdict.threshold\n",
           ("tests/hang",)),
    Mutant("stall-clock-no-start-phase",
           "a start longer than stall_after (imports, loading, init_process_group) is called a stall with culprits",
           "cockpit/hang/progress.py",
           "        self.started = self.started or s.step is not None or n > 0 or (grew and not r.hooked)\n",
           "        self.started = True\n",
           ("tests/hang",)),
    Mutant("culprit-waiting-in-init",
           "a rank waiting in init_process_group for the others is named a culprit with the one that never came",
           "cockpit/hang/stacks.py",
           "            if \"torch/distributed\" in f.path and f.function in STARTUP_NAMES:\n",
           "            if False:\n",
           ("tests/hang",)),
    Mutant("straggler-window-spans-pauses",
           "after a rank-0 evaluation pause rank 0 is named a straggler, and the first figure said is inflated",
           "cockpit/hang/straggler.py",
           "        start = now - self.window if cut is None else max(now - self.window, cut)\n",
           "        start = now - self.window\n",
           ("tests/hang",)),
    Mutant("diagnose-first-failure-latest",
           "`cockpit diagnose` names the rank whose error has the latest timestamp as the first failure",
           "cockpit/logs/diagnose/cause.py",
           "        first = min(timed, key=lambda loc: loc[1].ts or 0.0)\n",
           "        first = max(timed, key=lambda loc: loc[1].ts or 0.0)\n",
           ("tests/logs",)),
    Mutant("status-first-failure-latest",
           "status.json's first_failure is the rank that exited last",
           "cockpit/run/store.py",
           "    failed = sorted((e for e in exits.values() if e.status != 0), key=lambda e: (e.time, e.rank))\n",
           "    failed = sorted((e for e in exits.values() if e.status != 0), key=lambda e: (-e.time, e.rank))\n",
           ("tests/test_run_records.py", "tests/test_runs_status.py")),
    Mutant("reconcile-partial-exits",
           "a run whose supervisor died with some ranks' exit records missing reads `succeeded`, not `lost`",
           "cockpit/launch/supervision.py",
           "    complete = status.world_size is not None and len(exits) >= status.world_size\n",
           "    complete = bool(exits)\n",
           ("tests/test_reconcile.py", "tests/test_runs_status.py", "tests/test_run_records.py",
            "tests/test_sweep_rerun.py")),
    Mutant("probe-watch-runs-once",
           "the fallback probe's watch form (no cockpit on the node) reports once and exits",
           "cockpit/node/probe.py",
           "    return once if watch is None else f\"while :; do {once}; sleep {watch:g}; done\"\n",
           "    return once\n",
           ("tests/fleet/test_probe.py",)),
    Mutant("preflight-port-never-busy",
           "`cockpit doctor` and `cockpit run` no longer see that the job's fixed master port is taken",
           "cockpit/preflight/local.py",
           "    free = dict(node.ports or ()).get(str(facts.port)) if facts.port is not None else None\n",
           "    free = dict(node.ports or ()).get(facts.port) if facts.port is not None else None\n",
           ("tests/test_preflight_local.py",)),
    Mutant("preflight-gloo-name-partly-missing",
           "GLOO_SOCKET_IFNAME naming one interface that exists and one that does not passes preflight",
           "cockpit/preflight/checks.py",
           "        elif missing or not chosen:\n",
           "        elif not chosen:\n",
           ("tests/test_preflight_ifnames.py", "tests/fleet/test_preflight_fleet.py", "tests/test_preflight_local.py")),
)


def by_name(names: list[str]) -> list[Mutant]:
    known = {m.name: m for m in MUTANTS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"mutate: no mutant named {', '.join(unknown)} (--list shows them)")
    return [known[n] for n in names] if names else list(MUTANTS)


def applies(m: Mutant, root: Path) -> str | None:
    """None when the patch applies to ``root``'s source, else why not."""
    path = root / m.path
    if not path.is_file():
        return f"{m.path} does not exist"
    count = path.read_text().count(m.old)
    return None if count == 1 else f"{m.path} holds the text to replace {count} times, not once"


def patch_text(m: Mutant) -> str:
    old = "".join(f"-{line}\n" for line in m.old.rstrip("\n").split("\n"))
    new = "".join(f"+{line}\n" for line in m.new.rstrip("\n").split("\n"))
    return f"--- a/{m.path}\n+++ b/{m.path}\n{old}{new}"


def copy_checkout(root: Path, into: Path) -> None:
    """The files git would show in ``root``'s work tree (tracked, and untracked but not ignored)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = root / rel
        if src.is_file() and not src.is_symlink():
            (into / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, into / rel)


def has_timeout_config(root: Path) -> bool:
    text = (root / "pyproject.toml").read_text()
    return "\ntimeout =" in text


def run_pytest(copy: Path, args: list[str], budget: float, report: Path) -> tuple[str, float, list[str]]:
    """("passed" | "failed" | "hung", seconds, failed test ids)."""
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("COCKPIT_UPDATE_GOLDEN", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *args]
    if not has_timeout_config(copy):  # an older checkout: a hang still ends, as a timeout
        cmd.insert(4, "--timeout=300")
    start = time.monotonic()
    report.unlink(missing_ok=True)
    proc = subprocess.Popen(cmd, cwd=copy, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        code = proc.wait(timeout=budget)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
        return "hung", time.monotonic() - start, []
    took = time.monotonic() - start
    failed, timeouts = failures(report)
    if code == 0:
        return "passed", took, []
    if failed and len(timeouts) == len(failed):
        return "hung", took, failed
    return "failed", took, failed


def failures(report: Path) -> tuple[list[str], list[str]]:
    """Failed test ids from a JUnit XML report, and those among them that failed by timing out."""
    if not report.exists():
        return [], []
    failed, timeouts = [], []
    for case in ET.parse(report).getroot().iter("testcase"):
        bad = [c for c in case if c.tag in ("failure", "error")]
        if not bad:
            continue
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        failed.append(name)
        if any("Timeout" in (c.get("message") or "") for c in bad):
            timeouts.append(name)
    return failed, timeouts


def node_id(junit_name: str, copy: Path) -> str:
    """'tests.hang.test_verdicts::test_x[1]' -> 'tests/hang/test_verdicts.py::test_x[1]'."""
    classname, _, test = junit_name.partition("::")
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):  # a class inside the module takes the last parts
        path = Path(*parts[:cut]).with_suffix(".py")
        if (copy / path).is_file():
            return "::".join([str(path), *parts[cut:], test])
    return junit_name


@contextlib.contextmanager
def held(lock: Path | None):
    """``lock`` held (flock, as `flock FILE cmd` takes it) while one mutant's tests run; nothing when None."""
    if lock is None:
        yield
        return
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def check(m: Mutant, copy: Path, budget: float, confirm: int) -> dict:
    why = applies(m, copy)
    if why is not None:
        return {"name": m.name, "outcome": "stale", "why": why, "killers": [], "seconds": 0.0}
    target = copy / m.path
    original = target.read_text()
    report = copy / ".mutate-report.xml"
    try:
        target.write_text(original.replace(m.old, m.new))
        state, took, failed = run_pytest(copy, [*m.tests, *m.extra], budget, report)
    finally:
        target.write_text(original)
    out = {"name": m.name, "bug": m.bug, "seconds": round(took, 1), "killers": [], "flaky": []}
    if state == "passed":
        return {**out, "outcome": "survived"}
    ids = [node_id(f, copy) for f in failed]
    if ids and confirm:  # each killer passes without the bug, or it is not a killer
        sample = ids[:confirm]
        again, _, still = run_pytest(copy, sample, budget, report)
        still_ids = {node_id(f, copy) for f in still}
        out["flaky"] = [i for i in sample if i in still_ids]
        ids = [i for i in ids if i not in still_ids]
    if state == "hung":
        return {**out, "outcome": "hung", "killers": ids}
    return {**out, "outcome": "killed" if ids else "survived", "killers": ids}


def show(results: list[dict]) -> str:
    lines = []
    for r in results:
        head = f"{r['outcome']:<9} {r['name']:<38} {r['seconds']:>7.1f} s"
        if r["outcome"] == "stale":
            head += f"  ({r['why']})"
        lines.append(head)
        for k in r["killers"][:6]:
            lines.append(f"            killed by {k}")
        if len(r["killers"]) > 6:
            lines.append(f"            ... and {len(r['killers']) - 6} more")
        for k in r.get("flaky", []):
            lines.append(f"            (also failed without the bug, not counted: {k})")
    counts = {o: sum(r["outcome"] == o for r in results) for o in ("killed", "survived", "hung", "stale")}
    lines.append(", ".join(f"{n} {o}" for o, n in counts.items()) + f" of {len(results)} mutants")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", help="mutants to check (default: all)")
    p.add_argument("--root", type=Path, default=REPO, help="the checkout whose source and tests are checked")
    p.add_argument("--list", action="store_true", help="print the mutants and their patches, run nothing")
    p.add_argument("--budget", type=float, default=1800.0, help="seconds one mutant's test run may take")
    p.add_argument("--confirm", type=int, default=5, help="killers rerun without the bug (0: none)")
    p.add_argument("--json", type=Path, help="also write the results here")
    p.add_argument("--lock", type=Path, help="a lock file held while each mutant's tests run (the machine's "
                   "heavy-test lock, e.g. /tmp/cockpit-heavy.lock, when others share it)")
    args = p.parse_args(argv)
    mutants = by_name(args.names)
    root = args.root.resolve()
    if args.list:
        for m in mutants:
            state = applies(m, root) or "applies"
            print(f"{m.name}: {m.bug}\n  tests: {' '.join(m.tests + m.extra)}\n  {state}\n{patch_text(m)}")
        return 0
    results = []
    with tempfile.TemporaryDirectory(prefix="cockpit-mutate-") as tmp:
        copy = Path(tmp) / "checkout"
        copy_checkout(root, copy)
        print(f"mutate: {len(mutants)} mutants over a copy of {root}", flush=True)
        for m in mutants:
            with held(args.lock):
                results.append(check(m, copy, args.budget, args.confirm))
            print(show(results[-1:]).rsplit("\n", 1)[0], flush=True)
    print("\n" + show(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if all(r["outcome"] == "killed" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
