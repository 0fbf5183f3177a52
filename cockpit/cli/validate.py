"""What `cockpit validate` checks beyond the job file itself: what the preflight of `cockpit run` would refuse
and this machine can say at once, without starting anything heavy. A local or Slurm job's working directory
and script (for Slurm, on this submit host, as its preflight checks them); a local job's module, as its python
finds it; and a local job's GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME against this machine's interfaces. A warning,
not a refusal: a script that calls torch.multiprocessing.spawn under the default runner. An ssh job's files live
on its nodes: `cockpit doctor JOB` checks them there.

Each refusal is a positioned problem, like the file's own: ``job.yaml:LINE:COL: field: what (hint: ...)``.
"""

from __future__ import annotations

from cockpit.spec.model import JobSpec
from cockpit.spec.yamlpos import Problem


def here_problems(spec: JobSpec, path: str) -> list[Problem]:
    """The preflight's file (and, for a local job, interface) refusals for ``spec``, positioned: what its
    launcher can say from here (cockpit.launch.protocol ``here_checks``); then its warnings (``warning`` set:
    a script that starts its own processes under the default runner), which refuse nothing."""
    from cockpit.launch import registry
    from cockpit.preflight.checks import FAIL, WARN
    from cockpit.preflight.local import IFNAME_VARS

    checks = registry.for_spec(spec).here_checks(spec, path)
    out = []
    for check in (c for c in checks if c.level in (FAIL, WARN)):
        var = next((v for v in IFNAME_VARS if check.detail.startswith(f"{v}=")), None)
        field = ("env", var) if var else (check.name,)
        if field not in spec.where.at and check.name == "runner":  # the default runner: the script says why
            field = ("script",)
        out.append(Problem(*spec.where.of(field), ".".join(field), check.detail, check.hint, check.level == WARN))
    return sorted(out, key=lambda p: p.warning)
