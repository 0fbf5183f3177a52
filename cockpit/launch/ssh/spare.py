"""recover: on ssh: the next attempt of a run on a spare node (the job's ``recover.spare_nodes``) in place of
the node the diagnosis blamed (cockpit.launch.recovery.blame: lost, its link dead, its GPU or memory at fault),
or, with no spare left, without it where ``recover.min_nodes`` allows fewer nodes.

The spare takes the blamed node's place in the rank layout: its node rank, so every global rank keeps its number
and the checkpoint's world size is the same; where the blamed node was node 0, the master (MASTER_ADDR, the
rendezvous) moves to the spare. Before the next attempt the nodes it will run on are asked again as at launch
(cockpit.launch.ssh.facts): the spare's run directory (this machine's, if it sees it, else its own), its address
on the nodes' subnet, a free master port. A spare that does not answer is left out too and the next one tried.
Every node script is rendered again from the run's job.yaml (the node ranks and the master address are in each),
with the launch's arguments and shell variables (the plan keeps them) and any fix recover.apply_fixes wrote.

The nodes that stay keep their run directories, so their ranks resume from the checkpoints there. A spare
whose run directory is its own (it does not share this machine's) starts without the run's checkpoints: give the
spares the shared filesystem the other nodes use, or the run's ranks disagree on the step they resume from.

Fewer nodes: the nodes that stay are numbered on in order (node 0 first; the master moves when node 0 went) and
torchrun gets the new count as --nnodes, so the world size shrinks and the script must take that (cockpit.train
resumes a checkpoint of another world size, with a warning). Not torchrun's elastic --nnodes=MIN:MAX: cockpit
starts the whole attempt and knows how many nodes it has, and a range would make the rendezvous wait out its
last call for nodes that will not come.

Why not a fresh run: the checkpoints, the metrics and the logs are the run's (cockpit.launch.recovery).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cockpit.launch.site import LaunchError
from cockpit.launch.ssh.facts import ask_nodes
from cockpit.launch.ssh.plan import PLAN_FILE, SSHPlan, node_scripts, plan_nodes, read_plan, render_facts
from cockpit.run import layout
from cockpit.run.store import RunStatus, write_atomic
from cockpit.spec.model import JobSpec

FIX_MARK = "# cockpit: recover.apply_fixes"  # the first line of what cockpit.launch.attempt_files.apply_fix writes
ASK_TIMEOUT = 20.0  # seconds per node, as at launch (cockpit.launch.ssh.launcher.SSHLaunch.timeout)


def listed(status: RunStatus) -> tuple[str, ...]:
    """The job's spare_nodes, as status.json's ``recover`` keeps them."""
    spares = (status.recover or {}).get("spare_nodes")
    return tuple(str(h) for h in spares) if isinstance(spares, list) else ()


def spares_left(plan: SSHPlan, status: RunStatus) -> tuple[str, ...]:
    """The spares neither in use nor left out by an earlier attempt, in the job file's order."""
    used = {n.host for n in plan.nodes} | set(plan.left_out)
    return tuple(h for h in listed(status) if h not in used)


def min_nodes(status: RunStatus) -> int | None:
    """recover.min_nodes as status.json keeps it: the fewest nodes an attempt may run on; None: all of them."""
    value = (status.recover or {}).get("min_nodes")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def replacement(run_dir: Path, status: RunStatus, leave_out: tuple[str, ...]) -> str | None:
    """None where a spare is left for each node of ``leave_out``, or the run may go on without the rest
    (recover.min_nodes); else why not, in words that follow "node N is to blame and"."""
    plan = read_plan(run_dir)
    short = len(leave_out) - len(spares_left(plan, status))
    floor = min_nodes(status)
    if short <= 0 or (floor is not None and len(plan.nodes) - short >= floor):
        return None
    given = listed(status)
    used = [h for h in given if h in {n.host for n in plan.nodes}]
    out = [h for h in given if h in plan.left_out]
    said = "; ".join(([f"in use: {', '.join(used)}"] if used else []) + ([f"left out: {', '.join(out)}"]
                                                                          if out else []))
    fewer = (f", and the run may not go on with fewer than {floor} nodes (recover.min_nodes: {floor})"
             if floor is not None else "")
    return (f"no spare node is left (spare_nodes: {', '.join(given) if given else '[]'}"
            f"{'; ' + said if said else ''}){fewer}")


def relaunch(run_dir: Path, status: RunStatus, leave_out: tuple[str, ...], timeout: float = ASK_TIMEOUT) -> str | None:
    """Make the next attempt run on spares in place of ``leave_out`` (without them, down to recover.min_nodes,
    where no spare is left): the plan, the node scripts, ``status.hosts`` and ``world_size`` rewritten; what was
    done, for the run's note. None where no node is to be left out (the node scripts run again as they are).
    LaunchError where neither a spare answers nor fewer nodes are allowed."""
    plan = read_plan(run_dir)
    hosts = tuple(n.host for n in sorted(plan.nodes, key=lambda n: n.node_rank))
    out = tuple(h for h in leave_out if h in hosts)
    if not out:
        return None
    spec = job_spec(run_dir, status, plan)
    swap, drop, facts, skipped = _ask(run_dir, status, plan, spec, hosts, out, timeout)
    new_hosts = tuple(swap.get(h, h) for h in hosts if h not in drop)
    spec = replace(spec, hosts=new_hosts, num_nodes=len(new_hosts))
    new_plan = _new_plan(run_dir, plan, spec, facts, swap, drop, out + skipped)
    _write_scripts(run_dir, status, spec, new_plan, len(hosts))
    write_atomic(run_dir / PLAN_FILE, new_plan.to_json())
    status.hosts = list(new_hosts)
    status.world_size = plan.nproc * len(new_hosts) if plan.nproc is not None else None
    words = [f"spare {swap[h]} in place of node {h} (node rank {hosts.index(h)})" for h in out if h in swap]
    if drop:
        words.append(f"no spare left for node {', '.join(drop)}: the run goes on with {len(new_hosts)} of "
                     f"{len(hosts)} nodes (recover.min_nodes: {min_nodes(status)})")
    if new_plan.master_addr != plan.master_addr:
        words.append(f"master now {new_plan.master_addr}:{new_plan.master_port}")
    if skipped:
        words.append(f"spare {', '.join(skipped)} did not answer, left out too")
    return "; ".join(words)


