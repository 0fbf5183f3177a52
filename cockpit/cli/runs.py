"""`cockpit run | attach | logs | ps | stop`: the headless run commands over cockpit.launch and the run
directories. Output: rank lines and summaries on stdout, cockpit's own notices on stderr."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

from cockpit import launch
from cockpit.cli.common import selector
from cockpit.cli.console import Painter, summary, use_color
from cockpit.cli.follow import exit_code, follow
from cockpit.cli.notices import notice
from cockpit.fs.paths import default_runs_dir
from cockpit.launch import registry, supervision
from cockpit.run import layout
from cockpit.run.store import (
    RunNotFound,
    RunStatus,
    StatusError,
    is_sweep,
    load_status,
    rank_files,
    read_status,
    resolve_run,
)
from cockpit.run.trust import own_run


class CommandError(Exception):
    """Bad input for a run command: one clear line, exit 2."""


def runs_dir_of(args) -> Path:
    return Path(args.runs_dir) if getattr(args, "runs_dir", None) else default_runs_dir()


def find(args) -> Path:
    try:
        return resolve_run(runs_dir_of(args), args.run)
    except RunNotFound as exc:
        raise CommandError(str(exc)) from None


def plain_job(args) -> str | None:
    """The Slurm job id when RUN is one ("123", "123_4") that no cockpit run submitted; None for a run (a job
    a cockpit run submitted is shown as that run, with its per-rank logs: said on stderr)."""
    from cockpit.cli.targets import job_target

    job_id, run_dir = job_target(args.run, runs_dir_of(args))
    if run_dir is not None:
        notice(f"Slurm job {job_id} belongs to cockpit run {run_dir.name}: showing the run")
        args.run = str(run_dir)
        return None
    return job_id


def _job_errors(call):
    """A plain job's problem (unknown id, Slurm down) as a CommandError: one line, exit 2."""
    from cockpit.cli.jobs import JobError

    try:
        return call()
    except JobError as exc:
        raise CommandError(str(exc)) from None


def status_of(run_dir: Path):
    """The run's status, or a CommandError saying why there is none to use (exit 2)."""
    try:
        return load_status(run_dir)
    except (FileNotFoundError, NotADirectoryError):
        raise CommandError(f"run {run_dir.name} has no status.json (hint: it is still being created, or "
                           f"{run_dir} is not a run directory)") from None
    except StatusError as exc:
        raise CommandError(f"{exc} (hint: run {run_dir.name} cannot be followed without it; its logs are in "
                           f"{run_dir / 'logs'}, and cockpit ps lists the other runs)") from None


def cmd_run(args, spec, job_path: str) -> int:
    """Launch, then follow as the run's owner. Ctrl-C before the run directory exists ends here (nothing was
    made); after, it is held until the run has started and then counts (cockpit.cli.startup)."""
    from cockpit.cli.startup import StartGuard

    extra = tuple(args.script_args)
    size = spec.world_size  # --rank only chooses what is shown: one the job will not have is a mistake to say now
    if size is not None and (bad := sorted(r for r in set(args.rank or ()) if not 0 <= r < size)):
        has = f"ranks 0-{size - 1}" if size > 1 else "rank 0 only"
        raise CommandError(f"{job_path}: the job has {has}, not rank {', '.join(map(str, bad))} "
                           "(hint: leave out --rank to see every rank)")
    if args.stall_after is not None:
        spec = replace(spec, stall_after=args.stall_after)
    with StartGuard(runs_dir_of(args), spec.name) as guard:
        try:
            run_dir = launch.prepare(spec, job_path, runs_dir_of(args), extra, preflight=not args.no_preflight,
                                     trust_new_hosts=args.trust_new_hosts)
        except launch.Ended as exc:  # ended while sbatch waited: the run is recorded as not submitted
            notice(f"{job_path}: {exc}")
            return exc.exit_code
        except launch.LaunchError as exc:
            raise CommandError(f"{job_path}: {exc}") from None
        except KeyboardInterrupt:
            notice("interrupted before the run was made: nothing was started")
            return 130
        if args.no_preflight:
            for check in _preflight(run_dir, "FAIL"):
                notice(f"preflight (ignored: --no-preflight): {check['name']}: {check['detail']}")
        for check in _preflight(run_dir, "warn"):
            hint = f" (hint: {check['hint']})" if check.get("hint") else ""
            notice(f"warning: {check['name']}: {check['detail']}{hint}")
        try:
            pid = launch.start(run_dir, grace=args.grace)
        except launch.LaunchError as exc:
            raise CommandError(f"{run_dir.name}: {exc}") from None
        if args.detach:
            return _detached(run_dir, pid, guard.take())
        notice(f"run {run_dir.name} started (supervisor pid {pid}); run directory {run_dir}")
        return follow(run_dir, args, skip_existing=False, owner=True, held=guard.take)


