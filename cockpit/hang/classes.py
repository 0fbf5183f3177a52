"""Stacks folded by signature: the ranks whose stacks are the same make one class, the classes with the fewest
ranks (the outliers) first, as LLNL's STAT groups a job's stacks. 4,096 ranks read as two lines, "1 rank:
load_batch (train.py:48); 4,095 ranks: all_reduce in train_step (train.py:88)", and any one rank's own stack
stays one ``cockpit stacks RUN --rank N`` away. Pure: evidence in, classes and text out.

A signature is what a rank was doing, not who it is: the frames (file, line, function) of each of its threads,
without the thread ids (they differ in every process) and without the hook's own beat thread; its DataLoader
workers' process states and frames, without their pids; or "no answer". The Flight Recorder's numbers are not
part of it: ranks of a healthy run asked a moment apart are one collective apart, and would split a class that
is one; a class shows their range instead (the hang finding is what compares them).
"""

from __future__ import annotations

from dataclasses import dataclass

from cockpit.hang.evidence import Evidence
from cockpit.hang.stacks import Frame, RankStack, parse_dump
from cockpit.hang.words import hosts_text, rank_list

__all__ = ["StackClass", "class_lines", "classes_json", "classes_summary", "fold", "parse_stacks", "signature",
           "what_of"]
NO_ANSWER = "no answer: stopped, frozen or without the hook"


@dataclass(frozen=True)
class StackClass:
    """Ranks whose stacks are the same (``signature``)."""

    ranks: tuple[int, ...]  # ascending, at least one
    hosts: tuple[str, ...]  # the hosts those ranks run on, each once, in rank order
    what: str  # what these ranks do: "in all_reduce, at train_step (train.py:88)", or NO_ANSWER
    where: str | None  # the innermost frame of the job's own code ("train_step (train.py:88)"), if any
    collective: str | None  # the collective they are blocked in, if any
    example: int  # the rank whose stack stands for the class (its lowest)
    enqueued: tuple[int, int] | None  # the Flight Recorder's last enqueued collective: lowest, highest

    @property
    def count(self) -> int:
        return len(self.ranks)

    def head(self) -> str:
        """'4,095 ranks: all_reduce in train_step (train.py:88)' (the short form of ``what``)."""
        if not self.where and not self.collective:
            short = self.what
        elif self.collective:
            short = f"{self.collective} in {self.where}" if self.where else self.collective
        else:
            short = str(self.where)
        return f"{self.count:,} rank{'s' if self.count != 1 else ''}: {short}"


def _frames(stack: RankStack) -> tuple[tuple[bool, tuple[Frame, ...]], ...]:
    return tuple(sorted(((t.current, t.frames) for t in stack.threads if not t.is_hook),
                        key=lambda x: (not x[0], [(f.path, f.line, f.function) for f in x[1]])))


def signature(e: Evidence, stack: RankStack | None = None) -> tuple:
    """What makes two ranks' stacks the same (module docstring); ``stack``: ``e.stack`` when parsed already."""
    if not e.text:
        return ("no answer",)
    stack = stack if stack is not None else e.stack
    workers = tuple(sorted(((w.state or "", _frames(w.stack)) for w in e.workers), key=repr))
    return ("stack", _frames(stack), workers)


def what_of(e: Evidence, stack: RankStack) -> str:
    """A rank's doing, in words: 'in all_reduce, at train_step (train.py:88)'."""
    if not e.text:
        return NO_ANSWER
    frame, op = stack.user_frame, stack.collective
    what = (f"in {op}" if op else "outside any collective") + (f", at {frame.where()}" if frame else "")
    return what + (", waiting for its DataLoader" if stack.waits_on_loader else "")


def fold(evidence: dict[int, Evidence], stacks: dict[int, RankStack] | None = None) -> list[StackClass]:
    """The classes of ``evidence`` (module docstring): the fewest ranks first, then by lowest rank; ``stacks``:
    each rank's dump parsed already (``parse_stacks``)."""
    members: dict[tuple, list[int]] = {}
    first: dict[tuple, tuple[Evidence, RankStack]] = {}
    for rank in sorted(evidence):
        e = evidence[rank]
        stack = stacks[rank] if stacks is not None else parse_dump(e.text)
        key = signature(e, stack)
        members.setdefault(key, []).append(rank)
        first.setdefault(key, (e, stack))
    out = []
    for key, ranks in members.items():
        e, stack = first[key]
        seqs = [s for r in ranks if (f := evidence[r].flight) and (s := f.enqueued) is not None]
        answered = bool(e.text)
        out.append(StackClass(
            tuple(ranks), tuple(dict.fromkeys(evidence[r].host for r in ranks)), what_of(e, stack),
            stack.user_frame.where() if answered and stack.user_frame else None,
            stack.collective if answered else None, ranks[0], (min(seqs), max(seqs)) if seqs else None))
    return sorted(out, key=lambda c: (c.count, c.ranks[0]))


def parse_stacks(evidence: dict[int, Evidence]) -> dict[int, RankStack]:
    """Each rank's dump, parsed once (``Evidence.stack`` parses at every use)."""
    return {rank: parse_dump(e.text) for rank, e in evidence.items()}


def classes_summary(classes: list[StackClass]) -> str:
    """One line: '1 rank: load_batch (train.py:48); 4,095 ranks: all_reduce in train_step (train.py:88)'."""
    return "; ".join(c.head() for c in classes)


def class_lines(c: StackClass) -> list[str]:
    """A class's title and who is in it: '== 4,095 ranks: in all_reduce, at ... ==', 'ranks 0-3072,3074-4095
    on n[000-511]'; its flight recorder range."""
    title = f"== {c.count:,} rank{'s' if c.count != 1 else ''}: {c.what} =="
    who = f"   {rank_list(list(c.ranks))} on {hosts_text(list(c.hosts))}"
    if c.enqueued is not None:
        lo, hi = c.enqueued
        who += f"; flight recorder: enqueued #{lo}" + (f"-#{hi}" if hi != lo else "")
    return [title, who]


def classes_json(evidence: dict[int, Evidence], stacks: dict[int, RankStack] | None = None) -> list[dict]:
    """``fold(evidence, stacks)`` at the JSON edge (`cockpit stacks --json`'s "classes")."""
    return [{"count": c.count, "ranks": list(c.ranks), "ranges": rank_list(list(c.ranks)), "hosts": list(c.hosts),
             "what": c.what, "where": c.where, "collective": c.collective, "example": c.example,
             "enqueued": list(c.enqueued) if c.enqueued else None} for c in fold(evidence, stacks)]
