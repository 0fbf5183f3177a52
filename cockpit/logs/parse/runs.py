"""Runs of NCCL channel lines that can only repeat facts already reported: stepped over in C.

Each communicator NCCL makes prints a line per channel and peer (``host:pid:tid [dev] NCCL INFO Channel 07/0 :
0[0] -> 1[1] via P2P/IPC/read``), 32 to 64 in a row that differ only in the channel number. The parser
reports a channel line's facts once per *channel key* (its text before ``Channel``/``Ring`` and from the
`` : `` after it, ``channel_key``) and returns nothing for a line whose key it has seen, before any rule runs.
On ordinary rank logs these lines are most of the lines a trigger word marks, and each cost a few
microseconds of Python for nothing.

``channel_run`` finds, with one regex match (backreferences, in C), how many lines after a channel line
are the same prefix, ``Channel``/``Ring``, a channel number and one of the (at most two) tails of the
run's first two lines; where both of those lines' keys are already reported, every line of the run gives
no event and changes only which line is held (``parser.LineParser``): the block walk (``block.feed_marked``)
holds the last one and steps over the rest.

Why the keys of the other lines are the first two lines' keys, though only their shape is matched: a line
``P + "Channel " + digits/digits + T`` holds the words ``Channel ``/``Ring `` (which hold no digit, slash
or colon) exactly where a first line with the same ``P`` and ``T`` holds them, so ``channel_key`` cuts it
at the same places; ``exitcode``, ``]:`` at the end and `` via `` (the parser's other tests before the key)
likewise. Pure and stdlib-only. No IO.
"""

from __future__ import annotations

import re
from typing import Protocol

from cockpit.logs.parse.linecount import newlines
from cockpit.logs.parse.table import FailureTable

TAILS = 8
"""Tails a run may take in turn: a rank's send and receive lines over 4 NICs (NET/IB/0..3)."""

# A run: a channel line, up to TAILS - 1 more that set the tails, then lines with the same prefix and word and
# one of those tails. Lines end in \n: the block's last line (which has none) is never in a run.
_LINE = rb"\1\2 \d+(?:/\d+)?"
_RUN = re.compile(rb"([^\n]*?)(Channel|Ring) \d+(?:/\d+)?( : [^\n]*)\n"
                  + b"".join(b"(?:" + _LINE + rb"( : [^\n]*)\n)?" for _ in range(TAILS - 1))
                  + b"(?:" + _LINE + b"(?:" + b"|".join(b"\\%d" % g for g in range(3, TAILS + 3)) + rb")\n)*")


def channel_key(text: str) -> tuple[str, str] | None:
    """What tells channel lines apart but for the channel number: the text before ``Channel``/``Ring`` and
    from the `` : `` after it (None: neither word)."""
    start = max(text.find("Channel "), text.find("Ring "))
    return (text[:start], text[text.find(" : ", start):]) if start >= 0 else None


class Parser(Protocol):
    """What ``channel_run`` reads of ``parser.LineParser``."""

    _held: str | None
    _held_more: list[str] | None
    _seen: set[tuple[object, ...]]
    _table: FailureTable


def channel_run(parser: Parser, block: bytes, pos: int, line: str) -> tuple[int, int, str] | None:
    """The run of channel lines at ``block[pos:]`` right after ``line`` (just fed) that gives no event:
    (offset after it, its lines, its last line), or None where there is none or its lines might give one.
    What is held must be nothing, or ``line`` giving nothing when flushed."""
    held = parser._held
    if parser._table.record is not None or (held is not None and (
            held is not line or parser._held_more is not None or not _gives_nothing(parser, line))):
        return None
    m = _RUN.match(block, pos)
    if m is None:
        return None
    prefix = m.group(1)
    if len(prefix) < 6 or prefix[:1] == b"[" or not _plain(prefix):
        return None
    if held is not None and not line.startswith(prefix.decode()):  # else the run's first line might join it
        return None
    begin, tails = pos, set()
    for group in range(3, TAILS + 3):  # the lines that set the tails: the first with each must give nothing
        tail = m.group(group)
        if tail is None:
            break
        if tail not in tails:
            text = block[begin:m.end(group)].decode("utf-8", "replace")
            if not (_plain(tail) and channel_key(text) == (prefix.decode(), tail.decode())
                    and _gives_nothing(parser, text)):
                return None
            tails.add(tail)
        begin = m.end(group) + 1
    stop = m.end()
    last = block[block.rfind(b"\n", pos, stop - 1) + 1 or pos:stop - 1].decode()
    return stop, newlines(block, pos, stop), last


def _plain(data: bytes) -> bool:
    """ASCII without \\r or ESC: decoded as it is, no redraw, no colour (the gate's flags all plain)."""
    return data.isascii() and b"\r" not in data and b"\x1b" not in data


def _gives_nothing(parser: Parser, text: str) -> bool:
    """Whether the record ``text`` (a channel line) gives no event: the parser tests its key before anything
    else (no table record, no ``exitcode``, no ``]:`` at the end), and that key is reported."""
    return (" via " in text and "exitcode" not in text and not text.endswith(("]:", "]: "))
            and channel_key(text) in parser._seen)
