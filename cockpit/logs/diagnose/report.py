"""`cockpit diagnose`: read log files, and render the report as JSON or as text for a person.

``diagnose_paths`` is the one function here that does IO (it reads the files); everything else is pure.
JSON shape (one object):

    {"files": [{"path", "nccl_version", "networks", "kinds", "init_complete_ranks",
                "events": [{"line", "kind", "rank", "host", "text"[, "count"]}, ...][, "folded"]}, ...],
     "findings": [{"severity", "code", "title", "hint", "evidence": [{"path", "line"}, ...],
                   "fix": null | {"env", "unset", "slurm", "container", "node_env", "note"}}, ...],
     "cause": null | {"words", "rank", "host", "kind", "remedy", "evidence": [{"path", "line"}, ...]}}

An event repeated many times (a crash-looping job) is listed with its first occurrences, its last and its
earliest, each with ``count``: how many times it occurred; ``folded``: how many occurrences are not listed (both
only where some were left out). ``cause`` is the earliest root cause (cockpit.logs.diagnose.cause), null where
none is known.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterable, Iterator
from dataclasses import replace
from itertools import chain

from cockpit.fs import safeio
from cockpit.logs.bounded import capped_blocks
from cockpit.logs.diagnose.engine import diagnose
from cockpit.logs.diagnose.fold import Fold
from cockpit.logs.diagnose.model import FileSummary, Finding, RankSummary, Report, rank_list
from cockpit.logs.parse.parser import block_events

__all__ = ["diagnose_paths", "diagnose_sources", "read_blocks", "read_lines", "render_findings", "render_json",
           "render_text", "report_to_dict"]

_COLORS = {"error": "\x1b[1;31m", "warning": "\x1b[1;33m", "info": "\x1b[1;36m"}
_BOLD, _DIM, _RESET = "\x1b[1m", "\x1b[2m", "\x1b[0m"
_EVIDENCE_SHOWN = 4
_RANKS_SHOWN = 8


def read_lines(path: str | os.PathLike[str], block: int = 1 << 20, *, follow: bool = True) -> Iterator[str]:
    """The physical lines of a log file, without their newline, split on \\n only (a progress bar's \\r stays
    inside its line) and decoded as UTF-8 with undecodable bytes replaced. Read in blocks: decoding a block
    at a time is much cheaper than a line at a time, and cutting at a newline never splits a character.
    Bounded (read_blocks): a line longer than bounded.LINE_CAP keeps its head and tail around a marker."""
    rest = b""
    for chunk in read_blocks(path, block, follow=follow):
        chunk = rest + chunk
        cut = chunk.rfind(b"\n") + 1
        rest = chunk[cut:]
        if cut:
            yield from chunk[:cut - 1].decode("utf-8", "replace").split("\n")
    if rest:
        yield rest.decode("utf-8", "replace")


MARK_LINE_CAP = 1 << 16  # a marker line is short; a longer "marker" is some other line
DIAGNOSE_BLOCK = 1 << 17
"""The block `cockpit diagnose` parses at a time. Measured (bench_parse.py, a fresh process per run): 1 MiB
blocks, and the copies the parser makes of them (up to the last newline; the line left open joined to the next
block), each came as fresh pages: on 2% NCCL INFO rank logs 0.10-0.13 s of system time per 1M lines, a third of
diagnose's time; 0.05-0.10 s at 256 KiB, 0.02 s at 128 KiB, where the allocator reuses its memory."""


FIRST_BLOCK = 1 << 20


def read_blocks(path: str | os.PathLike[str], block: int = DIAGNOSE_BLOCK, *, follow: bool = True,
                start: int = 0) -> Iterator[bytes]:
    """The bytes of a file in blocks of about ``block`` bytes (what ``parse.parse_blocks`` takes), a line of
    more than bounded.LINE_CAP cut to its head and tail (bounded.capped_blocks): memory stays bounded on a
    512 MB line or 100 MB of progress-bar frames. A regular file only (cockpit.fs.safeio: a FIFO or a device is
    an OSError, never a hang); ``follow``: through a symlink (a path the user named), else not (a run's).
    The first block is ``FIRST_BLOCK`` bytes or more: a crash loop repeats within it, which the parser's memo
    must see at once to pay (``parse.memo``; on the corpus repeated, 0.17 s per 0.4M lines with a 128 KiB first
    block, 0.09 with 1 MiB)."""
    with safeio.open_regular(path, follow=follow) as f:
        f.seek(start)
        first = f.read(max(block, FIRST_BLOCK))
        if first:
            yield from capped_blocks(chain((first,), safeio.blocks(f, block)))


