"""What a follower of a run (cockpit.cli.follow: `cockpit run`, `attach`, `logs -f`) says besides the ranks' lines:
cockpit's notices on stderr (the live failure kinds, the watchdog's findings and their clearing, how far the lines
are behind the files, a supervisor that died), and a stdout that a reader may close without ending the following.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from pathlib import Path

from cockpit.cli.console import Painter
from cockpit.launch import registry, supervision
from cockpit.logs.parse.kinds import PYTHON_EXCEPTION
from cockpit.run import layout
from cockpit.run.store import STOP_FILE, RunStatus

LOOK_EVERY = 5.0  # seconds between looks at the supervisor of a run whose launcher this version does not know

LIVE: list = []
"""The live line of the run being followed (cockpit.cli.liveline), while there is one: a notice takes it away
first (stderr and stdout share the screen), and the follower draws it again."""


def notice(text: str) -> None:
    for bar in LIVE:
        bar.hide()
    # Nobody reads stderr any more: the run goes on, and the exit code stays the job's.
    with contextlib.suppress(BrokenPipeError, ValueError):
        print(f"cockpit: {text}", file=sys.stderr, flush=True)


class Output:
    """stdout that a reader may close (`| head`): after EPIPE nothing more is written (and nothing is
    raised), so the run is still followed to its end and its exit code kept."""

    def __init__(self, stream=sys.stdout):
        self.stream, self.closed = stream, False

    def write(self, text: str) -> None:
        if self.closed:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except BrokenPipeError:
            self.closed = True
            # The interpreter's last flush at exit must not fail on it either: stdout becomes /dev/null.
            with contextlib.suppress(OSError, ValueError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, self.stream.fileno())
                os.close(devnull)
            notice("stdout was closed: no more lines, following the run to its end for its exit code")


class LiveFindings:
    """The diagnose parser on the live stream: the first occurrence of each failure kind per rank is
    announced on stderr as it appears (the full diagnosis comes with the summary), and so is a rank's own
    uncaught exception (a traceback's last line that names no kind and no lost peer: most often the cause,
    where torchrun's worker_failed and the peers' errors that follow are its consequences). Once a stop was
    asked for, the teardown's messages (torchrun's worker_failed, the ranks' SIGTERMs) are that stop, not news."""

    def __init__(self, painter: Painter, run_dir: Path):
        from cockpit.logs.diagnose.cause import is_consequence
        from cockpit.logs.parse.parser import LineParser

        self._consequence = is_consequence

        self.painter, self.stop_file = painter, run_dir / STOP_FILE
        self.parsers: dict = {}
        self.seen: set = set()
        self.stopping = False
        self._new_parser = LineParser

    def feed_batch(self, lines) -> None:
        """A batch of the tail engine's lines. First the held line (one that a hard wrap might continue) of each
        source that wrote nothing since: it went quiet, so the line is whole. A rank's traceback is most often
        the last thing it writes, its exception line held until then."""
        fresh = {line.source for line in lines}
        for source, parser in self.parsers.items():
            if source not in fresh:
                self._announce(source, parser.flush())
        for line in lines:
            self.feed(line.source, line.text)

    def feed(self, source: tuple, text: str) -> None:
        parser = self.parsers.get(source)
        if parser is None:
            parser = self.parsers[source] = self._new_parser()
        host, rank = source
        self._announce(source, parser.feed(text, host=host, rank=None if rank == "agent" else rank))

    def _announce(self, source: tuple, events) -> None:
        for event in events:
            news = event.is_failure or (event.kind == PYTHON_EXCEPTION and not self._consequence(event))
            if news and not self.stopping:  # a stop writes stop.json before any signal
                self.stopping = self.stop_file.exists()
            if news and (source, event.kind) not in self.seen and not self.stopping:
                self.seen.add((source, event.kind))
                text = _GLOG_STAMP.sub('', event.text.strip(), count=1)
                notice(f"{self.painter.prefix(source)} {self.painter.paint(kind_label(event.kind), '1;31')}: "
                       f"{text if len(text) <= NOTE_TEXT else text[:NOTE_TEXT - 1] + '…'}")


