"""`cockpit gpus` and `cockpit doctor`, registered together: the headless face over cockpit.fleet.probes (gpus.py,
doctor.py; which nodes they look at: targets.py). Bad arguments exit 2.

Nothing heavy is imported at module level: ``add_fleet_commands`` runs for every `cockpit` invocation.
Without --nodes / --job / --cluster the target is this machine, read through the local seam (no SSH).
"""

from __future__ import annotations

from cockpit.cli.doctor import cmd_doctor
from cockpit.cli.gpus import cmd_gpus
from cockpit.cli.targets import add_target_options


def add_fleet_commands(sub) -> None:
    """Register `gpus` and `doctor` on cockpit's subparsers."""
    p = sub.add_parser("gpus", help="GPUs of this machine or of many nodes (nvidia-smi order), with processes")
    add_target_options(p)
    p.add_argument("--json", action="store_true", help='one JSON object: {"nodes": [{"host", "state", ...}]}')
    p.add_argument("--watch", nargs="?", type=float, const=2.0, metavar="SECONDS",
                   help="refresh every SECONDS (default 2) over persistent connections until Ctrl-C")
    p.set_defaults(func=cmd_gpus)

    p = sub.add_parser("doctor", help="check that the nodes can run a job together: reachable, same GPU "
                       "count, same versions, a common network interface, a free master port")
    p.add_argument("job_file", nargs="?", metavar="JOB.yaml",
                   help="the preflight of this job (what `cockpit run` checks before it launches; ssh: its nodes "
                   "reachable, GPUs, versions, its *_SOCKET_IFNAME on every node, master port and address; local: "
                   "script, GPUs, torch, port; slurm: script, partition and gres from sinfo)")
    add_target_options(p)
    p.add_argument("--json", action="store_true", help='one JSON object: {"checks": [...], "nodes": [...]}')
    p.set_defaults(func=cmd_doctor)
