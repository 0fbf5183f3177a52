"""Fix-and-relaunch for a run: its diagnosis's proposals (cockpit.insight.proposals) made into a new job file.

Which job file: the one the run was started from, where it still is; else the run's own copy
(<run>/job.yaml), and the plan says which. The facts the proposals need are read here: a local run's
interfaces are this machine's. The new text is validated with the spec loader before anyone sees it, and
written next to the job file as ``<job>.fixed.yaml`` (``<job>-fix-2.yaml`` … where that exists: never
overwritten), 0600.
One place, so `cockpit diagnose --fix/--apply` and the TUI's review say and write the same."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path

from cockpit.insight.proposals import FixContext, Proposal, no_fix, proposals
from cockpit.run import layout
from cockpit.run.handle import Run
from cockpit.spec import jobedit, jobfile, yamlpos
from cockpit.spec.model import SpecError, parse_spec


@dataclass(frozen=True)
class FixPlan:
    """What a fix would do to a run's job file. ``new_text`` None: nothing to write (``problem`` says why
    when there were changes that could not be made)."""

    job_path: Path
    which: str
    """"the job file the run started from" or "the run's copy (the original is gone)"."""
    old_text: str
    new_text: str | None
    proposals: tuple[Proposal, ...] = ()
    problem: str = ""
    changes: tuple[jobedit.Change, ...] = field(default=())
    verdict: str = ""
    """Why there is nothing to propose, where the diagnosis says ("no configuration fix: the cause is in the
    code (rank 1 raised ...)"); else the general "No finding has a configuration fix"."""

    def describe(self) -> str:
        """Each proposal: the finding's title, its evidence line, the reason, the changes and the manual steps;
        then which job file."""
        lines = []
        for prop in self.proposals:
            f = prop.finding
            lines.append(f"{f.severity.upper()}  {f.title}")
            if f.evidence:
                lines.append(f"  evidence: {f.evidence[0][0]}:{f.evidence[0][1]}")
            lines.append(f"  why: {prop.reason}")
            lines += [f"  change: {c.words()}" for c in prop.changes]
            lines += [f"  by hand: {m}" for m in prop.manual]
            lines.append("")
        lines.append(f"job file: {self.job_path} ({self.which})")
        return "\n".join(lines)

    def diff(self) -> str:
        if self.new_text is None:
            return ""
        return "".join(difflib.unified_diff(self.old_text.splitlines(keepends=True),
                                            self.new_text.splitlines(keepends=True), str(self.job_path),
                                            str(fixed_path(self.job_path))))


NO_FINDING_HAS_A_FIX = "No finding has a configuration fix: nothing to change in the job file."


class FixError(Exception):
    """The run has no readable job file; the message says where it looked."""


def job_source(run: Run) -> tuple[Path, str]:
    """The job file to fix and which one it is."""
    status, run_dir = run.status, run.dir
    original = Path(status.job_file) if status is not None and status.job_file else None
    if original is not None and original.is_file():
        return original, "the job file the run started from"
    copy = run_dir / layout.JOB
    if copy.is_file():
        return copy, "the run's copy (the job file it started from is gone)"
    raise FixError(f"{run_dir}: no job file (looked for {original or 'the original'} and {copy}; "
                   "hint: the run directory may be incomplete)")


def local_facts(run: Run) -> FixContext:
    """The launcher's own job sections and the hosts from status.json; interfaces for a run whose ranks ran
    on this machine (one host)."""
    from cockpit.fleet.records import Interface
    from cockpit.launch import registry

    status = run.status
    if status is None:
        return FixContext()
    launcher = registry.known_for_run(status)
    hosts = tuple(status.hosts)
    interfaces = {}
    if launcher is not None and launcher.runs_here and len(hosts) == 1:
        from cockpit.node.ifaces import interfaces as read_interfaces

        interfaces = {hosts[0]: [Interface.from_dict(i) for i in read_interfaces() or ()]}
    return FixContext(launcher.job_sections if launcher else frozenset(), hosts, interfaces)


def plan(run: Run, report, facts: FixContext | None = None) -> FixPlan:
    """The proposals for ``report`` (the run's diagnosis) and the job file they make, from the status.json
    ``run`` was read with. Raises FixError."""
    path, which = job_source(run)
    try:
        text = jobfile.read_text(path)
        data, _ = yamlpos.load(text)
    except (OSError, yamlpos.LoadError) as exc:
        raise FixError(f"{path}: cannot read the job file ({exc})") from None
    found = tuple(proposals(report, data if isinstance(data, dict) else {}, facts or local_facts(run)))
    changes = tuple(c for p in found for c in p.changes)
    if not changes:
        why = no_fix(report) or ("" if found else NO_FINDING_HAS_A_FIX)
        return FixPlan(path, which, text, None, found, verdict=why)
    try:
        new = jobedit.apply(text, changes)
        parse_spec(new, str(path))
    except jobedit.EditError as exc:
        return FixPlan(path, which, text, None, found, f"cannot edit the job file safely: {exc}", changes)
    except SpecError as exc:
        return FixPlan(path, which, text, None, found, "the changed job file would not validate: "
                    + "; ".join(exc.lines()), changes)
    return FixPlan(path, which, text, new, found, "", changes)


def fixed_path(job: Path) -> Path:
    """``job.fixed.yaml`` next to ``job.yaml``, or the first free ``job-fix-N.yaml`` (N from 2)."""
    stem = job.name.removesuffix(".yaml").removesuffix(".yml")
    first = job.with_name(f"{stem}.fixed.yaml")
    if not first.exists():
        return first
    n = 2
    while job.with_name(f"{stem}-fix-{n}.yaml").exists():
        n += 1
    return job.with_name(f"{stem}-fix-{n}.yaml")


def write_fixed(p: FixPlan) -> Path:
    """Write the plan's new text next to its job file, 0600, never over an existing file. Raises OSError."""
    assert p.new_text is not None
    for _ in range(100):  # another writer may take the name between the look and the open
        path = fixed_path(p.job_path)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(p.new_text)
        return path
    raise FileExistsError(f"{p.job_path.parent}: no free name for the fixed job file")
