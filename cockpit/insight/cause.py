"""A run's first failure and its cause, from what only a run cockpit launched knows: every rank's exit record
(to the nanosecond, a rank that exited 0 included), the launcher's own exit, each rank's place when it ended
(its traceback in its log, or the stack faulthandler wrote into logs/rank-R.HOST.stacks on a fatal signal: the
rank hook enables it) and the script's source.

What it tells apart, each a root cause with its own words (``Cause``) and the rest consequences:
- an early exit: a rank that exited 0 while the others, still in a collective, then lost their peer;
- a collective mismatch that gloo aborted: which collective each rank was in, and where; and **uneven
  inputs** when one rank had left the training loop that another was still in (it ran out of batches first);
- the launcher's own death (torchrun SIGKILLed): its ranks' SIGTERMs only follow from it;
- a rank the kernel's OOM killer ended (a SIGKILL while the node's OOM-kill count rose: cockpit.launch.memblame),
  with whose memory filled the node: the job's own ranks, or something outside the job;
- anything else: the exit records' first failure with its own log's words.

Used by ``diagnosis.run_findings``; the end-of-run summary words the launcher's death the same way."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from cockpit.hang.stacks import Frame, RankStack, Thread, parse_dump
from cockpit.hang.words import rank_list

FATAL = "Fatal Python error"
_TB_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_GLOO_SIZES = re.compile(r"op\.preamble\.length <= op\.nbytes\. (\d+) vs (\d+)")
_REACTION_STATUSES = frozenset({129, 130, 143})  # SIGHUP, SIGINT, SIGTERM: how ranks are ended, not why
UNEVEN_HINT = ("Give every rank the same number of batches: a DistributedSampler (equal shards; drop_last=True "
               "where the data does not divide), or drop_last=True on the DataLoader; where ranks must differ, "
               "wrap the loop in DDP's `with model.join():` so a rank that finishes early answers the others' "
               "collectives. Then every rank reaches the collectives after the loop together.")
MISMATCH_HINT = ("The cause is in the code: the ranks took different branches around a collective (an extra "
                 "all_reduce for logging on one rank, a tensor of another shape, a rank that skipped one). Make "
                 "every rank call the same collectives, in the same order, with the same sizes.")
LAUNCHER_HINT = ("Something outside the job ended the launcher (the kernel's OOM killer, a scheduler, kill -9): "
                 "its ranks' SIGTERM exits follow from it. `dmesg | grep -i 'killed process'` on the node says "
                 "whether it was the OOM killer.")


@dataclass(frozen=True)
class Place:
    """Where a rank was when it ended: the collective it waited in (None: none) and its innermost own frame;
    ``frames``: its main thread's frames, most recent first."""

    collective: str | None
    frame: Frame | None
    frames: tuple[Frame, ...]

    def words(self) -> str:
        what = self.collective or "its own code"
        return f"{what} at {self.frame.path.rsplit('/', 1)[-1]}:{self.frame.line}, in {self.frame.function}" \
            if self.frame else what


def place_of(stacks_text: str, log_lines: list[str]) -> Place | None:
    """The fatal-signal dump in a rank's .stacks text, else the last traceback in its log's last lines."""
    at = stacks_text.rfind(FATAL)
    stack = parse_dump(stacks_text[at:]) if at >= 0 else traceback_stack(log_lines)
    main = stack.main if stack is not None else None
    if main is None or not main.frames:
        return None
    return Place(stack.collective, stack.user_frame, main.frames)  # type: ignore[union-attr]


def traceback_stack(lines: list[str]) -> RankStack | None:
    """The last Python traceback in ``lines`` as a one-thread stack (most recent frame first)."""
    start = max((i for i, line in enumerate(lines) if "Traceback (most recent call last)" in line), default=-1)
    if start < 0:
        return None
    frames = [Frame(m[1], int(m[2]), m[3]) for line in lines[start:] if (m := _TB_FRAME.search(line))]
    return RankStack((Thread("traceback", True, tuple(reversed(frames))),)) if frames else None


def innermost_loop(source: str, line: int) -> tuple[int, int] | None:
    """The line span of the innermost for/while loop of ``source`` that holds ``line`` (None: none, or the source
    does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    spans = [(n.lineno, n.end_lineno or n.lineno) for n in ast.walk(tree)
             if isinstance(n, (ast.For, ast.AsyncFor, ast.While)) and n.lineno <= line <= (n.end_lineno or n.lineno)]
    return max(spans, default=None)


def left_the_loop(inside: Place, outside: Place, read) -> tuple[int, int] | None:
    """The loop ``inside`` is in (its innermost own frame in a loop) that none of ``outside``'s frames is in:
    the rank at ``outside`` has left a loop the other still runs. ``read(path)`` gives a source or None."""
    for frame in inside.frames:
        if not frame.user:
            continue
        source = read(frame.path)
        span = innermost_loop(source, frame.line) if source else None
        if span is None:
            continue
        within = [f for f in outside.frames if f.path == frame.path and span[0] <= f.line <= span[1]]
        return None if within else span
    return None


@dataclass(frozen=True)
class Mismatch:
    """A collective mismatch gloo aborted, told in words; ``uneven``: the rank that left the loop first."""

    title: str
    words: str
    uneven: int | None
    hint: str


def places_said(ranks: list[int], places: dict[int, Place], one: str = "", many: str = "") -> str:
    """Where ranks were ('rank 1 was in all_reduce at ...'), the ranks in the same place as one range: 'ranks
    1-4095 were in ...'; ``one`` / ``many``: the verb, or none ('rank 1 in ...')."""
    by_place: dict[str, list[int]] = {}
    for r in ranks:
        by_place.setdefault(places[r].words(), []).append(r)
    return "; ".join(f"{rank_list(rs)}{' ' + (one if len(rs) == 1 else many) if one else ''} in {where}"
                     for where, rs in sorted(by_place.items(), key=lambda kv: min(kv[1])))


