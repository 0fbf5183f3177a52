"""Per-node launch scripts: torchrun, the legacy torch.distributed.launch, a script that spawns its own ranks,
and single-process DP.

Each script is what cockpit runs on that node (the local and ssh launchers start exactly this text), so the
dry run is the truth. Every rank writes its own log file, named by global rank and host, through a tiny
`sh -c` wrapper; torchrun's --log-dir layout is not relied upon (it numbers by local rank and changes
between versions).
"""

from __future__ import annotations

from cockpit.render import loopback
from cockpit.render.env import node_env_lines, program_words, spawns
from cockpit.render.rankwrap import HOOK_PATH_LINES, WRAPPER_PATH, write_wrapper_lines
from cockpit.render.shell import command, export, header, quote
from cockpit.render.site import Site
from cockpit.spec.model import JobSpec


def _rank_program(spec: JobSpec, facts: Site) -> list[str]:
    return [f"bash {WRAPPER_PATH}", " ".join(program_words(spec, facts, quote))]


def _prologue(spec: JobSpec, facts: Site, node_rank: int, what: str, wrapper: bool = True) -> list[str]:
    host = facts.node_names[node_rank]
    lines = header(f'cockpit: job "{spec.name}", {what}, node {node_rank} of {spec.num_nodes} ({host}), '
                   f"run {facts.run_id}")
    lines.append(f"cd {quote(facts.workdir)}")
    lines += node_env_lines(spec, facts, host)
    lines.append('mkdir -p "$COCKPIT_RUN_DIR/logs"')
    if wrapper:
        lines.append("# Each rank runs under this wrapper: its own log file (global rank, host) and exit record.")
        lines += write_wrapper_lines()
    return lines


def _rendezvous(spec: JobSpec, facts: Site, node_rank: int, legacy: bool) -> list[str]:
    sep = "_" if legacy else "-"
    # On one machine, always the static form: its store can be held to loopback (cockpit.render.loopback);
    # c10d's would start a second store for the ranks on every interface.
    if spec.rdzv == "c10d" and not legacy and spec.launcher != "local":
        # c10d: node 0 hosts the store; the others must not try to bind it (they would fail or race).
        return ["--rdzv-backend=c10d", f"--rdzv-endpoint={quote(f'{facts.master_addr}:{facts.master_port}')}",
                f"--rdzv-id={quote(facts.run_id)}", f"--rdzv-conf=is_host={1 if node_rank == 0 else 0}"]
    return [f"--node{sep}rank={node_rank}", f"--master{sep}addr={quote(facts.master_addr)}",
            f"--master{sep}port={facts.master_port}"]


def _launcher(spec: JobSpec, facts: Site, module: str) -> str:
    """``python -m MODULE``; for a local run, through the program that holds the store to loopback."""
    if spec.launcher == "local":
        return loopback.command(quote(facts.python), module)
    return f"{quote(facts.python)} -m {module}"


def _store_lines(spec: JobSpec) -> list[str]:
    return loopback.lines() if spec.launcher == "local" else []


def torchrun_script(spec: JobSpec, facts: Site, node_rank: int = 0) -> str:
    """The script that starts torchrun on node ``node_rank``."""
    nproc = "gpu" if spec.nprocs is None else str(spec.nprocs)
    segments = [_launcher(spec, facts, "torch.distributed.run"), f"--nnodes={spec.num_nodes}",
                f"--nproc-per-node={nproc}", *_rendezvous(spec, facts, node_rank, legacy=False),
                f"--max-restarts={spec.max_restarts}", "--no-python", *_rank_program(spec, facts)]
    lines = _prologue(spec, facts, node_rank, "torchrun") + _store_lines(spec)
    lines += ["# torchrun's own output goes to this script's; each rank's to its log file.",
              "exec " + command(segments)]
    return "\n".join(lines) + "\n"


def launch_script(spec: JobSpec, facts: Site, node_rank: int = 0) -> str:
    """The legacy `python -m torch.distributed.launch` form, for nodes whose torch predates torchrun (1.10).
    Flags are spelled with underscores, the only spelling old releases parse (torch 2.x takes both);
    --use_env because --no_python requires it, so the rank reads LOCAL_RANK, not a --local_rank argument."""
    nproc = "gpu" if spec.nprocs is None else str(spec.nprocs)
    segments = [_launcher(spec, facts, "torch.distributed.launch"), "--use_env",
                f"--nnodes={spec.num_nodes}", f"--nproc_per_node={nproc}",
                *_rendezvous(spec, facts, node_rank, legacy=True), "--no_python", *_rank_program(spec, facts)]
    lines = _prologue(spec, facts, node_rank, "torch.distributed.launch") + _store_lines(spec)
    lines += ["# Legacy launcher: --use_env sets LOCAL_RANK in the environment instead of --local_rank.",
              "exec " + command(segments)]
    return "\n".join(lines) + "\n"


def spawn_script(spec: JobSpec, facts: Site, node_rank: int = 0) -> str:
    """``runner: spawn``: the script runs once per node and starts ``spec.nprocs`` ranks itself
    (torch.multiprocessing.spawn). Its own output is this script's; each spawned rank's goes to its log file,
    named by global rank (node rank x spawns + spawn index) by cockpit's hook in that process."""
    lines = _prologue(spec, facts, node_rank, "the script spawns its ranks", wrapper=False)
    world = spawns(spec) * spec.num_nodes
    lines += ["# What a spawning script needs to place its ranks; RANK and LOCAL_RANK are each process's own.",
              *(export(k, v) for k, v in (
                  ("COCKPIT_SPAWNS", str(spec.nprocs)), ("NODE_RANK", str(node_rank)),
                  ("NNODES", str(spec.num_nodes)), ("WORLD_SIZE", str(world)),
                  ("LOCAL_WORLD_SIZE", str(spec.nprocs)), ("MASTER_ADDR", facts.master_addr),
                  ("MASTER_PORT", str(facts.master_port)))),
              *HOOK_PATH_LINES,
              "exec " + " ".join(program_words(spec, facts, quote))]
    return "\n".join(lines) + "\n"


def dp_script(spec: JobSpec, facts: Site) -> str:
    """One process driving all picked GPUs with DataParallel; its log is rank 0's."""
    lines = _prologue(spec, facts, 0, "DataParallel")
    # One process and no RANK in its environment: the runtime sees a world of one; the wrapper calls it 0.
    lines.append(f"exec bash {WRAPPER_PATH} " + " ".join(program_words(spec, facts, quote)))
    return "\n".join(lines) + "\n"
