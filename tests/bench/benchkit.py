"""What the speed benches (issue 29's rows) share: alternated arms, median [min-max], ratios to an anchor, the
issue's goal printed beside each figure, a child process measured from outside (wall, CPU, peak RSS), the
machine's load with every figure, and one ``--json`` shape a script can check goals by:

    {"bench": "...", "command": "...", "load": {"before": x, "after": y},
     "figures": {name: value, ...},
     "goals": {name: {"goal": "<= 3x the loop", "figure": 5.0, "met": false}, ...},
     "goals_met": false}

Imported by tests/bench/bench_*.py (not a bench itself: the smoke test runs ``bench_*.py`` only); stdlib only.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load() -> float:
    """The 1-minute load average (2 cores here: below 1.0 is quiet)."""
    return round(os.getloadavg()[0], 2)


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def spread(values: list[float], fmt: str = "{:.3f}", scale: float = 1.0) -> str:
    """``median [min-max]`` of ``values`` times ``scale``."""
    v = [x * scale for x in values]
    return f"{fmt.format(statistics.median(v))} [{fmt.format(min(v))}-{fmt.format(max(v))}]"


def alternated(arms: dict[str, Callable[[], dict]], runs: int, warmup: int = 1) -> dict[str, list[dict]]:
    """Run every arm ``runs`` times, run by run, the order reversed every other run (A B, B A, ...) so that
    drift in the machine's load hits every arm alike; ``warmup`` unrecorded rounds first (page cache,
    imports). Each call returns a dict of figures for that run."""
    names = list(arms)
    for _ in range(warmup):
        for name in names:
            arms[name]()
    out: dict[str, list[dict]] = {name: [] for name in names}
    for i in range(runs):
        for name in names if i % 2 == 0 else reversed(names):
            out[name].append(arms[name]())
    return out


@dataclass(frozen=True)
class Child:
    """One finished child process, measured from outside: wall seconds, CPU seconds (user + sys) and peak
    RSS (ru_maxrss of that process alone, from wait4), its exit status and output."""

    wall: float
    cpu: float
    peak_rss_mb: float
    returncode: int
    stdout: bytes = b""
    stderr: bytes = b""


# The child is started by a small launcher, not by this process: Linux carries the peak RSS of the process
# that forks into the child's ru_maxrss (exec keeps the larger of the two), so a bench that had read a 138 MB
# file would see every child's peak as >= 138 MB. The launcher (python -I -S, ~9 MB) spawns the command,
# times it from spawn to exit, and writes its wait4 account: the floor under a child's peak is the
# launcher's few MB, below any Python process' own.
LAUNCHER = """import os, sys, time
out, argv = sys.argv[1], sys.argv[2:]
start = time.perf_counter()
pid = os.posix_spawnp(argv[0], argv, os.environ)
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - start
with open(out, "w") as f:
    f.write(f"{wall} {ru.ru_utime + ru.ru_stime} {ru.ru_maxrss} {os.waitstatus_to_exitcode(status)}")
"""


def run_child(argv: list[str], *, env: dict | None = None, cwd: Path | None = None, capture: bool = False,
              timeout: float = 600.0, check: bool = True) -> Child:
    """Run ``argv`` to its end; stdout and stderr go to /dev/null unless ``capture``. Its wall time, CPU and
    peak RSS are the kernel's account for that one process (wait4 in the launcher), not this one's."""
    with tempfile.TemporaryDirectory(prefix="bench-child-") as tmp, \
            open(Path(tmp) / "out", "w+b") as out, open(Path(tmp) / "err", "w+b") as err:
        result = Path(tmp) / "rusage"
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", LAUNCHER, str(result), *argv], env=env,
                                cwd=cwd or ROOT, stdin=subprocess.DEVNULL, start_new_session=True,
                                stdout=out if capture else subprocess.DEVNULL,
                                stderr=err if capture else subprocess.DEVNULL)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            raise TimeoutError(f"{shlex.join(argv)}: still running after {timeout:.0f} s") from None
        if proc.returncode != 0 or not result.exists():
            raise RuntimeError(f"{shlex.join(argv)}: the launcher failed (exit {proc.returncode}; not on PATH?)")
        wall, cpu, rss, code = result.read_text().split()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    child = Child(float(wall), float(cpu), int(rss) / 1024, int(code), stdout, stderr)
    if check and child.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} exited {child.returncode}:\n"
                           f"{(stdout + stderr).decode(errors='replace')[-3000:]}")
    return child


CPU_CGROUP = Path("/sys/fs/cgroup/cpu")  # cgroup v1's cpu controller, where this machine mounts it


@contextlib.contextmanager
def cpu_first(shares: int = 262144) -> Iterator[bool]:
    """This process, and every process it starts from now on, in a cpu cgroup of its own with the most
    ``cpu.shares`` (262,144 against 1,024 for each other group): whatever else runs on the machine gets about 1%
    of a core it would take from the bench while the bench wants it, and nothing while the bench waits. For a
    bench comparing two arms of the same work (the hook's cost) on a shared machine, where the other tenants'
    load changed samples/s by 2x between rounds. Both arms are inside alike. Yields False where no cgroup
    can be made (not root, no cgroup v1 cpu controller, cgroup v2 only): the bench runs as before."""
    group = CPU_CGROUP / f"cockpit-bench-{os.getpid()}"
    try:
        group.mkdir()
        (group / "cpu.shares").write_text(str(shares))
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        if group.is_dir():
            group.rmdir()
        yield False
        return
    try:
        yield True
    finally:
        (CPU_CGROUP / "cgroup.procs").write_text(str(os.getpid()))
        with contextlib.suppress(OSError):  # a process started inside still alive: the group stays, harmless
            group.rmdir()


def self_peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cockpit_env(**extra: str) -> dict[str, str]:
    """This checkout's cockpit first on the path, no COCKPIT_* of the caller's, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COCKPIT_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env.update(extra)
    return env


def with_bytecode(env: dict[str, str]) -> dict[str, str]:
    """``env`` with Python's bytecode cache on, in a directory of its own under the temp dir (not in the checkout):
    a user's cockpit (pip install, or an editable one used before) starts from compiled modules, like the
    standard library `python -c pass` is measured with. With PYTHONDONTWRITEBYTECODE set (as this machine's
    shells have it), every start would compile each of cockpit's modules from source again: +60% of the
    instructions of `cockpit validate`. The first, unrecorded, round of a bench writes the cache."""
    out = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / f"cockpit-bench-pycache-{os.getuid()}")
    return out


