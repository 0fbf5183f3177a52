"""Findings -> concrete changes of the job file: what `cockpit diagnose RUN --fix` proposes and the TUI's
fix-and-relaunch review shows.

A finding carries its remedy as data (``Finding.fix``, set by the rules); for findings whose rule sets none,
a few remedies are derived here from the finding and its evidence lines (a gloo interface that does not
exist, NCCL on a local interface, a fixed port in use, CUDA out of memory). A value the rule leaves to the
user (``CHOOSE``) is filled from facts passed in where they decide it (the nodes' interfaces choose
NCCL/GLOO_SOCKET_IFNAME, via ``preflight.ifadvice``), else it stays a manual step in words. Nothing here
applies anything: each ``Proposal`` keeps the finding, its evidence and the reason, and the faces show them.
Pure: the report, the job's values and the facts are arguments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cockpit.fleet.records import Interface
from cockpit.logs.diagnose.model import CHOOSE, Finding, Fix, Report
from cockpit.preflight import ifadvice
from cockpit.spec.jobedit import Change

_GLOO_NO_IFACE = re.compile(r"Unable to find address for:?\s*(\S+)")
_SLURM_KEYS = {"mem": "mem", "time": "time", "partition": "partition", "account": "account", "qos": "qos",
               "cpus-per-task": "cpus_per_task"}
NCCL_EXCLUDE_LOCAL = "^lo,docker"


@dataclass(frozen=True)
class FixContext:
    """What the proposals may depend on beyond the logs: the job-file sections its launcher reads of its own
    (cockpit.launch.protocol ``job_sections``: "slurm", "node_env"), its hosts, and each host's network
    interfaces where they were read (empty: unknown)."""

    sections: frozenset[str] = frozenset()
    hosts: tuple[str, ...] = ()
    interfaces: Mapping[str, Sequence[Interface]] = field(default_factory=dict)


@dataclass(frozen=True)
class Proposal:
    """One finding's remedy as job-file changes, plus the steps no job file holds (in words)."""

    finding: Finding
    changes: tuple[Change, ...]
    manual: tuple[str, ...]
    reason: str


def no_fix(report: Report) -> str | None:
    """Why no configuration change can fix this failure, or None where one may: the job's first root cause
    (``report.cause``) is in the code ("no configuration fix: the cause is in the code (rank 1 raised
    ValueError: bad batch)"). A broken node (leave it out), memory (ask for more) and the scheduler (requeue)
    keep their fixes."""
    cause = report.cause
    if cause is None or cause.remedy != "code":
        return None
    return f"no configuration fix: the cause is in the code ({cause.words})"


def proposals(report: Report, job: Mapping, facts: FixContext) -> list[Proposal]:
    """A proposal for every finding with a configuration remedy, most important first; a change already made
    by an earlier proposal (the same key) is not repeated. None where the first root cause is in the code
    (``no_fix``): a setting changed then only relaunches the same failure."""
    if no_fix(report) is not None:
        return []
    out: list[Proposal] = []
    seen: set[tuple[str, ...]] = set()
    for finding in report.findings:
        # what this run's lines say beats the rule's general fix; the first-failure finding restates another
        own = derived(finding, report, job) if finding.code != "first_failure" else None
        fix = own or finding.fix
        if fix is None:
            continue
        changes, manual = to_changes(fix, job, facts)
        if finding.code == "port_in_use" and isinstance(job.get("master_port"), int):
            changes.append(Change(("master_port",), "auto"))
        changes = [c for c in changes if c.path not in seen and not _already(job, c)]
        seen.update(c.path for c in changes)
        if changes or manual:
            out.append(Proposal(finding, tuple(changes), tuple(manual), fix.note or finding.hint))
    return out