def job_spec(run_dir: Path, status: RunStatus, plan: SSHPlan) -> JobSpec:
    """The job as launched: the run's copy of its file, with the shell's variables and the ranks per node the
    launch used (cockpit.launch.ssh.launcher.prepare)."""
    from cockpit.spec.model import SpecError, parse_spec

    try:
        spec = parse_spec((run_dir / "job.yaml").read_text(encoding="utf-8"), status.job_file)
    except (OSError, UnicodeDecodeError, SpecError) as exc:
        raise LaunchError(f"cannot read the run's job.yaml to render the node scripts again: {exc}") from None
    spec = replace(spec, env=plan.shell_env + spec.env)
    return replace(spec, procs_per_node=plan.nproc) if spec.nprocs is None and plan.nproc is not None else spec


def _ask(run_dir: Path, status: RunStatus, plan: SSHPlan, spec: JobSpec, hosts: tuple[str, ...],
         out: tuple[str, ...], timeout: float):
    """(swap: blamed node -> spare, blamed nodes dropped without one, the facts of the new set, spares that did
    not answer): the first spares that answer, asked together with the nodes that stay; a blamed node without a
    spare is dropped where recover.min_nodes allows it."""
    spares = list(spares_left(plan, status))
    skipped: tuple[str, ...] = ()
    floor = min_nodes(status)
    while True:
        swap = dict(zip(out, spares, strict=False))
        drop = tuple(h for h in out if h not in swap)
        if drop and (floor is None or len(hosts) - len(drop) < floor):
            raise LaunchError(f"no spare node answered in place of {', '.join(drop)} (spare_nodes: "
                              f"{', '.join(listed(status)) or '[]'}; silent: {', '.join(skipped) or 'none'}) (hint: "
                              "cockpit doctor on the spares, or fix the blamed node)")
        new_hosts = tuple(swap.get(h, h) for h in hosts if h not in drop)
        trial = replace(spec, hosts=new_hosts, num_nodes=len(new_hosts))
        _checks, facts = ask_nodes(trial, status.job_file, run_dir.parent, plan.ssh, timeout)
        silent = tuple(s for s in swap.values() if s not in facts.node_checks)
        if not silent:
            silent = tuple(h for h in trial.hosts if h not in facts.node_checks)
            if silent or facts.master_port is None:
                what = ", ".join(silent) if silent else "the master port"
                raise LaunchError(f"the nodes of the next attempt could not all be asked ({what}) (hint: cockpit "
                                  f"doctor {status.job_file})")
            return swap, drop, facts, skipped
        skipped += silent
        spares = [s for s in spares if s not in silent]


def _new_plan(run_dir: Path, plan: SSHPlan, spec: JobSpec, facts, swap: dict[str, str], drop: tuple[str, ...],
              left_out: tuple[str, ...]) -> SSHPlan:
    """The plan of the next attempt: each spare at its blamed node's place, the nodes dropped without one gone
    and the rest numbered on in order; the master moves where node 0 is another node now."""
    fresh = {n.host: n for n in plan_nodes(spec, run_dir, facts, None)}
    kept = [fresh[swap[n.host]] if n.host in swap else n
            for n in sorted(plan.nodes, key=lambda n: n.node_rank) if n.host not in drop]
    nodes = tuple(replace(n, node_rank=i) for i, n in enumerate(kept))
    old_master = next((n.host for n in plan.nodes if n.node_rank == 0), None)
    moved = bool(nodes) and nodes[0].host != old_master
    addr = (facts.master_addr or spec.hosts[0]) if moved else plan.master_addr
    return replace(plan, nodes=nodes, master_addr=addr, master_port=facts.master_port,
                   left_out=plan.left_out + left_out)


def _write_scripts(run_dir: Path, status: RunStatus, spec: JobSpec, plan: SSHPlan, before: int) -> None:
    """Every node's script rendered again; the scripts of node ranks the run no longer has (``before``: how many
    nodes it had) removed."""
    base = render_facts(spec, status.job_file, str(run_dir.resolve()), plan.run_id, plan.master_port,
                        plan.extra_args)
    for rank, text in node_scripts(spec, base, plan).items():
        path = layout.node_script(run_dir, rank)
        try:
            old = path.read_text(encoding="utf-8")
        except OSError:
            old = ""
        write_atomic(path, keep_fixes(old, text))
    for rank in range(len(plan.nodes), before):
        layout.node_script(run_dir, rank).unlink(missing_ok=True)


def keep_fixes(old: str, new: str) -> str:
    """``new`` with the fix recover.apply_fixes wrote into ``old`` (cockpit.launch.attempt_files.apply_fix), at the
    same place: after the job's env: lines, before the launch."""
    at, end = old.find(FIX_MARK), old.rfind("\nexec ")
    to = new.rfind("\nexec ")
    if at < 0 or end < at or to < 0:
        return new
    return new[:to + 1] + old[at:end + 1] + new[to + 1:]
