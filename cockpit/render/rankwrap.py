"""The rank wrapper: a few lines of bash that torchrun starts for each rank instead of Python directly.

It gives every rank its own log file named by global rank and host (torchrun's --log-dir layout numbers by
local rank and changes between torch versions), passes signals on to the rank, and records how the rank
ended (exit status and time; after a SIGKILL also the node's count of OOM kills) next to its log, so cockpit
can name the first failing rank even when it was not watching, and tell the OOM killer from another SIGKILL.
It records the rank's pid (for stacks and process state) and puts cockpit's rank-side hook
(cockpit.node.rankhook, installed as <run>/hook/sitecustomize.py) first on the rank's PYTHONPATH.
The node script writes it into the run directory with a quoted heredoc (nothing expands).

Under torchrun the wrapper passes TERM, HUP, USR1 and USR2 on to its rank only where torchrun signals the
wrapper alone (torch 1.x); torchrun 2.x starts each worker in its own session and signals the whole group, the
rank included, so the wrapper, leading its group, passes nothing on.
Under srun it must not (``wrapper(forward=False)``, the sbatch form): slurmstepd signals
every process of the step (srun's forwarded USR1, scancel, the time limit), the rank included, so a signal
passed on arrives twice, and a handler that acts on each one, like Lightning's SIGUSR1 auto-requeue (a
checkpoint, then ``scontrol requeue`` on rank 0), acts twice.
Its traps are set before the rank starts: a stop that lands in between is remembered and passed on once the
rank exists, instead of ending the wrapper alone (the rank left running, reparented to init, no exit record).
"""

from __future__ import annotations

WRAPPER_PATH = '"$COCKPIT_RUN_DIR/rank-wrapper.$COCKPIT_HOST.sh"'

_TEMPLATE = r"""#!/usr/bin/env bash
# cockpit rank wrapper: "$@" is the rank's program. Output -> logs/rank-R.HOST.log; end -> rank-R.HOST.exit
rank="${RANK:-0}"
base="$COCKPIT_RUN_DIR/logs/rank-$rank.$COCKPIT_HOST"
if [ -f "$COCKPIT_RUN_DIR/hook/sitecustomize.py" ]; then
  export PYTHONPATH="$COCKPIT_RUN_DIR/hook${PYTHONPATH:+:$PYTHONPATH}" COCKPIT_WRAPPER_PID=$$
fi
# Until the traps below are set, a stop is only remembered: by default it would end the wrapper alone,
# leaving the rank running with no exit record.
pending='' forwarding=''
for sig in TERM HUP USR1 USR2; do
  # shellcheck disable=SC2064  # expand $sig now: each trap remembers its own signal
  trap "pending=\${pending:-$sig}" "$sig"
done
# torchrun restarted the workers (max_restarts): the ended round's exit record goes to logs/restart-<K>/, so that
# logs/ holds this round's alone and the supervisor can tell what torchrun restarted from.
restart="${TORCHELASTIC_RESTART_COUNT:-0}"
if [ "$restart" -gt 0 ] 2>/dev/null && [ -f "$base.exit" ]; then
  aside="$COCKPIT_RUN_DIR/logs/restart-$((restart - 1))"
  mkdir -p "$aside" && mv -f "$base.exit" "$aside/"
fi
"$@" >>"$base.log" 2>&1 &
child=$!
echo "$child" >"$base.pid"
@SIGNALS@
# A stop that came before these traps is passed on now. USR1/USR2 only where the wrapper forwards (torch 1.x):
# elsewhere a rank that existed got it itself, and one that did not has no handler yet (it would die of it).
case "$pending" in
  TERM|HUP) kill -"$pending" "$child" 2>/dev/null ;;
  USR1|USR2) [ "$forwarding" = 1 ] && kill -"$pending" "$child" 2>/dev/null ;;
esac
# wait returns early when a trapped signal arrives; keep waiting until the rank has really ended. The end's
# time is read at once, without a fork (bash 5's EPOCHREALTIME): the first failure is named by these times.
LC_NUMERIC=C
while :; do
  wait "$child"; status=$?; ended=${EPOCHREALTIME:-}
  kill -0 "$child" 2>/dev/null || break
done
ended=${ended/,/.}
# Killed by SIGKILL: the node's count of OOM kills now (/proc/vmstat, read without a fork), a third field.
# Above the count in the rank's last beat, the kernel's OOM killer ended it (cockpit.launch.memblame).
oomk=''
if [ "$status" = 137 ] && [ -r /proc/vmstat ]; then
  while read -r key value; do
    if [ "$key" = oom_kill ]; then oomk=" $value"; break; fi
  done </proc/vmstat
fi
printf '%s %s%s\n' "$status" "${ended:-$(date +%s.%N)}" "$oomk" >"$base.exit"
exit "$status"
"""
_FORWARD = r"""# torchrun 2.x starts each worker in its own session and signals its whole group (os.killpg): the
# rank gets the signal itself, and a copy passed on would be a second. Older torchrun signals the wrapper alone.
read -r -a stat 2>/dev/null </proc/$$/stat
if [ "${stat[4]:-}" = "$$" ]; then
  for sig in TERM HUP USR1 USR2; do trap '' "$sig"; done
else
  forwarding=1
  for sig in TERM HUP USR1 USR2; do
    # shellcheck disable=SC2064  # expand $sig now, $child too: both are fixed for this trap
    trap "kill -$sig $child 2>/dev/null" "$sig"
  done
fi"""
# Ignored (`trap ''`), not a no-op trap: a trapped signal ends bash's `wait`, and when it lands as the rank dies,
# bash has reaped the rank and lost its status (the record said 143 for a rank killed by SIGKILL, a third of the
# time). The rank started before these lines, with default dispositions, so it inherits nothing ignored
# (Lightning skips its SIGUSR1 handler when one is already set, SIG_IGN included). Where the wrapper forwards
# (torch 1.x) its traps must run, and that race stays.
_NO_FORWARD = r"""# slurmstepd signals every process of the step, this rank too: passing one on would deliver it twice.
for sig in TERM HUP USR1 USR2; do trap '' "$sig"; done"""


def wrapper(forward: bool = True) -> str:
    """The wrapper's text: passing signals on to the rank (torchrun), or not (srun: the rank gets them)."""
    return _TEMPLATE.replace("@SIGNALS@", _FORWARD if forward else _NO_FORWARD)


WRAPPER = wrapper()  # under torchrun (local and ssh launches)


# runner: spawn has no wrapper (the script's own processes are the ranks): the node script puts the hook first
# on the script's PYTHONPATH itself, and the hook gives each spawned rank its files.
HOOK_PATH_LINES = ['if [ -f "$COCKPIT_RUN_DIR/hook/sitecustomize.py" ]; then',
                   '  export PYTHONPATH="$COCKPIT_RUN_DIR/hook${PYTHONPATH:+:$PYTHONPATH}"', "fi"]


def write_wrapper_lines() -> list[str]:
    """Shell lines that write the wrapper into the run directory."""
    return [f"cat >{WRAPPER_PATH} <<'COCKPIT_RANK_WRAPPER'", *WRAPPER.rstrip("\n").split("\n"),
            "COCKPIT_RANK_WRAPPER"]
