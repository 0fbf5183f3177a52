"""Following a run on a terminal: `cockpit run` (which owns the run it started), `cockpit attach` and
`cockpit logs -f` (viewers). Rank lines on stdout, cockpit's notices on stderr.

Ctrl-C. A viewer detaches, like `tail -f` or `docker logs -f`: the run goes on untouched. `cockpit run`
follows srun: one Ctrl-C prints where the run is and goes on; a second within ``CONFIRM_S`` asks the
supervisor to stop it (SIGTERM to the ranks, SIGKILL after --grace), and the summary follows (exit 130);
one more after that stops waiting. A run stopped by anything else (cockpit stop, the TUI, on_stall: stop, a
scancel) exits 143 (``exit_code``). Presses made while the run was still starting (cockpit.cli.startup) count
the same once the follower is in place: one reports, two stop. A stop asked before the supervisor has
recorded itself waits for it (up to ``STARTING_S``): stopping without it could race the ranks' start.

Neither a closed stdout (`cockpit run job.yaml | head -2`) nor a dead supervisor ends the following early:
the lines stop, the exit code stays the job's; a supervisor that died is noticed within seconds and the
run's end is worked out from the ranks' exit records (cockpit.launch.control).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

from cockpit.cli.common import selector
from cockpit.cli.console import Painter, summary, use_color
from cockpit.cli.linefold import folded_states, line_fold
from cockpit.cli.notices import LIVE, Behind, LiveFindings, LiveHang, Output, SupervisorWatch, notice
from cockpit.cli.stopecho import StopEcho
from cockpit.run.store import STOP_FILE, RunStatus, read_status

CONFIRM_S = 1.0  # a second Ctrl-C within this many seconds stops the run (srun's convention)
INTERRUPTED = 128 + signal.SIGINT  # 130: this command's own Ctrl-C stopped the run (or detached)
STOPPED = 128 + signal.SIGTERM  # 143: the run was stopped by anything else; its ranks got SIGTERM
STARTING_S = 30.0  # a supervisor not recorded after this long is taken for dead (cockpit.launch.supervision.reconcile)


def live_line(args, out: Output, painter: Painter):
    """The live line for progress bars (cockpit.cli.liveline), or None: stdout is no terminal (or TERM=dumb), or
    -q shows no rank lines."""
    if getattr(args, "quiet", False) or not out.stream.isatty() or os.environ.get("TERM") == "dumb":
        return None
    from cockpit.cli.liveline import LiveLine

    return LiveLine(out.write, painter.prefix)


def shown(lines: list, drawing: frozenset = frozenset()) -> list:
    """The lines as the terminal shows them: each by the frame it ends on (a progress bar's "\\r" updates
    would send the cursor back over the prefix). A piece of a bar line cut before its end (64 KiB of frames) of a
    source whose bar the live line still draws (``drawing``) is left to it: it shows that state already."""
    from cockpit.logs.filetail import last_frame

    if not any("\r" in line.text for line in lines):
        return lines
    return [line._replace(text=last_frame(line.text)) for line in lines
            if not (line.cut and line.source in drawing and "\r" in line.text)]


def run_report(status: RunStatus | None) -> str:
    """One line on where a run is: its state and each rank's last step, or how it ended."""
    if status is None:
        return "no readable status.json"
    said: dict[str, list[int]] = {}
    for rank in range(status.world_size or 0):
        end, rec = status.ranks.get(str(rank)), status.progress.get(str(rank))
        if end is not None:
            said.setdefault(f"ended ({'ok' if end.status == 0 else end.status})", []).append(rank)
        elif rec is not None and rec.step is not None:
            said.setdefault(f"step {rec.step}" + (f" ({rec.flag})" if rec.flag else ""), []).append(rank)
        else:
            said.setdefault((rec.state if rec else None) or "starting", []).append(rank)
    ranks = folded_states(said, status.world_size or 0)  # many ranks: those saying the same, as ranges
    return f"{status.run_id} is {status.state}" + (f"; ranks {ranks}" if ranks else "")


class Detach(Exception):
    """Ctrl-C on a viewer (or a third one on `cockpit run`): stop following; the run goes on."""


