"""Preflight of a local job: what `cockpit run` checks before it starts ranks on this machine, and what
`cockpit doctor JOB` prints for it. Pure checks over ``LocalFacts`` (gathered by cockpit.launch.local.facts),
returning the same typed ``Check`` as the ssh preflight, whose GPU and version rules they reuse.

The file checks come first and need no probe, so a job whose script does not exist is refused at once,
not after its ranks have started (or after minutes in a queue). `cockpit validate` makes the same file and
interface checks (a job file that names a missing script or an interface this machine lacks is not ok).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cockpit.preflight.checks import FAIL, OK, Check, JobFacts, gpus, versions

if TYPE_CHECKING:
    from cockpit.fleet.records import NodeReport
    from cockpit.preflight.script import ScriptScan
    from cockpit.spec.model import JobSpec

HOST = "localhost"
# what selects the ranks' network interface (cockpit.preflight.ifadvice's GLOO, NCCL: imported by the checks of
# a job that sets one, not by every `cockpit validate`, issue 29)
IFNAME_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")


@dataclass(frozen=True)
class LocalFacts:
    """This machine as the job would see it. ``node``: the probe run by the job's python (GPUs, driver,
    torch/NCCL versions, ``port`` free or not); None when not asked (the file checks alone)."""

    workdir: str
    workdir_exists: bool
    script_exists: bool  # a module: job has no script: False
    python: str
    node: NodeReport | None = None
    port: int | None = None  # the job's fixed master_port (auto: None, a free one is picked at start)
    module_found: bool | None = None  # a module: job: whether the job's python finds it from workdir; None: not asked
    module_error: str | None = None  # why the job's python could not be asked
    interfaces: tuple[str, ...] | None = None  # this machine's network interface names; None: not listed
    inherited: tuple[tuple[str, str], ...] = ()  # *_SOCKET_IFNAME of the launching shell (the ranks inherit it)
    script_path: str | None = None  # the script found (workdir/script); None: a module: job, or no such file
    script_scan: ScriptScan | None = None  # what its source says (imports, spawn calls); None: not read
    missing: tuple[str, ...] | None = None  # the packages it imports that the job's python cannot find; None: not asked


def file_checks(spec: JobSpec, facts: LocalFacts) -> list[Check]:
    """The working directory exists where the ranks will start, and in it the script, or the module as the
    job's python finds it (when it was asked)."""
    if not facts.workdir_exists:
        return [Check("workdir", FAIL, f"{facts.workdir} does not exist", (HOST,),
                      "create it, or fix workdir: in the job (relative to the job file's directory)")]
    if spec.module is not None:
        return [_module_check(spec.module, facts)]
    if not facts.script_exists:
        return [Check("script", FAIL, f"{spec.script} is missing in {facts.workdir}", (HOST,),
                      "fix script: (relative to workdir:), or create the script")]
    return [Check("script", OK, f"{spec.script} in {facts.workdir}"), *_spawn_checks(spec, facts)]


def _spawn_checks(spec: JobSpec, facts: LocalFacts) -> list[Check]:
    """A script that calls torch.multiprocessing.spawn under the default runner (cockpit.preflight.script)."""
    if facts.script_scan is None or facts.script_scan.spawns is None:
        return []
    from cockpit.preflight.script import spawn_check
    from cockpit.spec.runner import SPAWN

    found = spawn_check(str(spec.script), facts.script_scan, spec.runner, SPAWN)
    return [found] if found is not None else []


def import_checks(spec: JobSpec, facts: LocalFacts) -> list[Check]:
    """The packages the script imports that the job's python cannot find, once it was asked (``missing``)."""
    if facts.missing is None or facts.script_scan is None:
        return []
    from cockpit.preflight.script import import_checks as checks_of

    return checks_of(str(spec.script), facts.script_scan, facts.missing, facts.python, HOST)


def _module_check(module: str, facts: LocalFacts) -> Check:
    if facts.module_error is not None:
        return Check("module", FAIL, f"{facts.python} could not look for {module}: {facts.module_error}", (HOST,),
                     "set python: in the job to an interpreter that exists here")
    if facts.module_found is False:
        return Check("module", FAIL, f"{module} is not found by {facts.python} from {facts.workdir}", (HOST,),
                     "fix module: (python -m runs it from workdir:), install its package into the job's python, "
                     "or use script: for a file")
    if facts.module_found is None:
        return Check("module", OK, f"{module}: not looked for here (the nodes' python imports it at the start)")
    return Check("module", OK, f"{module} found from {facts.workdir}")


def interface_checks(spec: JobSpec, facts: LocalFacts) -> list[Check]:
    """GLOO_SOCKET_IFNAME names interfaces that all exist here, NCCL_SOCKET_IFNAME selects at least one: a
    rank whose library finds none fails at its first collective, well after the start. The value is the
    job's env:, else the launching shell's (the ranks inherit it)."""
    if facts.interfaces is None:
        return []
    env = {**dict(facts.inherited), **spec.env_dict}
    out = []
    for var in IFNAME_VARS:
        value = env.get(var)
        if value is None:
            continue
        from cockpit.preflight import ifadvice  # (a job that sets one: not every `cockpit validate`)

        sel = ifadvice.parse(var, value)
        missing = [n for n in sel.names if n not in facts.interfaces] if var == ifadvice.GLOO else []
        if missing or not any(sel.matches(name) for name in facts.interfaces):
            what = f"names {', '.join(missing)}, which" if missing else "selects no interface:"
            source = "" if var in spec.env_dict else " (from this shell's environment)"
            out.append(Check("interface", FAIL, f"{var}={value}{source} {what} this machine does not have (it has "
                             f"{', '.join(facts.interfaces)})", (HOST,),
                             f"set {var} to one of them, e.g. lo for a run on this machine alone, or drop it"))
        else:
            out.append(Check("interface", OK, f"{var}={value} exists here"))
    return out


def local_checks(spec: JobSpec, facts: LocalFacts) -> list[Check]:
    """Files and interfaces, then (once the node was asked) the job's python, GPUs and driver, torch, the
    master port."""
    checks = file_checks(spec, facts) + interface_checks(spec, facts)
    node = facts.node
    if node is None:
        return checks
    if not node.reachable:  # the probe could not run under the job's python: nothing else is known
        return checks + [Check("python", FAIL, f"{facts.python}: {node.reason}", (HOST,),
                               node.hint or "set python: in the job to an interpreter with torch")]
    jf = JobFacts(nodes=[node])
    checks += gpus(spec, jf) + versions(spec, jf) + import_checks(spec, facts)
    free = dict(node.ports or ()).get(str(facts.port)) if facts.port is not None else None
    if free is False:
        checks.append(Check("master port", FAIL, f"port {facts.port} is in use on this machine", (HOST,),
                            f"master_port: auto picks a free one, or stop what listens there "
                            f"(`ss -ltnp 'sport = :{facts.port}'`)"))
    elif free:
        checks.append(Check("master port", OK, f"{facts.port} is free"))
    return checks