def cockpit_argv(*args: str) -> list[str]:
    """`cockpit ARGS` as a user runs it: the console script beside this interpreter (a virtual environment's
    bin/; not a shim such as pyenv's, whose own start would be measured too), else ``python -m cockpit``."""
    exe = Path(sys.executable).with_name("cockpit")
    return [str(exe), *args] if exe.is_file() else [sys.executable, "-m", "cockpit", *args]


@dataclass
class Report:
    """The figures, goals and loads of one bench run; printed as text or as the one JSON shape."""

    bench: str
    figures: dict = field(default_factory=dict)
    goals: dict = field(default_factory=dict)
    load_before: float = field(default_factory=load)

    def figure(self, name: str, value) -> None:
        self.figures[name] = value

    def goal(self, name: str, text: str, figure, met: bool | None) -> str:
        """Record a goal with its figure; returns the words to print beside it ("goal ...: met"/"NOT met";
        None: not measured)."""
        self.goals[name] = {"goal": text, "figure": figure, "met": met}
        verdict = "n/a" if met is None else "met" if met else "NOT met"
        return f"goal {text}: {verdict}"

    def as_dict(self) -> dict:
        met = [g["met"] for g in self.goals.values() if g["met"] is not None]
        return {"bench": self.bench, "command": shlex.join([Path(sys.executable).name, *sys.argv]),
                "python": sys.version.split()[0], "cores": os.cpu_count(),
                "load": {"before": self.load_before, "after": load()},
                "figures": self.figures, "goals": self.goals, "goals_met": bool(met) and all(met)}

    def dump(self, path: str | None) -> None:
        """``--json PATH`` writes the report there; ``--json -`` prints it on stdout."""
        if path is None:
            return
        text = json.dumps(self.as_dict(), indent=2)
        if path == "-":
            print(text)
        else:
            Path(path).write_text(text + "\n")
            print(f"json: {path}")


def cprofile_top(cockpit_args: list[str], top: int = 15, env: dict | None = None) -> str:
    """One run of `python -m cockpit ARGS` under cProfile (its output to /dev/null): the ``top`` functions by
    own time and by cumulative time, as text. cProfile adds a cost per call, so small functions called per
    line weigh more than they do without it: a sampler (py-spy) tells their share more exactly."""
    import io
    import pstats

    with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp:
        out = Path(tmp) / "run.prof"
        run_child([sys.executable, "-m", "cProfile", "-o", str(out), "-m", "cockpit", *cockpit_args],
                  env=env or cockpit_env(), check=False)
        text = io.StringIO()
        stats = pstats.Stats(str(out), stream=text)
        stats.strip_dirs()
        stats.sort_stats("tottime").print_stats(top)
        stats.sort_stats("cumulative").print_stats(top)
    keep = [line for line in text.getvalue().splitlines()
            if line.strip() and not line.startswith(("   Random listing", "   List reduced"))]
    return "\n".join(keep)


def importtime_top(argv: list[str], runs: int = 5, top: int = 12, env: dict | None = None) -> str:
    """`python -X importtime` of ``argv`` (a Python command line without the interpreter) ``runs`` times: the
    median cumulative ms of the ``top`` slowest imports, each with its depth in the import tree (0: imported
    by the command itself), and the median of all imports' own times summed."""
    import re

    found: dict[str, list[int]] = {}
    depth: dict[str, int] = {}
    totals = []
    for _ in range(runs):
        err = run_child([sys.executable, "-X", "importtime", *argv], env=env or cockpit_env(), capture=True,
                        check=False).stderr.decode(errors="replace")
        total = 0
        for m in re.finditer(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", err):
            total += int(m[1])
            found.setdefault(m[4], []).append(int(m[2]))
            depth[m[4]] = len(m[3]) // 2
        totals.append(total)
    rows = sorted(((median(v), k) for k, v in found.items()), reverse=True)[:top]
    lines = [f"  all imports' own times summed: {median(totals) / 1000:.0f} ms (median of {runs})"]
    lines += [f"  {us / 1000:7.1f} ms  {'  ' * depth[name]}{name}" for us, name in rows]
    return "\n".join(lines)
