"""Where a log line came from and when: launcher prefixes, ANSI remnants and timestamps.

Pure and stdlib-only, like the rest of the parser. Real training logs carry one or more prefixes in front
of the text a process printed, stacked in any order:

    [1,3]<stdout>:                      mpirun --tag-output        (rank 3)
    [1,mpirank:3,algo-2]<stdout>:       SageMaker MPI              (rank 3, host algo-2)
    [rank7]:  [default3]:               torchrun --tee / --role     (rank 7 / 3)
    3:                                  srun --label               (task 3)
    node-5:                             pdsh / clush / deepspeed   (host)
    (RayWorker pid=12, ip=10.0.0.1)     Ray                         (pid, host)
    host:pid:tid [cudaDev]              NCCL's own prefix: the bracket is the CUDA device, NOT the rank
    [155]                               some launchers' rank, but also a log viewer's line number
    2024-05-07 15:51:09,140 -  [E321 02:07:08.40 x.cpp:1]  E0213 12:07:20.08 123 api.py:869]   timestamps

Only lines that produce an event are parsed for their origin, so none of this is on the hot path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?")
# What is left of a colour code when a log collector dropped the ESC byte: "[0m ", "[1;31m".
_RESIDUE = re.compile(r"(?:\[(?:\d{1,3};)*\d{0,3}m ?)+")


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences anywhere and ESC-less colour residue at the start of ``text``."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if text.startswith("["):
        m = _RESIDUE.match(text)
        if m:
            text = text[m.end():]
    return text


@dataclass(frozen=True, slots=True)
class Origin:
    """What a line's prefixes say about the process that printed it; None where they say nothing."""

    host: str | None = None
    rank: int | None = None
    """From a prefix that names the rank ([rank3]:, [1,3]<stdout>:, srun --label)."""
    weak_rank: int | None = None
    """From a bare ``[N] `` prefix: a rank for some launchers, a line number for some log viewers."""
    pid: int | None = None
    cuda_dev: int | None = None
    """The bracket of NCCL's ``host:pid:tid [N]`` prefix: the CUDA device, not the rank."""
    nranks: int | None = None


# One alternation, tried at the current position; the named group that matched says which prefix it was.
_PREFIX = re.compile(
    r"(?P<nccl>(?P<nccl_host>[^\s:\[\]()]+):(?P<nccl_pid>\d+):\d+ \[(?P<nccl_dev>\d+)\] ?)"
    r"|(?P<mpi>\[\d+,(?P<mpi_rank>\d+)\]<(?:stdout|stderr)>:)"
    r"|(?P<sagemaker>\[\d+,mpirank:(?P<sm_rank>\d+),(?P<sm_host>[^\]]+)\]<(?:stdout|stderr)>:)"
    r"|(?P<tee>\[[A-Za-z_][\w\-]*?(?P<tee_rank>\d+)\]:)"
    r"|(?P<rank_world>\[(?P<rw_rank>\d+)/(?P<rw_world>\d+)\])"
    r"|(?P<num>\[(?P<num_rank>\d+)\](?=\s))"
    r"|(?P<srun_label>(?P<label_rank>\d{1,6}): )"
    r"|(?P<ray>\((?:[\w.\-]+ )?pid=(?P<ray_pid>\d+)(?:, ip=(?P<ray_ip>[\w.:\-]+))?\))"
    r"|(?P<skip>(?:stdout|stderr|STDOUT|STDERR)\s*[:|]"  # stream tags, grep -H file names, timestamps, levels
    r"|[\w.\-/]+\.(?:log|out|err|txt):"
    r"|\[?\d{4}-\d\d-\d\d[ T_]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?Z?(?: [A-Z]{2,4}\d*)?\]?(?: +- )?"
    r"|\[?[IWEF]\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)?(?: +\d+)? [^\]\s]*\]"
    r"|\[(?:[IWEF]|INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)(?: [^\]]*)?\])"
    r"|(?P<pdsh>(?P<pdsh_host>[A-Za-z][\w.\-]*\d[\w.\-]*): )"
)
_MAX_PREFIXES = 8
_TEXT_RANK = re.compile(r"\[(?:PG [^\]]{0,80}?)?Rank (\d+)\]")


