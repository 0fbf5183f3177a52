"""`cockpit diagnose RUN --fix [--apply]`: the diagnosis's configuration fixes as a diff of the run's job file,
each with its finding, evidence line and reason; ``--apply`` writes the changed file next to the original
(never over a file) and says how to run it. Nothing is applied silently: ``--fix`` only prints.

Exit codes: 0 a fix was printed (and written), 1 no finding has a configuration fix or the edit cannot be made
safely (the change is printed in words), 2 bad input."""

from __future__ import annotations

import shlex

from cockpit.insight.fixes import FixError, plan, write_fixed
from cockpit.run.handle import Run


def cmd_fix(run: Run, report, apply: bool, input_error: type[Exception]) -> int:
    try:
        p = plan(run, report)
    except FixError as exc:
        raise input_error(str(exc)) from None
    if not p.proposals:
        print(p.verdict)
        return 1
    print(p.describe())
    if p.new_text is None:
        print(p.problem or "No change to the job file: the steps above are by hand.")
        return 1
    print(p.diff(), end="")
    if not apply:
        print(f"\n(not written: cockpit diagnose {shlex.quote(run.dir.name)} --fix --apply writes it next to "
              f"{p.job_path.name})")
        return 0
    try:
        path = write_fixed(p)
    except OSError as exc:
        raise input_error(f"{p.job_path.parent}: cannot write the fixed job file ({exc})") from None
    print(f"\nwrote {path} (0600; {p.job_path.name} is unchanged)\nrun it: cockpit run {shlex.quote(str(path))}")
    return 0