def diagnosis(run_dir: Path, painter: Painter) -> str:
    from dataclasses import replace

    from cockpit.insight.diagnosis import attempt_mark, earlier_attempts, first_failed_trial, run_findings, run_sources
    from cockpit.logs.diagnose.report import diagnose_sources, render_findings
    from cockpit.run.handle import Run

    run = Run.load(run_dir)
    run = first_failed_trial(run) or run  # a sweep: its trial that failed first
    report = run_findings(run, diagnose_sources(run_sources(run.dir), since=attempt_mark(run)))
    report = replace(report, findings=(*report.findings, *earlier_attempts(run)))
    text = render_findings(report, color=painter.color)
    return f"diagnosis:\n{text}" if text else ""


def follow(run_dir: Path, args, skip_existing: bool, owner: bool = False, banner: str | None = None,
           held: Callable[[], int] | None = None, last_lines: int | None = None) -> int:
    """Stream the run's lines until it ends, then summarise; exit with the job's code (130 after a stop
    by Ctrl-C or a detach). ``owner``: `cockpit run`, whose Ctrl-C can stop the run (see the module);
    ``held``: how many Ctrl-C were pressed while it was starting, asked once the follower's handler is in place;
    ``last_lines``: each log there now starts at its last N lines (`logs -f -n N`)."""

    painter = Painter(use_color())
    out = Output()
    bars = live_line(args, out, painter)  # progress bars drawn live on a terminal (cockpit.cli.liveline)
    write = bars.write if bars else out.write
    LIVE[:] = [bars] if bars else []
    fold = line_fold(run_dir, args, painter.prefix, write)  # identical lines of many ranks: once
    live, hang, sup = LiveFindings(painter, run_dir), LiveHang(painter), SupervisorWatch(run_dir)
    echo = StopEcho()  # torchrun's traceback after a stop: one line (cockpit.cli.stopecho)

    def stop_asked() -> bool:
        return live.stopping or (run_dir / STOP_FILE).exists()  # a stop writes stop.json before any signal
    presses: list[float] = []  # when the last lone Ctrl-C was answered
    stopping: list[float] = []
    detached: list[float] = []
    following: list[asyncio.Task] = []
    pending: list[float] = []  # when a stop was asked that waits for the supervisor to record itself

    def ask_stop() -> None:
        status = read_status(run_dir)
        unrecorded = status is not None and not status.final and status.supervisor is None
        if unrecorded and (not pending or time.monotonic() - pending[0] < STARTING_S):
            if not pending:
                notice(f"stopping {run_dir.name} as soon as its supervisor is up")
                pending.append(time.monotonic())
            return
        pending.clear()
        _stop(run_dir, args.grace)

    def on_batch(batch) -> None:
        # The lines first, in one write; the parser after: it must not delay what the user is waiting for.
        if not (args.quiet or out.closed):
            prefix = painter.prefix
            lines = shown(echo.filter(batch.lines, stop_asked), bars.drawing(batch.frames) if bars else frozenset())
            text = [fold.feed(lines)] if fold else [f"{prefix(line.source)} {line.text}\n" for line in lines]
            text += [f"{prefix(source)} ... {n} lines not shown (the log file has them all)\n"
                     for source, n in batch.dropped.items()]
            if bars:
                bars.write("".join(text), batch.frames)
            else:
                out.write("".join(text))
            behind.note(batch.behind_bytes)
        live.feed_batch(batch.lines)
        if bars:
            bars.show()  # where a notice took it away

    behind = Behind()

    def on_status(status: RunStatus) -> RunStatus:
        if pending:
            ask_stop()
        live.stopping = live.stopping or status.stop_requested
        hang.on_status(status)
        status = sup.check(status)
        if bars:
            bars.show()
        return status

    def on_interrupt() -> None:
        if not owner or stopping:  # an exception raised here would only be logged by the loop: cancel instead
            detached.append(time.monotonic())
            following[0].cancel()
            return
        now = time.monotonic()
        if presses and now - presses[-1] <= CONFIRM_S:
            stopping.append(now)
            live.stopping = True
            ask_stop()
            return
        notice(f"{run_report(read_status(run_dir))}\n"
               f"cockpit: Ctrl-C again within {CONFIRM_S:.0f} s stops the run (else it goes on; "
               f"cockpit stop {run_dir.name} stops it later)")
        presses.append(time.monotonic())  # the window opens once the question is on the screen

    def on_held(count: int) -> None:
        """Presses made while the run was starting: two or more stop it, one is one press."""
        if count == 1:
            on_interrupt()
            return
        notice(f"Ctrl-C {count} times while {run_dir.name} was starting")
        stopping.append(time.monotonic())
        live.stopping = True
        ask_stop()

    async def main():
        from cockpit.run.watch import follow_run

        task = asyncio.current_task()
        if task is not None:  # always: main runs as a task
            following.append(task)
        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, on_interrupt)
        if banner:  # once Ctrl-C means what it should
            notice(banner)
        if held is not None and (count := held()):
            on_held(count)
        try:
            return await follow_run(run_dir, on_batch, include=selector(args), skip_existing=skip_existing,
                                    last_lines=last_lines, on_status=on_status, lossless=True,
                                    frames=bars is not None)
        except asyncio.CancelledError:
            if detached:
                raise Detach from None
            raise

    try:
        status = asyncio.run(main())
    except KeyboardInterrupt:  # Ctrl-C before the loop's handler was in place: a viewer detaches all the same
        notice(f"detached; the run goes on (cockpit attach {run_dir.name} / cockpit stop {run_dir.name})")
        return 130
    except Detach:
        if pending:  # asked before the supervisor was up: nothing was stopped yet
            notice(f"stopped waiting; {run_dir.name} was not stopped yet, its supervisor was starting "
                   f"(cockpit stop {run_dir.name} stops it)")
        elif stopping:
            notice(f"stopped waiting; the run is being stopped (cockpit attach {run_dir.name} shows its end)")
        else:
            notice(f"detached; the run goes on (cockpit attach {run_dir.name} / cockpit stop {run_dir.name})")
        return 130
    finally:
        if (rest := echo.flush()) and not (args.quiet or out.closed):
            write("".join(f"{painter.prefix(cast(tuple, line.source))} {line.text}\n" for line in rest))
        if fold:  # the lines still held for the other ranks' copies (cockpit.cli.linefold)
            write(fold.flush())
        if bars:
            bars.hide()
        LIVE.clear()
    if status is None:
        return 1
    code = exit_code(status, interrupted=bool(stopping))
    out.write(summary(run_dir, status, painter, exit_code=code) + "\n")  # the code this command exits with
    if status.state != "succeeded" and (found := diagnosis(run_dir, painter)):
        out.write(found + "\n")
    return code