def origin(text: str) -> Origin:
    """Read the stacked prefixes at the start of ``text`` (see the module docstring)."""
    host = rank = weak = pid = dev = nranks = None
    pos, n = 0, len(text)
    for _ in range(_MAX_PREFIXES):
        while pos < n and text[pos] in " \t":
            pos += 1
        m = _PREFIX.match(text, pos)
        if not m:
            break
        pos = m.end()
        name = m.lastgroup
        if name == "nccl":
            host = host or m["nccl_host"]
            pid, dev = int(m["nccl_pid"]), int(m["nccl_dev"])
            break  # NCCL's own prefix is always the innermost one
        if name == "mpi":
            rank = int(m["mpi_rank"])
        elif name == "srun_label":
            rank = int(m["label_rank"])
        elif name == "sagemaker":
            rank, host = int(m["sm_rank"]), m["sm_host"]
        elif name == "tee":
            rank = int(m["tee_rank"])
        elif name == "rank_world":
            rank, nranks = int(m["rw_rank"]), int(m["rw_world"])
        elif name == "num":
            weak = int(m["num_rank"]) if weak is None else weak
        elif name == "ray":
            pid = int(m["ray_pid"])
            host = m["ray_ip"] or host
        elif name == "pdsh":
            host = m["pdsh_host"]
    return Origin(host=host, rank=rank, weak_rank=weak, pid=pid, cuda_dev=dev, nranks=nranks)


def text_rank(text: str) -> int | None:
    """The rank PyTorch names inside a message: ``[Rank 3]`` or ``[PG ID 0 PG GUID 0 Rank 3]``."""
    if "Rank " not in text:
        return None
    m = _TEXT_RANK.search(text)
    return int(m[1]) if m else None


# Found by their "HH:MM" (a cheap search), then the date in front is matched in place.
_HHMM = re.compile(r"(\d\d):(\d\d)(?::(\d\d)(?:[.,](\d+))?)?")
_ISO_DATE = re.compile(r"\d{4}-(\d\d)-(\d\d)[ T_]")
_GLOG_DATE = re.compile(r"[IWEF](\d{1,2})(\d\d) ")
TIMESTAMP_SPAN = 120
"""Timestamps are looked for in this many leading characters: prefixes carry them, and a bounded search
keeps a long traceback line cheap."""


def timestamp(text: str) -> float | None:
    """Seconds since the start of a (leap) year for the first timestamp early in ``text``, or None.

    glog-style stamps (``E0213 12:07:20``, ``[E108 20:04:34``) carry no year, so the year is ignored for
    every format: values from different formats compare, at the price of being wrong across New Year.
    """
    for m in _HHMM.finditer(text, 0, TIMESTAMP_SPAN):
        at = m.start()
        date = _ISO_DATE.match(text, at - 11) if at >= 11 else None
        if date is None:
            for back in (6, 5):  # E0213 12:07 / E108 20:04 (some writers drop the month's zero)
                if at >= back and (at == back or not text[at - back - 1].isalnum()):
                    date = _GLOG_DATE.match(text, at - back)
                    if date is not None:
                        break
        if date is not None and date.end() == at:
            break
    else:
        return None
    month, day, hh, mm = int(date[1]), int(date[2]), int(m[1]), int(m[2])
    ss, frac = m[3], m[4]
    if not (1 <= month <= 12 and 1 <= day <= 31 and hh < 24 and mm < 60):
        return None
    seconds = float(ss or 0) + (float("0." + frac) if frac else 0.0)
    return ((month * 32 + day) * 24 + hh) * 3600.0 + mm * 60 + seconds
