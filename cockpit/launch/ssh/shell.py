"""The shell the ssh launcher runs on nodes, as pure functions of their inputs (so they can be read, tested
and shellchecked): start a node's script detached, stop a run's processes, run the node agent.

Why the start looks like this: a torchrun started over SSH dies with the connection (without a PTY of
BrokenPipe at its next print, with one of SIGHUP), so the node script runs under ``setsid`` with its output
in a file and stdin from /dev/null. A small launch shell around it writes the script's exit status and
time to ``logs/agent.HOST.exit`` (torchrun has no other record of how it ended); that shell does not carry
COCKPIT_RUN_ID (the script exports it), so stopping the run's processes leaves it to write the record.

Why the stop looks like this: torchrun starts each worker in a session of its own and a torchrun waiting
in its exit barrier ignores SIGTERM for 300 s, so neither a process group nor torchrun alone is enough.
Every process of the run carries COCKPIT_RUN_ID in its environment: one grep over /proc/*/environ finds
them all (no cockpit needed on the node), SIGTERM, and SIGKILL for what is left after the grace period.
"""

from __future__ import annotations

import ast
import base64
import functools
import json
import shlex
from pathlib import Path

from cockpit import contract
from cockpit.launch import procs
from cockpit.render.site import log_safe
from cockpit.run import layout


def agent_exit_file(run_dir: str, host: str) -> str:
    return f"{run_dir}/{layout.LOGS}/{layout.agent_exit_name(log_safe(host))}"


def start_script(run_dir: str, host: str, node_rank: int, script_text: str | None, attempt: int = 0) -> str:
    """Make the run directory, write the node script (unless it is already there: ``script_text`` None,
    a shared filesystem), start it detached with COCKPIT_ATTEMPT=``attempt`` (recover:; nothing crosses SSH by
    itself), print "PID START_TICKS".

    Run it as `sh -s` with this text on stdin (remote.run's ``input``), never in an argument list: the node
    script holds the job's env values (API keys), and any user's `ps` shows arguments. ``umask 077``: the
    run directory, the script and everything the run writes there are its owner's only."""
    q = shlex.quote
    safe = log_safe(host)
    script = layout.node_script_name(node_rank)
    log, end = f"{layout.LOGS}/{layout.agent_log_name(safe)}", f"{layout.LOGS}/{layout.agent_exit_name(safe)}"
    lines = ["set -e", "umask 077", f"mkdir -p {q(run_dir)}/{layout.LOGS} {q(run_dir)}/{layout.COMMANDS}",
             f"cd {q(run_dir)}"]
    if script_text is not None:  # not shared: the node script, and the rank hook it puts on PYTHONPATH
        blob = base64.b64encode(script_text.encode()).decode()
        lines.append(f"printf '%s' {blob} | base64 -d > {script}")
        lines.append(f"mkdir -p {layout.HOOK}")
        for name, source in layout.HOOK_FILES:
            blob = base64.b64encode((Path(__file__).parents[2] / "node" / source).read_bytes()).decode()
            lines.append(f"printf '%s' {blob} | base64 -d > {layout.HOOK}/{name}")
    launch = (f"{contract.ATTEMPT}={int(attempt)} bash {script}; s=$?; "
              f"printf '%s %s\\n' \"$s\" \"$(date +%s.%N)\" > {end}")
    lines += [f"rm -f {end}",
              f"setsid sh -c {q(launch)} > {log} 2>&1 < /dev/null &",
              "pid=$!",
              'echo "$pid $(cut -d" " -f22 /proc/$pid/stat 2>/dev/null || echo -)"']
    return "\n".join(lines)


def parse_started(stdout: str) -> tuple[int, str | None]:
    """`PID START_TICKS` -> (pid, start ticks or None)."""
    words = stdout.strip().split()
    if not words or not words[0].isdigit():
        raise ValueError(f"expected 'PID START' from the start script, got {stdout.strip()[:200]!r}")
    start = words[1] if len(words) > 1 and words[1].isdigit() else None
    return int(words[0]), start


