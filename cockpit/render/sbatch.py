"""The sbatch script: one srun task per GPU (RANK = SLURM_PROCID, LOCAL_RANK = SLURM_LOCALID, WORLD_SIZE =
SLURM_NTASKS) — or, for a script that spawns its own ranks (runner: spawn), one task per node whose output is
logs/agent.NODE.log — MASTER_ADDR = first host of the allocation, USR1 before the time limit forwarded to the tasks
so the runtime can checkpoint and requeue. Pure: the same spec and facts give the same text, which is
checked against golden files.

Every task runs under the same rank wrapper as local and ssh runs (cockpit.render.rankwrap), so a Slurm run
directory has the same layout: logs/rank-R.HOST.log and .exit per rank (HOST = the Slurm node name), which is
what cockpit's follow, summary and first-failure read. Here the wrapper passes no signal on: slurmstepd
signals every process of the step, the rank too, and a second USR1 would make a framework's own requeue
handler (Lightning's) checkpoint and requeue twice. srun's own per-task files (logs/srun-T.HOST.out) keep
what the wrapper cannot: slurmstepd's "STEP CANCELLED" lines, a wrapper that failed to start. The batch
shell's output goes to logs/agent.sbatch.log (arrays: logs/agent.trial-N.log), followed like torchrun's.

Each start of the script (the first, and one per requeue) prints a ``cockpit: start restart=N ...`` line and
sets the previous attempt's rank exit records aside in logs/attempt-<N-1>/, so the exits in logs/ are always
the current attempt's; the rank logs are appended to across attempts.
"""

from __future__ import annotations

from cockpit import contract
from cockpit.render.env import contract_env, device_env, program_words, spawns
from cockpit.render.rankwrap import wrapper
from cockpit.render.shell import command, export, quote
from cockpit.render.site import Site
from cockpit.run import layout
from cockpit.spec.model import JobSpec

START_MARK = "cockpit: start restart="  # the line each attempt prints; cockpit.launch.slurm.unit reads it
BATCH_HOST = "sbatch"  # logs/agent.sbatch.log: the batch shell's output, shown as [sbatch:agent]
_WRAPPER_FILE = '"$COCKPIT_RUN_DIR/rank-wrapper.sh"'
# Per task: map Slurm's variables onto torchrun's, name the node, then run the rank's program under the wrapper.
_TASK_SHIM = quote(
    "export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS "
    'LOCAL_WORLD_SIZE=${SLURM_NTASKS_PER_NODE%%(*} COCKPIT_HOST="$SLURMD_NODENAME"; '
    'exec bash "$COCKPIT_RUN_DIR/rank-wrapper.sh" "$0" "$@"')
# runner: spawn: one task per node runs the script, which spawns the ranks; cockpit's hook gives each its files.
_SPAWN_SHIM = quote(
    'export NODE_RANK=$SLURM_NODEID COCKPIT_HOST="$SLURMD_NODENAME"; '
    'if [ -f "$COCKPIT_RUN_DIR/hook/sitecustomize.py" ]; then '
    'export PYTHONPATH="$COCKPIT_RUN_DIR/hook${PYTHONPATH:+:$PYTHONPATH}"; fi; '
    'exec "$0" "$@" >>"$COCKPIT_RUN_DIR/logs/agent.$SLURMD_NODENAME.log" 2>&1')
# Slurm's own port choice would collide between jobs on shared nodes; derive one from the job id instead,
# below Linux's ephemeral range (32768+) so it does not race with outgoing connections.
_SC2016 = "# shellcheck disable=SC2016  # the shim's $-words are for each task's shell"
_PORT_FROM_JOB_ID = "$(( 12000 + SLURM_JOB_ID % 20000 ))"
# The preflight's time limits: the whole
# step (nvidia-smi that hangs on a broken GPU, torch's import, the store) and the store / all-reduce alone.
PREFLIGHT_STEP_SECONDS, PREFLIGHT_RENDEZVOUS_SECONDS = 120, 30
_FREE_PORT = 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'