def after_last_mark(path: str | os.PathLike[str], mark: bytes, *, follow: bool = False,
                    block: int = 1 << 20) -> tuple[int, int]:
    """(byte offset, line number) of the end of the last line that begins with ``mark`` (a relaunched run's
    attempt marker): where the last attempt's lines start; (0, 0) when no line does. One pass; memory of one
    block and one marker line."""
    found = (0, 0)
    data, offset, lines, virtual = b"\n", -1, 0, 1  # a newline before the file: a marker on line 1 counts
    with safeio.open_regular(path, follow=follow) as f:
        for chunk in safeio.blocks(f, block):
            data += chunk
            keep = len(data) - len(mark)  # a marker may straddle two blocks: keep what could start one
            at = data.rfind(b"\n" + mark)
            if at >= 0 and data.find(b"\n", at + 1) < 0:  # the last marker line goes on in the next block
                if len(data) - at <= MARK_LINE_CAP:
                    keep = at
                at = data.rfind(b"\n" + mark, 0, at)  # and the one before it, if any, is whole
            if at >= 0:
                end = data.find(b"\n", at + 1)
                found = (offset + end + 1, lines + data.count(b"\n", 0, end + 1) - virtual)
            keep = max(0, min(keep, len(data)))
            lines += data.count(b"\n", 0, keep) - (virtual if keep else 0)
            virtual = virtual if not keep else 0
            offset += keep
            data = data[keep:]
    return found

def diagnose_paths(paths: Iterable[str | os.PathLike[str]]) -> Report:
    """Parse and diagnose log files (the only IO here). Raises OSError for a file that cannot be read."""
    return _diagnose_folded([(os.fspath(p), _folded(read_blocks(p), None, None)) for p in paths])


def _folded(blocks: Iterable[bytes], host: str | None, rank: int | None, first_line: int = 0) -> Fold:
    """A file's events as they are parsed, folded (``fold``): memory bounded by what is reported."""
    fold = Fold()
    for events in block_events(blocks, host, rank, sink=fold, first_line=first_line):
        if events:
            fold.add(events)
    return fold


def _diagnose_folded(files: list[tuple[str, Fold]]) -> Report:
    """``diagnose`` of folded files, each summary told what was folded."""
    report = diagnose([(path, fold.events()) for path, fold in files])
    if not any(fold.folded for _, fold in files):
        return report
    summaries = tuple(replace(summary, folded=fold.folded, repeats=tuple(fold.repeats().items()))
                      for summary, (_, fold) in zip(report.files, files, strict=True))
    return replace(report, files=summaries)


def diagnose_sources(sources: Iterable[tuple[str | os.PathLike[str], str | None, int | None]],
                     follow: Collection[str] = (), since: bytes | None = None) -> Report:
    """Like diagnose_paths, for files whose host and rank are known (a run's per-rank logs). A run's files are
    never read through a symlink; ``follow``: paths the user named, which may be links. A file that is not a
    regular file (a FIFO, /dev/zero) is skipped and said, as an info finding; any other OSError is raised.
    ``since``: each file is read from the line after its last line that starts with these bytes (a relaunched
    run's last attempt), its events still naming the file's own line numbers."""
    kept, skipped = [], []
    for p, host, rank in sources:
        try:
            os.close(safeio.open_fd(p, follow=os.fspath(p) in follow))
            kept.append((p, host, rank))
        except safeio.SpecialFile as exc:
            skipped.append((os.fspath(p), exc.strerror))
    folded = []
    for p, host, rank in kept:
        linked = os.fspath(p) in follow
        start, first = after_last_mark(p, since, follow=linked) if since else (0, 0)
        folded.append((os.fspath(p), _folded(read_blocks(p, follow=linked, start=start), host, rank, first)))
    report = _diagnose_folded(folded)
    if not skipped:
        return report
    note = Finding("info", "skipped_file", f"Skipped {len(skipped)} file(s) that cannot be read as a log: "
                   + "; ".join(f"{path}: {why}" for path, why in skipped[:_EVIDENCE_SHOWN]),
                   "a run's logs are regular files that cockpit and the rank wrapper write: remove what someone "
                   "put in their place", tuple((path, 0) for path, _ in skipped[:_EVIDENCE_SHOWN]))
    return replace(report, findings=(*report.findings, note))


def render_findings(report: Report, color: bool = False) -> str:
    """Only the findings, for the end of a run's summary; empty when there are none."""
    lines: list[str] = []
    for f in report.findings:
        lines += _render_finding(f, color)
    return "\n".join(lines)