def mismatch(places: dict[int, Place], aborted: dict[int, str], read) -> Mismatch | None:
    """The ranks' collectives and lines at a mismatch (``aborted``: rank -> the text gloo aborted it with)."""
    if not aborted:
        return None
    rank, text = min(aborted.items())
    sizes = _GLOO_SIZES.search(text)
    said = f"gloo aborted rank {rank}" + (f": it received {sizes[1]} bytes where its collective expected "
                                          f"{sizes[2]}" if sizes else "")
    where = places_said(sorted(places), places)
    for out_rank, out in sorted(places.items()):
        for in_rank, inside in sorted(places.items()):
            if in_rank != out_rank and left_the_loop(inside, out, read):
                title = (f"Uneven inputs: rank {out_rank} left its training loop ({out.words()}) while rank "
                         f"{in_rank} was still in it ({inside.words()}); {said}")
                words = (f"uneven inputs: rank {out_rank} ran out of batches first and left the training loop "
                         f"rank {in_rank} was still in")
                return Mismatch(title, words, out_rank, UNEVEN_HINT)
    title = f"Collective mismatch: {where or 'the ranks called collectives that do not match'}; {said}"
    words = f"the ranks called collectives that do not match ({where})" if where else \
        "the ranks called collectives that do not match"
    return Mismatch(title, words, None, MISMATCH_HINT)


def launcher_death(status) -> tuple[str, str] | None:
    """(host, how) where the launcher itself died of a signal nobody asked for (torchrun SIGKILLed) and its
    ranks were only ended after it (SIGTERM, SIGINT, SIGHUP); None otherwise (a Slurm job's node record is the
    batch job's, a sweep's nodes are trials)."""
    import signal

    ff = status.first_failure
    if status.stop_requested or ff is None or ff.rank is None or ff.status not in _REACTION_STATUSES:
        return None
    from cockpit.launch import registry

    launcher = registry.known_for_run(status)
    if launcher is not None and not launcher.nodes_are_torchruns:  # Slurm's is the batch job's: Slurm ends it
        return None
    for node in status.nodes:
        if node.trial is not None:
            continue
        code = node.exit_code
        if isinstance(code, int) and code > 128 and code not in _REACTION_STATUSES:
            try:
                name = signal.Signals(code - 128).name
            except ValueError:
                name = f"signal {code - 128}"
            return node.host or ff.host, f"killed by {name} (status {code})"
    return None

OOM_JOB_HINT = ("The job's own ranks filled the memory they may use: any node of this size runs out the same way, "
                "so recover: does not retry it. Use fewer ranks per node, smaller batches, fewer DataLoader "
                "workers, or nodes (or a Slurm --mem) with more memory.")
OOM_NODE_HINT = ("The job's ranks held little of the memory they may use: something outside the job took the rest "
                 "(another job, a leak, a daemon). Look at the node (`dmesg | grep -i 'killed process'`, "
                 "`ps aux --sort=-rss`); recover: runs the next attempt without this node.")


def oom_kill(run_dir: Path, first) -> tuple[str, str, tuple[Path, ...]] | None:
    """(words, hint, files) where the first failure is a rank the kernel's OOM killer ended: a SIGKILL while the
    node's OOM-kill count rose (its exit record, its node's beats); None for any other end. ``files``: the
    evidence, the rank's exit record and the beat files of its node."""
    from cockpit.launch import memblame
    from cockpit.run import layout

    if first.signal != 9 or first.rank is None or not first.host:
        return None
    verdict = memblame.oom_verdict(run_dir, first.rank, first.host)
    if verdict is None:
        return None
    beats = sorted((run_dir / layout.LOGS).glob(f"rank-*.{first.host}.beat"))
    return (verdict.words(first.rank), OOM_JOB_HINT if verdict.blame == "job" else OOM_NODE_HINT,
            (layout.rank_file(run_dir, first.rank, first.host, "exit"), *beats))


def read_source(path: str) -> str | None:
    """A script's source for the loop check; None where it cannot be read (gone, not text, too big)."""
    try:
        p = Path(path)
        if p.stat().st_size > 2_000_000:
            return None
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