def cmd_resume(args) -> int:
    """`run --resume RUN`: the next attempt of a stopped local run, in its own directory (cockpit.launch.resume),
    started and followed as `cockpit run` does a new one."""
    from cockpit.launch import resume
    from cockpit.launch.supervision import reconcile

    if args.job is not None or args.script_args:
        raise CommandError("run --resume RUN takes no job file and no arguments after --: the run goes on with "
                           f"those it was started with (hint: cockpit run --resume {args.resume})")
    try:
        run_dir = resolve_run(runs_dir_of(args), args.resume)
    except RunNotFound as exc:
        raise CommandError(str(exc)) from None
    own_run(run_dir, "run --resume", "resume")
    status = reconcile(run_dir, status_of(run_dir))  # a supervisor that died: its run is worked out first
    if (why := resume.refusal(status, resume.facts(run_dir, status))) is not None:
        raise CommandError(why)
    status = resume.prepare(run_dir, status)
    attempt = len(status.attempts)
    try:
        pid = launch.start(run_dir, grace=args.grace)
    except launch.LaunchError as exc:
        raise CommandError(f"{run_dir.name}: {exc}") from None
    if args.detach:
        return _detached(run_dir, pid, 0)
    notice(f"run {run_dir.name} resumed: attempt {attempt} (supervisor pid {pid}); run directory {run_dir}")
    return follow(run_dir, args, skip_existing=True, owner=True)


def _detached(run_dir: Path, pid: int, presses: int) -> int:
    """`run --detach` (sbatch's, docker run -d's habit): the run id alone on stdout, for a script to keep; how to
    follow and stop it on stderr; exit 0 while the run goes on. Ctrl-C held during the start stops nothing: said."""
    name = run_dir.name
    print(name, flush=True)
    if presses:
        notice(f"Ctrl-C while {name} was starting: it was started all the same (cockpit stop {name} stops it)")
    notice(f"{name} runs in the background (supervisor pid {pid}; run directory {run_dir})\n"
           f"cockpit:   follow: cockpit attach {name}   logs: cockpit logs -f {name}   state: cockpit ps\n"
           f"cockpit:   stop:   cockpit stop {name}")
    return 0


def _preflight(run_dir, level: str) -> list[dict]:
    """The checks of ``level`` (FAIL / warn) the launch recorded in <run>/preflight.json: an ssh launch's
    checks, a local launch's warnings; none for a Slurm launch."""
    path = run_dir / layout.PREFLIGHT
    if not path.exists():
        return []
    return [c for c in json.loads(path.read_text(encoding="utf-8"))["checks"] if c["level"] == level]


def refresh(rows: list[tuple[Path, RunStatus]]) -> list[tuple[Path, RunStatus]]:
    """Runs whose supervisor died, worked out again (cockpit.launch.control); problems go to stderr."""
    from cockpit.launch.control import reconcile_runs

    return reconcile_runs(rows, notice)