def stop_script(run_id: str, grace: float, signal: str = "TERM") -> str:
    """Signal every process of the run on this node, SIGKILL what is left after ``grace`` seconds.
    Prints "FOUND KILLED LEFT [PID:NAME ...]" (processes found, needing SIGKILL, still there at the end,
    and which those are)."""
    needle = shlex.quote(f"{contract.RUN_ID}={run_id}")
    ticks = max(0, int(grace * 10))
    return "\n".join([
        f"pids() {{ grep -lxzF {needle} /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | grep -vx \"$$\"; }}",
        "found=$(pids); n=$(echo $found | wc -w); killed=0",
        *(_first_term() if signal == "TERM" else ["first=$found"]),
        f'[ -n "$first" ] && kill -{signal} $first 2>/dev/null',
        "left=$found; t=0",
        f'while [ -n "$left" ] && [ "$t" -lt {ticks} ]; do sleep 0.1; t=$((t+1)); left=$(pids); done',
        # the ranks first, so that their wrappers (which outlive SIGTERM) still record how they ended, then
        # what is left once no wrapper is (procs.kill_run)
        'wrapper() { grep -qaF /rank-wrapper. /proc/"$1"/cmdline 2>/dev/null; }',
        'if [ -n "$left" ]; then',
        '  work=""; for p in $left; do wrapper "$p" || work="$work $p"; done',
        '  killed=$(echo $work | wc -w); [ -n "$work" ] && kill -KILL $work 2>/dev/null',
        f'  t=0; while [ "$t" -lt {int(procs.WRAPPER_GRACE_S * 10)} ]; do',
        '    w=""; for p in $(pids); do wrapper "$p" && w=1; done',
        '    [ -n "$w" ] || break; sleep 0.1; t=$((t+1))',
        '  done; left=$(pids)',
        '  if [ -n "$left" ]; then',
        '    killed=$((killed + $(echo $left | wc -w))); kill -KILL $left 2>/dev/null; sleep 0.2',
        '  fi',
        'fi',
        'left=$(pids); names=""',
        'for p in $left; do names="$names $p:$(tr -c \'[:alnum:]._\\n-\' _ < /proc/"$p"/comm 2>/dev/null)"; done',
        'echo "$n $killed $(echo $left | wc -w)$names"',
    ])


def _first_term() -> list[str]:
    """$first: the processes to SIGTERM so each rank gets it once (cockpit.launch.procs.first_term): not a rank
    wrapper whose torchrun is in the run (torchrun signals its worker's group), nor that wrapper's rank."""
    ppid = 'pp=$(cut -d" " -f4 /proc/"$p"/stat 2>/dev/null)'
    return ['all=" $(printf \'%s \' $found)"; relayed=" "',
            f'for p in $found; do {ppid}; case "$all" in *" $pp "*)',
            '  if grep -qaF /rank-wrapper. /proc/"$p"/cmdline 2>/dev/null; then relayed="$relayed$p "; fi ;;',
            "  esac; done",
            f'first=""; for p in $found; do {ppid}; case "$relayed" in *" $p "*|*" $pp "*) ;; *) first="$first $p" ;;',
            '  esac; done']


def list_script(run_id: str) -> str:
    """Print the pids of the run's live processes on this node, one a line."""
    needle = shlex.quote(f"{contract.RUN_ID}={run_id}")
    return f"grep -lxzF {needle} /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | grep -vx \"$$\" || true"


def agent_command(python: str, command: str, args: dict) -> str:
    """`PYTHON -c AGENT_SOURCE COMMAND JSON`, the interpreter quoted as the node script quotes it."""
    return f"{shlex.quote(python)} -c {shlex.quote(agent_source())} {command} {shlex.quote(json.dumps(args))}"


@functools.cache
def agent_source() -> str:
    """The node agent as one self-contained program: cockpit/node/agent.py with its imports of cockpit modules
    (stdlib-only ones: cockpit.node.ifaces) replaced by their code, so a node without cockpit runs it and the
    agent reads what the probe reads the same way. Raises RuntimeError if the result would still import
    cockpit or would redefine a name of the agent's (a module grown past what inlining can carry). Built once
    per process: parsing takes ~15 ms, and a launch sends the agent once per node and command."""
    root = Path(__file__).parents[3]  # the directory that holds the cockpit package
    lines = (root / "cockpit" / "node" / "agent.py").read_text(encoding="utf-8").splitlines(keepends=True)
    agent_names = _top_level_names("".join(lines))
    for imp in sorted(_cockpit_imports("".join(lines)), key=lambda i: i.lineno, reverse=True):
        module = root.joinpath(*(imp.module or "").split(".")).with_suffix(".py").read_text(encoding="utf-8")
        clash = (agent_names - {a.asname or a.name for a in imp.names}) & _top_level_names(module)
        if clash:
            raise RuntimeError(f"cannot inline {imp.module} into the node agent: both define {sorted(clash)}")
        lines[imp.lineno - 1:imp.end_lineno] = [_body(module)]
    source = "".join(lines)
    if _cockpit_imports(source):
        raise RuntimeError(f"the node agent still imports cockpit after inlining: {_cockpit_imports(source)[0].module}")
    return source


def _cockpit_imports(source: str) -> list[ast.ImportFrom]:
    found = [n for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.Import, ast.ImportFrom))]
    if any(isinstance(n, ast.Import) and any(a.name.split(".")[0] == "cockpit" for a in n.names) for n in found):
        raise RuntimeError("the node agent may import cockpit modules only as `from cockpit.x import name`")
    return [n for n in found if isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "cockpit"]


def _top_level_names(source: str) -> set[str]:
    names = set()
    for n in ast.parse(source).body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.Assign):
            names |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        elif isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "cockpit":
            names |= {a.asname or a.name for a in n.names}
    return names


def _body(module: str) -> str:
    """A module's code without its docstring and ``from __future__`` line (the agent has its own at the top,
    where Python requires it)."""
    tree = ast.parse(module)
    head = [n for n in tree.body[:2] if isinstance(n, ast.Expr) or
            (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
    start = max((n.end_lineno or 0 for n in head), default=0)  # ast.parse sets end_lineno
    return "".join(module.splitlines(keepends=True)[start:]).strip("\n") + "\n"
