"""`cockpit doctor`: can these nodes run a job together (reachable, the same GPU count and versions, a common
network interface, a free master port), or, given a job file, the preflight `cockpit run` makes for it, for
every launcher. Prints the checks (or JSON); exits 1 when one failed."""

from __future__ import annotations

import argparse
import json

from cockpit.cli.common import EXIT_FAILED, EXIT_OK
from cockpit.cli.targets import fleet_for, refresh, ssh_options


def cmd_doctor(args: argparse.Namespace) -> int:
    import asyncio

    if getattr(args, "job_file", None):
        return doctor_job(args)
    from cockpit.preflight.checks import failed
    from cockpit.preflight.fleet import fleet_checks

    nodes = asyncio.run(refresh(fleet_for(args)))
    checks = fleet_checks(nodes)
    if args.json:  # these checks carry no where/hint: their detail says it (the shape scripts read)
        print(json.dumps({"checks": [{"name": c.name, "level": c.level, "detail": c.detail} for c in checks],
                          "nodes": [n.to_dict() for n in nodes]}, indent=2))
    else:
        print("\n".join(c.line() for c in checks))
    return EXIT_FAILED if failed(checks) else EXIT_OK


def doctor_job(args: argparse.Namespace) -> int:
    """`cockpit doctor JOB.yaml`: the job's preflight (cockpit.preflight.checks) on its own nodes, as its
    launcher makes it (cockpit.launch.protocol ``preflight``)."""
    from cockpit.cli.common import UsageError, load_job
    from cockpit.launch import registry, with_shell_env
    from cockpit.launch.protocol import PreflightOptions

    if args.nodes or args.job or args.cluster is not None:
        raise UsageError("give either JOB.yaml or --nodes/--job/--cluster, not both")
    spec = with_shell_env(load_job(args.job_file))  # what `cockpit run` would check
    found = registry.for_spec(spec).preflight(spec, args.job_file, PreflightOptions(
        timeout=args.timeout, python=args.python, ssh=lambda: _ssh_settings(args)))
    code = _print_checks(found.checks, args.json, found.extra)
    if found.text is not None and not args.json:
        print(found.text)
    return code


def _ssh_settings(args: argparse.Namespace):
    """The cluster file's SSH settings with the command line's over them (for a launcher that uses SSH)."""
    from cockpit.cli.common import UsageError
    from cockpit.fleet.cluster import NodesError, load_cluster

    try:
        cluster = load_cluster()
    except NodesError as exc:
        raise UsageError(str(exc)) from None
    return ssh_options(args, cluster)


def _print_checks(checks: list, as_json: bool, extra: dict | None = None) -> int:
    """A job's checks as `run` would refuse them: their lines, or JSON; exit 1 when one failed."""
    from cockpit.preflight.checks import failed

    if as_json:
        print(json.dumps({"checks": [c.to_dict() for c in checks], **(extra or {})}, indent=2))
    else:
        print("\n".join(c.line() for c in checks))
    return EXIT_FAILED if failed(checks) else EXIT_OK