def cmd_attach(args) -> int:
    if (job_id := plain_job(args)) is not None:
        from cockpit.cli import jobs

        return _job_errors(lambda: jobs.follow(job_id, from_start=args.from_start, banner=True))
    run_dir = find(args)
    status = refresh([(run_dir, status_of(run_dir))])[0][1]
    if status.final:
        code = exit_code(status)  # a stopped run: 143, as when it was followed to its end
        print(summary(run_dir, status, Painter(use_color()), exit_code=code))
        return code
    launcher = registry.known_for_run(status)
    if (launcher is not None and not launcher.follows_without_supervisor and status.supervisor
            and not supervision.supervisor_alive(status)):
        notice(f"{run_dir.name} is {status.state} but its supervisor is gone, so nothing follows it: "
               f"{status.note} (cockpit attach later shows its end; cockpit stop ends it)")
        return 1
    return follow(run_dir, args, skip_existing=not args.from_start,
                  banner=f"attached to {run_dir.name} ({status.state}); new lines follow")


def cmd_logs(args) -> int:
    if (job_id := plain_job(args)) is not None:
        from cockpit.cli import jobs

        if args.follow:
            return _job_errors(lambda: jobs.follow(job_id, last_lines=args.lines))
        return _job_errors(lambda: jobs.cmd_logs(job_id, args.lines))
    run_dir = find(args)
    status = status_of(run_dir)
    files = sorted(rank_files(run_dir, "log").items())
    if not files and is_sweep(status):  # its ranks are its trials': say where, rather than print nothing
        trials = [n.run_dir or str(run_dir / n.host) for n in status.nodes if n.trial is not None]
        raise CommandError(f"{run_dir.name} is a sweep of {len(trials)} trials, each a run with its own logs "
                           f"(hint: cockpit logs {trials[0]}; cockpit sweep show {run_dir.name})")
    _check_ranks(run_dir, status, [rank for rank, _ in files], args.rank or ())
    if args.follow:
        return follow(run_dir, args, skip_existing=False, last_lines=args.lines)
    painter = Painter(use_color())
    include = selector(args)
    single = args.rank and len(args.rank) == 1
    for rank, (host, path) in files:
        if include((host, rank)):
            _print_log(path, args.lines, "" if single else f"{painter.prefix((host, rank))} ")
    return 0


def _print_log(path: Path, lines: int | None, prefix: str) -> None:
    """One rank's log on stdout, streamed a block at a time (a 2 GiB log costs a block of memory, not 2 GiB),
    or its last ``lines`` read from the end. A file that is not a regular one (a FIFO, /dev/zero) is skipped
    and said on stderr, like one that cannot be read."""
    from cockpit.logs.bounded import printable, tail

    try:
        if lines is not None:  # -n 0: nothing, as tail -n 0
            sys.stdout.write("".join(f"{prefix}{line}\n" for line in tail(path, lines)))
            return
        sys.stdout.flush()
        for block in printable(path, prefix):
            sys.stdout.buffer.write(block)
    except BrokenPipeError:  # stdout's reader left (`| head`): that is not this file's fault (cockpit.cli.main)
        raise
    except OSError as exc:
        notice(f"{path}: skipped: {exc.strerror or exc}")


def _check_ranks(run_dir: Path, status, found: list[int], wanted) -> None:
    """A --rank the run does not have is a mistake to say, not an empty output."""
    size = status.world_size
    if size is None and status.final and found:  # e.g. gpus: all: the size was known only on the node
        size = max(found) + 1
    bad = sorted(r for r in set(wanted) if size is not None and not 0 <= r < size)
    if not bad:
        return
    has = f"ranks 0-{size - 1}" if size > 1 else "rank 0 only"
    raise CommandError(f"run {run_dir.name} has {has}, not rank {', '.join(map(str, bad))} "
                       "(hint: leave out --rank to see every rank)")


def cmd_stop(args) -> int:
    run_dir = find(args)
    own_run(run_dir, "stop", "stop")
    status = status_of(run_dir)
    if status.final:
        notice(f"{run_dir.name} already ended: {status.state}")
        return 0
    from cockpit.launch import control

    if control.request_stop(run_dir, status, args.grace):
        status = _wait_for_stop(run_dir, status, args.grace, control)
    else:  # no supervisor: stop the job ourselves and record it
        try:
            status = control.stop_orphan(run_dir, status, args.grace, warn=notice)
        except launch.LaunchError as exc:
            raise CommandError(f"{run_dir.name}: {exc}") from None
    notice(f"{run_dir.name}: {status.state}")
    return 0 if status.final else 1