def batch_log(run_dir: str, array: bool) -> str:
    """Where the batch shell's output goes (sbatch --output); %a is the array task id."""
    return f"{run_dir}/{layout.LOGS}/{layout.agent_log_name('trial-%a' if array else BATCH_HOST)}"


def _gpu_option(spec: JobSpec) -> list[str]:
    """How GPUs are asked for, the job's way (the preflight step asks for all of them the same way)."""
    if not spec.gpus_per_node:
        return []
    s = spec.slurm
    kind = f"{s.gres_type}:" if s.gres_type else ""
    flag = "--gres=gpu:" if s.gpu_flag == "gres" else "--gpus-per-node="
    return [f"{flag}{kind}{spec.gpus_per_node}"]


def sbatch_directives(spec: JobSpec, facts: Site, trials: int = 0) -> list[str]:
    s = spec.slurm
    out = [f"--job-name={spec.name}"]
    out += [f"--nodes={spec.num_nodes}"] if spec.nodelist is None else [f"--nodelist={spec.nodelist}"]
    out.append(f"--ntasks-per-node={1 if spec.runner == 'spawn' else spec.nprocs}")
    out += _gpu_option(spec)
    for name, value in (("cpus-per-task", s.cpus_per_task), ("mem", s.mem), ("time", s.time),
                        ("partition", s.partition), ("account", s.account), ("qos", s.qos)):
        if value is not None:
            out.append(f"--{name}={value}")
    log = batch_log(facts.run_dir, bool(trials))
    out += [f"--output={log}", f"--error={log}", "--open-mode=append"]
    if s.requeue:
        out += [f"--signal=B:USR1@{s.signal_seconds}", "--requeue"]
    if trials:
        limit = s.array_parallel or (spec.sweep.max_parallel if spec.sweep else None)
        out.append(f"--array=0-{trials - 1}" + (f"%{limit}" if limit else ""))
    out += list(s.extra)
    # sbatch reads #SBATCH lines without a shell: quote only what needs it (a path with a space).
    return [f"#SBATCH {quote(d) if any(c.isspace() for c in d) else d}" for d in out]


def _trial_cases(trials: list[tuple[str, ...]]) -> list[str]:
    lines = ['case "$SLURM_ARRAY_TASK_ID" in']
    for i, args in enumerate(trials):
        lines.append(f"  {i}) trial_args=({' '.join(quote(a) for a in args)}) ;;")
    lines += ['  *) echo "cockpit: unexpected array task $SLURM_ARRAY_TASK_ID" >&2; exit 2 ;;', "esac",
              'COCKPIT_RUN_DIR="$COCKPIT_RUN_DIR/trial-$SLURM_ARRAY_TASK_ID"',
              'echo "cockpit: trial $SLURM_ARRAY_TASK_ID: ${trial_args[*]}"']
    return lines


