"""NCCL RAS reports (`ncclras`: text since NCCL 2.24, JSON since 2.28.7) -> what corroborates a link
finding: the version, the communicators' states and the processes RAS calls missing or dead. Pure.

RAS keeps its own TCP connections over the bootstrap interface, so it sees a dead Ethernet path (INCOMPLETE
in seconds, DEAD after ~80 s) but not a dead or slow InfiniBand data path: a report of "RUNNING OK" does not
clear a link (NVIDIA/nccl#1730). Text is parsed by whitespace (the header spacing differs between NCCL's
printf and its own examples). JSON from 2.28.x lacks a comma after ``"nvml_dev"`` in ``missing_ranks``
(NCCL 2.28.7 source; fixed in 2.29.2): that one pattern is repaired and the report says so.
"""

from __future__ import annotations

import json
import re
from typing import Any

from cockpit.hang.rasreport import RasProcess, RasReport
from cockpit.hang.transport_parse import TransportParseError

__all__ = ["RasProcess", "RasReport", "parse_ras_json", "parse_ras_text"]

_COMM = re.compile(r"^#(\d+)-(\d+)\s+\((\w+)\)\s+([A-Z,_]+)\s*$")
_PROC = re.compile(r"[Pp]rocess (\d+) on node (\S+)")
_RANK = re.compile(r"Rank (\d+)\b.*?process (\d+) on node (\S+)")
_NVML_NO_COMMA = re.compile(r'("nvml_dev"\s*:\s*-?\d+)(\s*\n\s*")')


def parse_ras_text(text: str, source: str = "ncclras") -> RasReport:
    """A text report (any NCCL 2.24+): summary status, #group-comm entries, and the processes named."""
    version = None
    states: list[tuple[str, str]] = []
    procs: list[RasProcess] = []
    section, current = "", ""
    for line in text.splitlines():
        words = line.split()
        if line.startswith("NCCL version") and len(words) >= 3:
            version = words[2]
        elif words and words[0] in ("Errors", "Warnings"):
            section = words[0]
        elif len(words) >= 8 and words[0].isdigit() and words[-2] in ("RUNNING", "INIT", "FINALIZE", "ABORT"):
            states.append((f"group {words[0]}", f"{words[-2]} {words[-1]}"))
        elif m := _COMM.match(line.strip()):
            current = m.group(4)
            states.append((f"#{m.group(1)}-{m.group(2)} ({m.group(3)})", current))
        elif section and words and words[0].isupper() and len(words) == 1:
            current = words[0]  # an Errors/Warnings heading: DEAD, INCOMPLETE, TIMEOUT ...
        elif m := _RANK.search(line):
            procs.append(RasProcess(current or section, int(m.group(1)), int(m.group(2)), m.group(3)))
        elif m := _PROC.search(line):
            procs.append(RasProcess(current or section, None, int(m.group(1)), m.group(2)))
    known = ("NCCL version", "Job summary", "Communicators", "Errors", "Warnings", "RAS ")
    if not states and not procs and text.strip() and not any(k in text for k in known):
        raise TransportParseError(source, 1, "not an ncclras report", "expected `ncclras` (or `ncclras -v`) output")
    return RasReport(version, tuple(states), tuple(procs))


def parse_ras_json(text: str, source: str = "ncclras --format json") -> RasReport:
    """A JSON report (2.28.7+), repairing 2.28.x's missing comma; TransportParseError when it is not one."""
    repaired = False
    try:
        data = json.loads(text)
    except ValueError:
        fixed, n = _NVML_NO_COMMA.subn(r"\1,\2", text)
        try:
            data = json.loads(fixed)
        except ValueError as exc:
            hint = "NCCL 2.28.x writes invalid JSON for missing ranks; use the text format"
            raise TransportParseError(source, getattr(exc, "lineno", 1), f"RAS JSON invalid: {exc}", hint) from None
        repaired = n > 0
    if not isinstance(data, dict) or not isinstance(data.get("communicators", []), list):
        raise TransportParseError(source, 1, "RAS JSON without a communicators list", "expected ncclras JSON output")
    states, procs = [], []
    for comm in data.get("communicators") or []:
        if not isinstance(comm, dict):
            continue
        missing = [r for r in comm.get("missing_ranks") or [] if isinstance(r, dict)]
        behind = _behind([r for r in comm.get("ranks") or [] if isinstance(r, dict)])
        states.append((str(comm.get("hash")), "INCOMPLETE" if missing else "MISMATCH" if behind else "OK"))
        procs += [_missing(r) for r in missing] + behind
    return RasReport(_str(data.get("nccl_version")), tuple(states), tuple(procs), repaired)


def _missing(r: dict[str, Any]) -> RasProcess:
    got = r.get("status")
    status: dict[str, Any] = got if isinstance(got, dict) else {}
    state = "DEAD" if status.get("considered_dead") else "unresponsive" if status.get("unresponsive") else "missing"
    return RasProcess(state, _int(r.get("rank")), _int(r.get("pid")), _str(r.get("host")))


def _behind(ranks: list[dict[str, Any]]) -> list[RasProcess]:
    """The ranks whose count of some collective is below the others' (MISMATCH: a rank behind)."""
    counts: list[dict[str, Any]] = []
    for r in ranks:
        got = r.get("collective_counts")
        counts.append(got if isinstance(got, dict) else {})
    ops = {op for c in counts for op, n in c.items() if isinstance(n, int)}
    top = {op: max(c.get(op, 0) for c in counts) for op in ops}
    return [RasProcess("MISMATCH", _int(r.get("rank")), _int(r.get("pid")), _str(r.get("host")))
            for r, c in zip(ranks, counts, strict=True) if any(c.get(op, 0) < top[op] for op in ops)]


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v: object) -> str | None:
    return v if isinstance(v, str) else None