NOTE_TEXT = 200  # a note's text at most: a cut one ends in "…" (it ended mid-word: "a remote worker hangin")
# torch's own log lines begin with a glog stamp ("W1128 05:18:39.101000 19121 torch/.../api.py:1028] "): the note
# says what happened, the file has the stamp
_GLOG_STAMP = re.compile(r"^\[?[IWEF]\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)? +\d+ [^\]\s]*\] *")
_LABELS = {PYTHON_EXCEPTION: "exception", "worker_failed": "torchrun stopped the workers"}


def kind_label(kind: str) -> str:
    """A live note's words for an event kind: diagnose's title up to its colon ("Gloo error", "CUDA out of
    memory", "NCCL remote error"), not the kind's code name."""
    from cockpit.logs.diagnose.advice import KIND_ADVICE

    if kind in _LABELS:
        return _LABELS[kind]
    title = KIND_ADVICE.get(kind, ("", ""))[1]
    return title.split(":")[0].split(" (")[0] if title else kind.replace("_", " ")


class Behind:
    """Says on stderr, at most every few seconds, how far the shown lines are behind the files (they are
    never dropped: the files keep the backlog, cockpit.logs.tail's lossless mode)."""

    EVERY = 5.0
    THRESHOLD = 1 << 20

    def __init__(self) -> None:
        self.said_at, self.was_behind = 0.0, False

    def note(self, behind_bytes: int) -> None:
        now = time.monotonic()
        if behind_bytes >= self.THRESHOLD and now - self.said_at >= self.EVERY:
            notice(f"the lines shown are {behind_bytes / (1 << 20):.1f} MiB behind the rank logs "
                   "(nothing is lost: every line is in the files and will be shown)")
            self.said_at, self.was_behind = now, True
        elif behind_bytes == 0 and self.was_behind:
            notice("caught up with the rank logs")
            self.was_behind = False


class LiveHang:
    """Announces the watchdog's findings (cockpit.hang) on stderr as status.json gains them, once each, and
    when a stall clears."""

    def __init__(self, painter: Painter):
        self.painter, self.starting = painter, False
        self.shown: set[tuple[str, int | None]] = set()  # (kind, rank) of the findings on screen

    def on_status(self, status) -> None:
        watch = status.watch or {}
        starting = watch.get("starting")
        if starting and not self.starting:  # a slow start, said once: not a stall (it has a budget of its own)
            budget = watch.get("threshold_s")
            notice(f"{starting}; no rank has completed a step or a collective yet"
                   + (f": a stall only after {budget:g} s without progress (start_after)" if budget else ""))
        self.starting = bool(starting)
        keys: set[tuple[str, int | None]] = set()
        for f in status.findings:
            key = (f.kind, f.rank)
            keys.add(key)
            if key not in self.shown:
                colour = "1;31" if f.severity == "error" else "1;33"
                nxt = f"\n         next: {f.next}" if f.next else ""
                notice(f"{self.painter.paint(f.kind.upper(), colour)}: {f.text}\n"
                       f"         hint: {f.hint}{nxt}")
        for kind, rank in self.shown - keys:
            if not status.final and not status.stop_requested:  # a stop ends an episode; it clears nothing
                past = next((h for h in reversed(status.history) if h.kind == kind), None)
                lasted = f" after {past.lasted_s:.0f} s" if past and kind != "straggler" else ""
                notice(f"{kind} cleared{lasted}" + (f" (rank {rank})" if rank is not None else "")
                       + ": the ranks make progress again")
        self.shown = keys


class SupervisorWatch:
    """Notices a supervisor that died (SIGKILL, OOM killer, full disk) while the run is followed, says so
    once, and works the run out again now and then (cockpit.launch.control): local runs end when their
    ranks have, from the ranks' exit records."""

    def __init__(self, run_dir: Path):
        self.run_dir, self.next_look, self.told = run_dir, 0.0, False

    def check(self, status: RunStatus) -> RunStatus:
        now = time.monotonic()
        if status.final or not status.supervisor or now < self.next_look:
            return status
        launcher = registry.known_for_run(status)
        self.next_look = now + (launcher.look_every if launcher else LOOK_EVERY)
        if supervision.supervisor_alive(status):
            return status
        if not self.told:
            self.told = True
            notice(f"the supervisor (pid {status.supervisor['pid']}) died; following the run from its ranks' "
                   f"exit records (see {self.run_dir / layout.SUPERVISOR_LOG})")
        from cockpit.launch.control import reconcile_runs

        return reconcile_runs([(self.run_dir, status)], notice)[0][1]