def _wait_for_stop(run_dir: Path, status, grace: float, control):
    """Wait for the supervisor to record the stop; a supervisor that stays frozen (stopped, or stuck in IO
    on a hung file system) cannot, so the ranks are stopped directly and the supervisor is named."""
    deadline = time.time() + grace + 30
    frozen_since = None
    while time.time() < deadline:
        now = read_status(run_dir) or status
        if now.final:
            return now
        frozen = control.frozen_supervisor(now)
        frozen_since = (frozen_since or time.monotonic()) if frozen else None
        if frozen and frozen_since is not None and time.monotonic() - frozen_since >= control.FROZEN_FOR:
            notice(f"{run_dir.name}: {control.describe_frozen(frozen)}; stopping the ranks directly")
            try:
                return control.stop_frozen(run_dir, now, grace, frozen, warn=notice)
            except launch.LaunchError as exc:
                raise CommandError(f"{run_dir.name}: {exc}") from None
        time.sleep(0.2)
    return read_status(run_dir) or status


def _connections(evidence: dict) -> dict:
    """`stacks --json`'s ``connections``: every rank connection gathered with the stacks (none: no key)."""
    from cockpit.hang.linkwords import connections

    gathered = next((e.link for e in evidence.values() if e.link is not None), None)
    return {"connections": connections(gathered, keep=1 << 20)} if gathered is not None else {}


def cmd_stacks(args) -> int:
    """Every rank's Python stack (all threads), the ranks with the same stack folded into one class (with
    --rank or --all, each rank's own too); the run goes on untouched."""
    from cockpit.hang import finding
    from cockpit.hang.classes import classes_json, parse_stacks
    from cockpit.hang.words import rank_list

    run_dir = find(args)
    own_run(run_dir, "stacks", "signal the ranks of")
    status = read_status(run_dir)
    if status is None:
        raise CommandError(f"{run_dir}: no readable status.json")
    if status.final:
        kept = layout.stacks_reports(run_dir)
        where = f" (the stacks gathered when it stalled: {kept[-1]})" if kept else ""
        raise CommandError(f"{run_dir.name} has ended ({status.state}): no process left to ask{where}")
    ranks = set(args.rank) if args.rank else None
    try:
        evidence = registry.for_run(status, fallback="local").stacks(run_dir, status, ranks, timeout=args.timeout)
    except (OSError, ValueError, KeyError) as exc:
        raise CommandError(f"{run_dir.name}: could not ask the ranks: {exc}") from None
    if not evidence:
        among = f" among ranks {', '.join(map(str, sorted(ranks)))}" if ranks else ""
        raise CommandError(f"{run_dir.name}: no running rank to ask{among}")
    from cockpit.hang.stacks import without_hook

    shown = (lambda text: text) if args.raw else without_hook  # the hook's frames: only with --raw
    if args.json:
        stacks = parse_stacks(evidence)  # each dump parsed once (4,096 of them: seconds otherwise)
        print(json.dumps({"run": status.run_id, "ranks": [
            {"rank": e.rank, "host": e.host, "answered": bool(e.text), "collective": stacks[r].collective,
             "where": frame.where() if (frame := stacks[r].user_frame) else None,
             "flight_recorder": asdict(e.flight) if e.flight else None, "stack": shown(e.text),
             "workers": [{"pid": w.pid, "state": w.state, "wchan": w.wchan, "stack": shown(w.text),
                          "where": w.stack.worker_frame.where() if w.stack.worker_frame else None}
                         for w in e.workers]}
            for r, e in sorted(evidence.items())], "classes": classes_json(evidence, stacks),
            **_connections(evidence)}, indent=2))
    else:
        print(finding.stacks_report(evidence, every=bool(args.rank) or args.all, raw=args.raw), end="")
    silent = [r for r, e in evidence.items() if not e.text]
    if silent:
        notice(f"no stack from {rank_list(silent)} within {args.timeout:.0f} s: "
               "stopped (state T), frozen, or started without the hook (COCKPIT_HOOK=0)")
    return 0 if len(silent) < len(evidence) else 1
