"""The rank wrapper: a few lines of bash that torchrun starts for each rank instead of Python directly.

It gives every rank its own log file named by global rank and host (torchrun's --log-dir layout numbers by
local rank and changes between torch versions), passes signals on to the rank, and records how the rank
ended (exit status and time) next to its log, so cockpit can name the first failing rank even when it was
not watching. It records the rank's pid (for stacks and process state) and puts cockpit's rank-side hook
(cockpit.node.rankhook, installed as <run>/hook/sitecustomize.py) first on the rank's PYTHONPATH.
The node script writes it into the run directory with a quoted heredoc (nothing expands).
"""

from __future__ import annotations

WRAPPER_PATH = '"$COCKPIT_RUN_DIR/rank-wrapper.$COCKPIT_HOST.sh"'

WRAPPER = r"""#!/usr/bin/env bash
# cockpit rank wrapper: "$@" is the rank's program. Output -> logs/rank-R.HOST.log; end -> rank-R.HOST.exit
rank="${RANK:-0}"
base="$COCKPIT_RUN_DIR/logs/rank-$rank.$COCKPIT_HOST"
if [ -f "$COCKPIT_RUN_DIR/hook/sitecustomize.py" ]; then
  export PYTHONPATH="$COCKPIT_RUN_DIR/hook${PYTHONPATH:+:$PYTHONPATH}" COCKPIT_WRAPPER_PID=$$
fi
"$@" >>"$base.log" 2>&1 &
child=$!
echo "$child" >"$base.pid"
for sig in TERM HUP USR1 USR2; do
  # shellcheck disable=SC2064  # expand $sig now, $child too: both are fixed for this trap
  trap "kill -$sig $child 2>/dev/null" "$sig"
done
# wait returns early when a trapped signal arrives; keep waiting until the rank has really ended. The end's
# time is read at once, without a fork (bash 5's EPOCHREALTIME): the first failure is named by these times.
LC_NUMERIC=C
while :; do
  wait "$child"; status=$?; ended=${EPOCHREALTIME:-}
  kill -0 "$child" 2>/dev/null || break
done
ended=${ended/,/.}
printf '%s %s\n' "$status" "${ended:-$(date +%s.%N)}" >"$base.exit"
exit "$status"
"""


# runner: spawn has no wrapper (the script's own processes are the ranks): the node script puts the hook first
# on the script's PYTHONPATH itself, and the hook gives each spawned rank its files.
HOOK_PATH_LINES = ['if [ -f "$COCKPIT_RUN_DIR/hook/sitecustomize.py" ]; then',
                   '  export PYTHONPATH="$COCKPIT_RUN_DIR/hook${PYTHONPATH:+:$PYTHONPATH}"', "fi"]


def write_wrapper_lines() -> list[str]:
    """Shell lines that write the wrapper into the run directory."""
    return [f"cat >{WRAPPER_PATH} <<'COCKPIT_RANK_WRAPPER'", *WRAPPER.rstrip("\n").split("\n"),
            "COCKPIT_RANK_WRAPPER"]
