"""Run directories and the registry of runs.

A run directory (mode 0700) holds everything about one launch, so that any cockpit — the one that started
it, a later `cockpit attach`, the TUI — can pick it up from disk alone:

    job.yaml            the job file as given
    commands/           the rendered scripts that ran (node-<n>.sh)
    status.json         state, pids, times, per-rank exits, first failure (written atomically)
    logs/               rank-<R>.<host>.log and .exit per rank, agent.<host>.log (torchrun), supervisor.log
    metrics/            rank-<R>.jsonl, written by cockpit.train
    checkpoints/        written by cockpit.train
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

FINAL_STATES = ("succeeded", "failed", "stopped", "lost")
STATES = ("starting", "running", *FINAL_STATES)
_RANK_FILE = re.compile(r"^rank-(\d+)\.(.+)\.(log|exit|pid|beat|stacks)$")


@dataclass
class RankExit:
    """How one rank ended, as its wrapper recorded it (shell convention: 128+N means signal N)."""

    rank: int
    host: str
    status: int
    time: float

    @property
    def signal(self) -> int | None:
        return self.status - 128 if self.status > 128 else None

    def describe(self) -> str:
        import signal as _signal

        if self.signal is None:
            return f"exit code {self.status}"
        try:
            name = _signal.Signals(self.signal).name
        except ValueError:
            name = f"signal {self.signal}"
        return f"killed by {name} (status {self.status})"


@dataclass
class RunStatus:
    """status.json. Mutable on purpose: the supervisor updates it as the run moves on."""

    run_id: str
    name: str
    launcher: str
    job_file: str
    hosts: list[str]
    world_size: int | None
    state: str = "starting"
    created: float = field(default_factory=time.time)
    started: float | None = None
    ended: float | None = None
    exit_code: int | None = None
    supervisor: dict | None = None  # {"pid": int, "start": str} (start time guards against pid reuse)
    nodes: list[dict] = field(default_factory=list)  # [{"host", "node_rank", "pid", "exit_code"}]
    ranks: dict[str, dict] = field(default_factory=dict)  # rank -> {"host", "status", "signal", "time"}
    first_failure: dict | None = None  # {"rank", "host", "status", "signal", "time", "describe"}
    stop_requested: bool = False
    note: str | None = None  # why a run ended as it did, when cockpit knows more than the exit code
    stall_after: float = 600.0  # the job's stall_after (cockpit run --stall-after): 0 turns the watch off
    on_stall: str = "report"  # "report" | "stop"
    progress: dict[str, dict] = field(default_factory=dict)  # rank -> cockpit.hang.progress record
    findings: list[dict] = field(default_factory=list)  # live findings: stall, stopped, straggler (cockpit.hang)

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> RunStatus:
        data = json.loads(text)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def new_run_id(name: str, now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now if now is not None else time.time()))
    return f"{name}-{stamp}-{secrets.token_hex(2)}"


def create_run_dir(runs_dir: Path, run_id: str) -> Path:
    """Make the run directory (0700; the runs directory too if new). Never reuses an existing one."""
    runs_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    run_dir = runs_dir / run_id
    run_dir.mkdir(mode=0o700)
    for sub in ("commands", "logs"):
        (run_dir / sub).mkdir(mode=0o700)
    install_hook(run_dir)
    return run_dir


def install_hook(run_dir: Path) -> None:
    """The rank-side hook (cockpit.hang.rankhook) as <run>/hook/sitecustomize.py; the rank wrapper puts it
    first on each rank's PYTHONPATH."""
    hook = run_dir / "hook"
    hook.mkdir(mode=0o700, exist_ok=True)
    source = Path(__file__).with_name("hang") / "rankhook.py"
    (hook / "sitecustomize.py").write_text(source.read_text(encoding="utf-8"), encoding="utf-8")


def write_atomic(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_status(run_dir: Path, status: RunStatus) -> None:
    write_atomic(run_dir / "status.json", status.to_json())


def read_status(run_dir: Path) -> RunStatus | None:
    try:
        return RunStatus.from_json((run_dir / "status.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError, TypeError):
        return None


def list_runs(runs_dir: Path) -> list[tuple[Path, RunStatus]]:
    """Every run under ``runs_dir`` with a readable status, oldest first."""
    if not runs_dir.is_dir():
        return []
    found = [(d, read_status(d)) for d in runs_dir.iterdir() if d.is_dir()]
    return sorted(((d, s) for d, s in found if s is not None), key=lambda item: item[1].created)


class RunNotFound(LookupError):
    pass


def resolve_run(runs_dir: Path, ref: str) -> Path:
    """A run directory from a run id, a unique prefix of one, `last`, or a path to a run directory."""
    as_path = Path(ref)
    if (as_path / "status.json").exists():
        return as_path
    runs = list_runs(runs_dir)
    if ref in ("last", "latest"):
        if not runs:
            raise RunNotFound(f"no runs in {runs_dir}")
        return runs[-1][0]
    matches = [d for d, _ in runs if d.name == ref] or [d for d, _ in runs if d.name.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RunNotFound(f"no run {ref!r} in {runs_dir} (hint: cockpit ps lists them)")
    names = ", ".join(m.name for m in matches[:5])
    raise RunNotFound(f"{ref!r} matches {len(matches)} runs: {names} (hint: give more of the id)")


def rank_files(run_dir: Path, suffix: str) -> dict[int, tuple[str, Path]]:
    """rank -> (host, path) for logs/rank-<R>.<host>.<suffix>."""
    out: dict[int, tuple[str, Path]] = {}
    logs = run_dir / "logs"
    if not logs.is_dir():
        return out
    for path in logs.iterdir():
        m = _RANK_FILE.match(path.name)
        if m and m.group(3) == suffix:
            out[int(m.group(1))] = (m.group(2), path)
    return out


def rank_exits(run_dir: Path) -> dict[int, RankExit]:
    out = {}
    for rank, (host, path) in rank_files(run_dir, "exit").items():
        try:
            status_text, when = path.read_text().split()[:2]
            out[rank] = RankExit(rank, host, int(status_text), float(when))
        except (OSError, ValueError):
            continue  # being written right now; the next look will see it whole
    return out


def first_failure(exits: dict[int, RankExit]) -> RankExit | None:
    """The earliest non-zero rank exit: later ones are usually ranks torn down because of it."""
    failed = [e for e in exits.values() if e.status != 0]
    return min(failed, key=lambda e: (e.time, e.rank)) if failed else None