def _attempt() -> list[str]:
    """Announce this attempt. A start that Slurm requeued (SLURM_RESTART_COUNT > 0: a node set DOWN, `scontrol
    requeue`, the job's own requeue) is an attempt of the run's own: COCKPIT_ATTEMPT is the submission's number
    plus the restarts (a relaunch by recover: submits with the next one), the previous attempt's rank exit
    records go to logs/attempt-<N-1>/ and every rank log gets the attempt's marker line, as a relaunch's
    (cockpit.launch.attempt_files); the supervisor reads the start line into the run's attempts."""
    mark = (f"{contract.ATTEMPT_MARK}$attempt ({contract.ATTEMPT}=$attempt): requeued by Slurm "
            "(SLURM_RESTART_COUNT=$restarts, job $SLURM_JOB_ID on $SLURM_JOB_NODELIST)")
    return ["restarts=${SLURM_RESTART_COUNT:-0}",
            f"attempt=$(( ${{{contract.ATTEMPT}:-0}} + restarts ))",
            f'echo "{START_MARK}$restarts job=$SLURM_JOB_ID nodes=$SLURM_JOB_NODELIST '
            'master=$MASTER_ADDR:$MASTER_PORT time=$(date +%s)"',
            'if [ "$restarts" -gt 0 ]; then',
            f"  export {contract.ATTEMPT}=$attempt",
            '  previous="$COCKPIT_RUN_DIR/logs/attempt-$((attempt - 1))"',
            '  mkdir -p "$previous"',
            '  for f in "$COCKPIT_RUN_DIR"/logs/rank-*.exit; do',
            '    if [ -e "$f" ]; then mv "$f" "$previous/"; fi',
            "  done",
            '  for f in "$COCKPIT_RUN_DIR"/logs/rank-*.log; do',
            f'    if [ -f "$f" ] && [ ! -L "$f" ]; then echo "{mark}" >>"$f"; fi',
            "  done", "fi"]


def _wrapper() -> list[str]:
    return ["# Each task runs under this wrapper: its own log file (global rank, node) and exit record.",
            f"cat >{_WRAPPER_FILE} <<'COCKPIT_RANK_WRAPPER'", *wrapper(forward=False).rstrip("\n").split("\n"),
            "COCKPIT_RANK_WRAPPER"]


def _signal_forwarding() -> list[str]:
    # With --signal=B:USR1@N only this batch shell gets USR1; bash runs a trap only when `wait` returns, so
    # srun runs in the background and the trap passes the signal on to every task of the step. A USR1 after
    # srun has ended must not fail the trap: under `set -e` that would end the batch shell with status 1.
    return ["srun_pid=", "# shellcheck disable=SC2317  # called by the trap",
            'forward_usr1() { echo "cockpit: USR1 (time limit near): asking the ranks to checkpoint" >&2;',
            '  if [ -n "$srun_pid" ]; then kill -USR1 "$srun_pid" 2>/dev/null || true; fi; }',
            "trap forward_usr1 USR1"]


def _preflight(spec: JobSpec, facts: Site) -> list[str]:
    """One short srun step, one task per node (cockpit.node.nodecheck), then the judge (cockpit.node.nodejudge)
    in this shell: a bad node is named in this log and the script exits PREFLIGHT_EXIT before training."""
    py, hook = quote(facts.python), f"$COCKPIT_RUN_DIR/{layout.HOOK}"
    gpus = " ".join(_gpu_option(spec))
    every_node = f"--nodes={spec.num_nodes} --ntasks={spec.num_nodes}"
    step = [f"timeout {PREFLIGHT_STEP_SECONDS} srun {every_node}",
            "--ntasks-per-node=1 --kill-on-bad-exit=1" + (f" {gpus}" if gpus else ""),
            '--output="$preflight/%N.out" --error="$preflight/%N.out"',
            f'{py} -u "{hook}/{layout.NODECHECK}" --dir="$preflight" --master="$MASTER_ADDR" --port="$preflight_port"',
            f"--backend={spec.dist_backend} --timeout={PREFLIGHT_RENDEZVOUS_SECONDS} || true"]
    judge = [f'{py} "{hook}/{layout.NODEJUDGE}" --dir="$preflight" --nodes="$preflight_nodes"',
             f'--gpus={spec.gpus_per_node or 0} --started="$preflight_started"',
             f"--on-bad={'exclude' if spec.slurm.exclude_bad_nodes else 'fail'} || exit $?"]
    return ["# Preflight inside the allocation (slurm.preflight: false skips it): each node reports its facts and",
            "# joins a tiny all-reduce; a bad node is named here and the job exits before training starts.",
            f'preflight="$COCKPIT_RUN_DIR/{layout.PREFLIGHT_DIR}/$SLURM_JOB_ID"', 'mkdir -p "$preflight"',
            'rm -f "$preflight"/*.json', "preflight_nodes=${hosts//$'\\n'/ }", "preflight_started=$(date +%s.%N)",
            f"preflight_port=$({py} -c {quote(_FREE_PORT)})",
            command(step), command(judge)]