def _finding_dict(f: Finding) -> dict[str, object]:
    return {"severity": f.severity, "code": f.code, "title": f.title, "hint": f.hint,
            "evidence": [{"path": path, "line": line} for path, line in f.evidence],
            "fix": f.fix.as_dict() if f.fix is not None else None}


def _file_dict(f: FileSummary) -> dict[str, object]:
    out: dict[str, object] = {
        "path": f.path, "nccl_version": f.nccl_version, "networks": list(f.networks), "kinds": list(f.kinds),
        "init_complete_ranks": list(f.init_complete_ranks),
        "events": [{"line": e.line, "kind": e.kind, "rank": e.rank, "host": e.host, "text": e.text}
                   for e in f.events]}
    if f.folded:  # a repeated event keeps its first occurrences, its last and its earliest: the rest are counted
        counts = dict(f.repeats)
        for e in out["events"]:  # type: ignore[attr-defined]
            if (e["line"], e["kind"]) in counts:
                e["count"] = counts[(e["line"], e["kind"])]
        out["folded"] = f.folded
    return out


def report_to_dict(report: Report) -> dict[str, object]:
    """The `cockpit diagnose --json` object (see the module docstring)."""
    c = report.cause
    cause = None if c is None else {"words": c.words, "rank": c.rank, "host": c.host, "kind": c.kind,
                                    "remedy": c.remedy, "evidence": [{"path": p, "line": n} for p, n in c.evidence]}
    return {"files": [_file_dict(f) for f in report.files],
            "findings": [_finding_dict(f) for f in report.findings], "cause": cause}


def render_json(report: Report) -> str:
    """``report_to_dict`` as indented JSON text (no trailing newline)."""
    return json.dumps(report_to_dict(report), indent=2, ensure_ascii=False)


def _paint(text: str, code: str, color: bool) -> str:
    return f"{code}{text}{_RESET}" if color else text


def _render_finding(f: Finding, color: bool) -> list[str]:
    lines = [f"{_paint(f.severity.upper().ljust(7), _COLORS[f.severity], color)} {_paint(f.title, _BOLD, color)}"]
    if f.evidence:
        shown = ", ".join(f"{path}:{line}" for path, line in f.evidence[:_EVIDENCE_SHOWN])
        more = len(f.evidence) - _EVIDENCE_SHOWN
        lines.append(f"        at {shown}" + (f" (+{more} more)" if more > 0 else ""))
    lines.append(f"        {_paint('hint:', _DIM, color)} {f.hint}")
    return lines


def _rank_line(r: RankSummary) -> str:
    who = f"rank {r.rank}" if r.rank is not None else f"pid {r.pid}" if r.pid is not None else "process"
    bits = [who + (f"@{r.host}" if r.host else "")]
    if r.networks:
        bits.append("/".join(r.networks))
    if r.transports:
        bits.append("+".join(r.transports))
    if r.interface:
        bits.append(f"if {r.interface}")
    if r.init_state:
        bits.append(f"init {r.init_state}")
    if r.first_error is not None:
        bits.append(f"first error {r.first_error.kind} (line {r.first_error.line})")
    return "    " + "  ".join(bits)


def _render_file(f: FileSummary, color: bool) -> list[str]:
    facts = [f"NCCL {f.nccl_version or '?'}", "networks " + (",".join(f.networks) or "-"),
             "kinds " + (",".join(f.kinds) or "none")]
    if f.init_complete_ranks:
        facts.append(f"init complete: ranks {rank_list(f.init_complete_ranks)}")
    lines = [f"  {_paint(f.path, _BOLD, color)}  " + "  ".join(facts)]
    ranks = [r for r in f.ranks if r.first_error is not None or r.networks or r.init_state]
    lines += [_rank_line(r) for r in ranks[:_RANKS_SHOWN]]
    if len(ranks) > _RANKS_SHOWN:
        lines.append(f"    … {len(ranks) - _RANKS_SHOWN} more processes")
    return lines


def render_text(report: Report, color: bool = False) -> str:
    """The human report: findings (most important first) with evidence and hints, then one block per file."""
    lines: list[str] = []
    if report.findings:
        for f in report.findings:
            lines += _render_finding(f, color)
            lines.append("")
    else:
        lines += ["No problems found.", ""]
    lines.append(_paint("Files", _BOLD, color))
    for file in report.files:
        lines += _render_file(file, color)
    return "\n".join(lines)
