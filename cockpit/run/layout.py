"""Where every file of a run lives: the one answer to "where is X of this run", for the launchers that write
a run directory, the supervisor, the followers (CLI and TUI) and the diagnosis that read it back.

    job.yaml                     the job file as given
    status.json                  the run's state (cockpit.run.store.RunStatus), written atomically
    summary.json                 a finished run's ps row and forecast, written with its final status.json and
                                 rebuilt from it when missing or stale (cockpit.run.summary)
    ../.index                    in the runs directory: every finished run's summary in one file, for ps
                                 (cockpit.run.index)
    stop.json                    a stop asked for: {"grace": seconds, "by": who}, read by the supervisor
    preflight.json               ssh runs: the checks and facts the launch was decided on; local: its warnings
    rerun.json                   a sweep's rerun: {"of": the old run id, "trials": [indices]}
    commands/node-<N>.sh         the rendered script of node N; commands/sbatch.sh (Slurm), commands/ssh.json
    hook/sitecustomize.py        the rank-side hook (cockpit.node.rankhook), first on each rank's PYTHONPATH;
                                 hook/cockpit_rankspawn.py, cockpit_rankworkers.py, cockpit_ranklinks.py,
                                 cockpit_linkread.py, cockpit_ifaces.py beside it; Slurm runs:
                                 hook/cockpit_nodecheck.py, cockpit_nodejudge.py, cockpit_ifaces.py (preflight)
    logs/rank-<R>.<host>.<kind>  per rank: log, exit (its wrapper's "status time"), pid, beat, stacks, fr.json,
                                 workers (its DataLoader workers' stacks, when asked), links (a Slurm rank's
                                 own sockets, when asked: cockpit.node.ranklinks)
    logs/agent.<host>.log        torchrun's (or the batch shell's, a trial's) own output; .exit for ssh nodes
    logs/supervisor.log          the supervisor's own output
    logs/dump.req                a stack / Flight Recorder dump asked of the ranks (cockpit.hang)
    logs/links.req               a Slurm run's ranks asked for their links alone (cockpit.hang.ranklinks)
    logs/stacks.<stamp>.txt      the stacks gathered when the run stalled
    logs/attempt-<N>/            Slurm: the exit records of attempt N, set aside at a requeue
    logs/restart-<K>/            the exit records of torchrun's round K (max_restarts), set aside by the rank
                                 wrapper when torchrun restarted the workers
    logs/preflight/<job id>/     Slurm: the preflight in the allocation: <node>.json, <node>.out, verdict.json
    metrics/rank-<R>.jsonl       written by cockpit.train
    checkpoints/                 written by cockpit.train
    trial-<I>/                   sweeps: one run directory per trial, laid out the same

Only names and path arithmetic here, plus the two listings that read a ``logs/`` directory back (rank files,
agent logs); nothing is written. Shell text that runs elsewhere (the rank wrapper, the node agent, the
sbatch script) spells the same names; cockpit.render builds its paths from the names here. The node side
(cockpit.node.rankhook, cockpit.node.agent) runs as copied source without cockpit, so it spells them
itself.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

JOB = "job.yaml"
STATUS = "status.json"
SUMMARY = "summary.json"  # a finished run's ps row and forecast, beside status.json (cockpit.run.summary)
INDEX = ".index"  # in a runs directory: its finished runs' summaries in one file (cockpit.run.index)
STOP = "stop.json"
PREFLIGHT = "preflight.json"
RERUN = "rerun.json"
COMMANDS = "commands"
LOGS = "logs"
METRICS = "metrics"
CHECKPOINTS = "checkpoints"
HOOK = "hook"
HOOK_FILE = "sitecustomize.py"
# What goes into hook/: (installed name, source file in cockpit/node/). The companions serve runner: spawn and
# the stacks of the processes a rank forks (DataLoader workers).
HOOK_FILES = ((HOOK_FILE, "rankhook.py"), ("cockpit_rankspawn.py", "rankspawn.py"),
              ("cockpit_rankworkers.py", "rankworkers.py"))
# The rank's own transport evidence (cockpit.node.ranklinks), written where no agent of cockpit's runs (Slurm);
# installed into hook/ beside the hook, which imports them only when asked: (installed name, source)
RANK_LINK_FILES = (("cockpit_ranklinks.py", "ranklinks.py"), ("cockpit_linkread.py", "linkread.py"),
                   ("cockpit_ifaces.py", "ifaces.py"), ("cockpit_rasask.py", "rasask.py"))
# Slurm's preflight inside the allocation, installed into hook/: (installed name, source in cockpit/node/)
NODECHECK, NODEJUDGE = "cockpit_nodecheck.py", "cockpit_nodejudge.py"
NODECHECK_FILES = ((NODECHECK, "nodecheck.py"), (NODEJUDGE, "nodejudge.py"), ("cockpit_ifaces.py", "ifaces.py"))
PREFLIGHT_DIR = f"{LOGS}/preflight"
SSH_PLAN = f"{COMMANDS}/ssh.json"
SBATCH_SCRIPT = f"{COMMANDS}/sbatch.sh"
SUPERVISOR_LOG = f"{LOGS}/supervisor.log"
DUMP_REQUEST = "dump.req"  # in logs/
LINKS_REQUEST = "links.req"  # in logs/: a Slurm rank's hook writes its sockets (cockpit.node.ranklinks)

RANK_KINDS = ("log", "exit", "pid", "beat", "stacks")
_RANK_FILE = re.compile(r"^rank-(\d+)\.(.+)\.(log|exit|pid|beat|stacks)$")
_AGENT_LOG = re.compile(r"^agent\.(.+)\.log$")


def node_script_name(node_rank: int) -> str:
    """commands/node-<N>.sh, relative to the run directory (a node's shell cds there first)."""
    return f"{COMMANDS}/node-{node_rank}.sh"


def node_script(run_dir: Path, node_rank: int) -> Path:
    return run_dir / node_script_name(node_rank)


def agent_log_name(host: str) -> str:
    """The file name of a node's (or a trial's, or the batch shell's) own output in logs/."""
    return f"agent.{host}.log"


def agent_exit_name(host: str) -> str:
    """An ssh node's torchrun end record ("status time") in logs/."""
    return f"agent.{host}.exit"


def agent_log(run_dir: Path, host: str) -> Path:
    return run_dir / LOGS / agent_log_name(host)


def agent_host(name: str) -> str | None:
    """The host an agent log is named after (a trial's "trial-I", Slurm's "sbatch"); None: not an agent log."""
    m = _AGENT_LOG.match(name)
    return m.group(1) if m else None


def agent_logs(run_dir: Path) -> list[tuple[str, Path]]:
    """(host, path) of every agent log of the run that exists now, by file name."""
    return [(host, path) for path in sorted((run_dir / LOGS).glob("agent.*.log"))
            if (host := agent_host(path.name)) is not None]


def rank_base(run_dir: Path, rank: int, host: str) -> Path:
    """logs/rank-<R>.<host>: add ".log", ".exit", ".pid", ".beat", ".stacks" or ".fr.json"."""
    return run_dir / LOGS / f"rank-{rank}.{host}"


def rank_file(run_dir: Path, rank: int, host: str, kind: str) -> Path:
    return run_dir / LOGS / rank_file_name(rank, host, kind)


def rank_file_name(rank: int, host: str, kind: str) -> str:
    """A rank file's name in logs/ (``rank_file``'s last part)."""
    return f"rank-{rank}.{host}.{kind}"


def parse_rank_file(name: str) -> tuple[int, str, str] | None:
    """(rank, host, kind) of a file name in logs/, None for anything else."""
    m = _RANK_FILE.match(name)
    return (int(m.group(1)), m.group(2), m.group(3)) if m else None


def rank_files(run_dir: Path, kind: str, skip: frozenset[str] = frozenset()) -> dict[int, tuple[str, Path]]:
    """rank -> (host, path) for logs/rank-<R>.<host>.<kind>, hosts in ``skip`` left out. A rank with files from
    two hosts (a relaunch put it on another node: Slurm --exclude, an ssh spare) maps to the one written last,
    the current attempt's."""
    return rank_file_kinds(run_dir, (kind,), skip)[kind]


def rank_file_kinds(run_dir: Path, kinds: tuple[str, ...],
                    skip: frozenset[str] = frozenset()) -> dict[str, dict[int, tuple[str, Path]]]:
    """``rank_files`` of each of ``kinds``, from one listing of logs/."""
    named = rank_file_names(run_dir, kinds, skip)
    return {kind: {rank: (host, Path(path)) for rank, (host, path) in found.items()} for kind, found in named.items()}


def rank_file_names(run_dir: Path | str, kinds: tuple[str, ...],
                    skip: frozenset[str] = frozenset()) -> dict[str, dict[int, tuple[str, str]]]:
    """``rank_file_kinds`` with the paths as text: 4,096 ranks leave some 20,000 files in logs/ and the
    watchdog reads three kinds every second, where a Path per file costs more than the listing."""
    out: dict[str, dict[int, tuple[str, str]]] = {kind: {} for kind in kinds}
    logs = f"{os.fspath(run_dir)}/{LOGS}"
    try:
        names = os.listdir(logs)
    except OSError:  # none yet, or not a directory
        return out
    tails = tuple(f".{kind}" for kind in kinds)
    for name in names:
        parsed = parse_rank_file(name) if name.endswith(tails) else None
        if parsed and parsed[2] in out and parsed[1] not in skip:
            found, path = out[parsed[2]], f"{logs}/{name}"
            if parsed[0] in found and _mtime(path) < _mtime(found[parsed[0]][1]):
                continue  # an earlier attempt's file of this rank, on another host
            found[parsed[0]] = (parsed[1], path)
    return out


def _mtime(path: Path | str) -> float:
    try:
        return os.stat(path, follow_symlinks=False).st_mtime
    except OSError:
        return 0.0


def exit_records(run_dir: Path) -> list[Path]:
    """Every exit record in logs/ (ranks' and ssh nodes' agents'), by name."""
    return sorted((run_dir / LOGS).glob("*.exit"))


RESTART_PREFIX = "restart-"


def restart_dirs(run_dir: Path) -> list[Path]:
    """logs/restart-<K>/ of a run whose torchrun restarted its workers, by K (round K ended in a restart)."""
    try:
        names = os.listdir(run_dir / LOGS)
    except OSError:
        return []
    rounds = sorted(int(n[len(RESTART_PREFIX):]) for n in names
                    if n.startswith(RESTART_PREFIX) and n[len(RESTART_PREFIX):].isdigit())
    return [run_dir / LOGS / f"{RESTART_PREFIX}{k}" for k in rounds]


def stacks_report(run_dir: Path, stamp: str) -> Path:
    """Where the watchdog keeps the stacks it gathered at a stall (stamp: %Y%m%d-%H%M%S)."""
    return run_dir / LOGS / f"stacks.{stamp}.txt"


def stacks_reports(run_dir: Path) -> list[Path]:
    """The kept stall stacks of the run, oldest first."""
    return sorted((run_dir / LOGS).glob("stacks.*.txt"))


def metrics_file(run_dir: Path, rank: int) -> Path:
    return run_dir / metrics_name(rank)


def metrics_name(rank: int) -> str:
    """metrics_file's path inside the run directory (as text: a listing of thousands of runs joins it itself)."""
    return f"{METRICS}/rank-{rank}.jsonl"


def hook_dir(run_dir: Path) -> Path:
    return run_dir / HOOK


def preflight_dir(run_dir: Path, job_id: str) -> Path:
    """Where the Slurm preflight of job ``job_id`` (a requeue checks again: the latest check) left its files."""
    return run_dir / PREFLIGHT_DIR / job_id


def trial_name(trial: int) -> str:
    """A sweep trial's name: its directory's, and the host its agent log and status node are named after."""
    return f"trial-{trial}"


def trial_dir(run_dir: Path, trial: int) -> Path:
    """A sweep trial's own run directory."""
    return run_dir / trial_name(trial)