def sbatch_script(spec: JobSpec, facts: Site) -> str:
    """The whole batch script for ``spec`` (a job array when it has a sweep)."""
    trials = spec.sweep.trials() if spec.sweep else []
    lines = ["#!/bin/bash", *sbatch_directives(spec, facts, len(trials)),
             f'# cockpit: job "{spec.name}", run {facts.run_id}', "set -euo pipefail"]
    lines += [f"module load {quote(m)}" for m in spec.slurm.modules]
    if spec.slurm.setup:
        # The user's own shell lines, verbatim. Environment scripts (conda activate, spack) read unset
        # variables, so `set -u` is off while they run.
        lines += ["set +u", "# shellcheck disable=SC1090,SC1091  # sourced files are the cluster's", "{",
                  *(f"  {line}" for line in spec.slurm.setup), "}", "set -u"]
    lines.append(f"cd {quote(facts.workdir)}")
    env = [*device_env(spec), ("PYTHONUNBUFFERED", "1")]
    env += [(k, v) for k, v in contract_env(spec, facts, "slurm") if k != "COCKPIT_HOST"] + list(spec.env)
    lines += [export(k, v) for k, v in env]
    if spec.recover.enabled:  # 0 at the first submission; a relaunch (recover:) submits with the next number
        lines.append(f'export {contract.ATTEMPT}="${{{contract.ATTEMPT}:-0}}"')
    if spec.runner == "spawn":
        nprocs = spawns(spec)
        lines += [export(k, str(v)) for k, v in (("COCKPIT_SPAWNS", nprocs), ("NNODES", spec.num_nodes), (
            "WORLD_SIZE", nprocs * spec.num_nodes), ("LOCAL_WORLD_SIZE", nprocs))]
    if trials:
        lines += _trial_cases(trials)
    master_port = str(facts.master_port) if spec.master_port else _PORT_FROM_JOB_ID
    # Not `| head -n 1`: with pipefail, head leaving early can fail the script with SIGPIPE on big jobs.
    lines += ['hosts=$(scontrol show hostnames "$SLURM_JOB_NODELIST")', "MASTER_ADDR=${hosts%%$'\\n'*}",
              f"MASTER_PORT={master_port}", "export MASTER_ADDR MASTER_PORT COCKPIT_RUN_DIR",
              'mkdir -p "$COCKPIT_RUN_DIR/logs"', *_attempt(), *_wrapper()]
    if spec.slurm.preflight:
        lines += _preflight(spec, facts)
    program = program_words(spec, facts, quote) + (['"${trial_args[@]}"'] if trials else [])
    task_out = '"$COCKPIT_RUN_DIR/logs/srun-%t.%N.out"'
    words = ["srun --kill-on-bad-exit=1", f"--output={task_out}", f"--error={task_out}"]
    if spec.slurm.cpus_per_task:
        # srun 22.05-23.02 does not take --cpus-per-task from the allocation: without it each task gets one.
        words.append(f"--cpus-per-task={spec.slurm.cpus_per_task}")
    words += [f"bash -c {_SPAWN_SHIM if spec.runner == 'spawn' else _TASK_SHIM}", " ".join(program)]
    if spec.slurm.requeue:
        lines += _signal_forwarding()
        lines += [_SC2016, command(words) + " &", "srun_pid=$!",
                  "# wait returns early when USR1 arrives; keep waiting for the step to end.",
                  'while true; do wait "$srun_pid" && status=0 || status=$?',
                  '  kill -0 "$srun_pid" 2>/dev/null || break; done', 'exit "$status"']
    else:
        lines += [_SC2016, "exec " + command(words)]
    return "\n".join(lines) + "\n"