def derived(finding: Finding, report: Report, job: Mapping) -> Fix | None:
    """A remedy where the finding and its lines decide it (used before the rule's own, more general fix)."""
    texts = evidence_texts(finding, report)
    missing = next((m[1] for t in texts if (m := _GLOO_NO_IFACE.search(t))), None)
    if missing is not None:
        return Fix(env=(("GLOO_SOCKET_IFNAME", CHOOSE),),
                   note=f"gloo found no address on interface {missing} "
                        "(that node has no such interface, or it has no address)")
    if finding.code == "local_interface":
        return Fix(env=(("NCCL_SOCKET_IFNAME", CHOOSE),),
                   note="loopback and container bridges do not reach other nodes")
    if finding.code == "port_in_use" and isinstance(job.get("master_port"), int):
        return Fix(note=f"master_port {job['master_port']} is taken; auto picks a free port at each launch")
    if finding.code == "cuda_oom":
        return Fix(env=(("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),),
                   note="expandable segments lower fragmentation; a smaller batch is the other remedy")
    return None


def evidence_texts(finding: Finding, report: Report) -> list[str]:
    """The text of the finding's evidence lines, as parsed."""
    wanted = set(finding.evidence)
    return [e.text for f in report.files for e in f.events if (f.path, e.line) in wanted]


def to_changes(fix: Fix, job: Mapping, facts: FixContext) -> tuple[list[Change], list[str]]:
    """``fix`` as edits of this job, and what cannot be an edit (container options, values to choose)."""
    changes: list[Change] = []
    manual: list[str] = []
    for name, value in fix.env:
        per_host = ifname(name, facts) if value == CHOOSE else {"": value}
        if per_host is None:
            manual.append(f"set {name} to an interface every node has (`ip -br addr` on each node)")
            continue
        for host, val in per_host.items():
            host = host or fix.node_env or ""
            on_node = host and "node_env" in facts.sections and (fix.node_env or len(per_host) > 1)
            changes.append(Change(("node_env", host, name) if on_node else ("env", name), val))
    for name in fix.unset:
        if name in (job.get("env") or {}):
            changes.append(Change(("env", name), None))
        for host, env in (job.get("node_env") or {}).items():
            if isinstance(env, Mapping) and name in env:
                changes.append(Change(("node_env", host, name), None))
    for option, value in fix.slurm:
        if "slurm" not in facts.sections:
            manual.append(f"sbatch --{option}{'=' + value if value else ''} (this is not a Slurm job)")
        elif value == CHOOSE:
            manual.append(f"choose a value for sbatch --{option} (slurm: in the job file)")
        else:
            changes.append(slurm_change(option, value, job))
    manual += [f"container runtime option --{k}={v}" for k, v in fix.container]
    return changes, manual


def slurm_change(option: str, value: str, job: Mapping) -> Change:
    """An sbatch option as a job-file edit: a ``slurm:`` key where there is one, else a ``slurm.extra`` item
    (``--exclude`` joins the nodes already excluded)."""
    if option in _SLURM_KEYS:
        return Change(("slurm", _SLURM_KEYS[option]), value)
    if option == "requeue":
        return Change(("slurm", "requeue"), True)
    if option == "exclude":
        extra = (job.get("slurm") or {}).get("extra") or []
        old = next((x.split("=", 1)[1] for x in extra if isinstance(x, str) and x.startswith("--exclude=")), "")
        nodes = list(dict.fromkeys([*filter(None, old.split(",")), *value.split(",")]))
        value = ",".join(nodes)
    return Change(("slurm", "extra"), f"--{option}={value}" if value else f"--{option}", append=True)


def ifname(var: str, facts: FixContext) -> dict[str, str] | None:
    """host -> value ("" for every node) for an interface variable, from the nodes' interfaces; NCCL's
    local-interface exclusion where they are unknown; None where nothing known decides it."""
    nodes = {h: facts.interfaces[h] for h in facts.hosts if h in facts.interfaces}
    if len(nodes) >= 2 and len(nodes) == len(facts.hosts):
        advice = ifadvice.advise(nodes)
        if var in advice.values:
            return {"": advice.values[var]}
        per = {h: env[var] for h, env in advice.per_node.items() if var in env}
        if per:
            return per
    elif len(nodes) == 1 and len(facts.hosts) == 1:
        (ifaces,) = nodes.values()
        best = sorted((i for i in ifaces if i.name and ifadvice.usable(i)),
                      key=lambda i: ifadvice.virtual_rank(i.name or "", i.virtual))
        loop = [i for i in ifaces if i.name and i.loopback and i.up]
        if best or loop:
            return {"": (best or loop)[0].name or ""}
    return {"": NCCL_EXCLUDE_LOCAL} if var == ifadvice.NCCL else None


def _already(job: Mapping, change: Change) -> bool:
    """Whether the job already says what ``change`` would set."""
    here: object = job
    for key in change.path:
        if not isinstance(here, Mapping) or key not in here:
            return change.value is None
        here = here[key]
    if change.append:
        return isinstance(here, list) and change.value in here
    return here == change.value or (change.value is not None and str(here) == str(change.value))