def exit_code(status: RunStatus, interrupted: bool = False) -> int:
    """The code a command that saw a run end exits with, and its summary says: 130 when its own Ctrl-C stopped
    the run; 143 (128 + SIGTERM, as a shell, `timeout` or `docker run` report a process ended by SIGTERM) for
    a run that ended ``stopped`` otherwise (cockpit stop, the TUI's stop, on_stall: stop, a scancel): a stop
    is neither the job's success nor its failure, and torchrun's own code after a stop (1, from its
    SignalException) says a failure that did not happen. Else the run's code."""
    if interrupted:
        return INTERRUPTED
    return STOPPED if status.state == "stopped" else (status.exit_code or 0)


def _stop(run_dir: Path, grace: float) -> None:
    from cockpit.launch import control
    from cockpit.launch.site import LaunchError

    status = read_status(run_dir)
    if status is None or status.final:
        return
    if control.request_stop(run_dir, status, grace, by="Ctrl-C in cockpit run"):
        notice(f"stopping the run (SIGTERM to the ranks, SIGKILL after {grace:g} s); Ctrl-C again to stop "
               "waiting")
        return
    try:  # its supervisor is gone: stop what is left ourselves
        control.stop_orphan(run_dir, status, grace, by="Ctrl-C", warn=notice)
    except (LaunchError, OSError) as exc:
        notice(f"could not stop {run_dir.name}: {exc}")
