"""What a hard-wrapped record looks like: the rules that ``parser.LineParser`` joins lines back by and that
the block walk (``block``) replays skipped lines by, so both decide alike.

Pure and stdlib-only, like the rest of the parser.
"""

from __future__ import annotations

import re

from cockpit.logs.parse.prefix import strip_ansi

WRAP_MIN = 80
"""A line shorter than this ends its record: terminals narrower than 80 columns are not worth a guess."""
WRAP_MAX_PARTS = 16
WRAP_MAX_CHARS = 4096
"""A hard-wrapped record is at most this many lines and characters (a watchdog message at 80 columns is ~5
lines). Past either, the next line starts a record of its own: fixed-width output (a loop printing
``100123 1764038000.1 rank=0 ...``) looks like one endless wrap, and joining it all would be quadratic."""

# A line that begins like this starts a new record, so it cannot continue a hard-wrapped one: a launcher's or a
# logger's prefix (NCCL's "host-1:pid:tid [dev]", whatever the host's characters; syslog's "Nov 27 09:00:05";
# dates, times, level words), a traceback's parts, a shell's xtrace.
FRESH = re.compile(
    r"\s*\[|\(|<|\s*\d{4}[-/]\d\d[-/]\d\d|\d\d:\d\d:\d\d|\d{1,6}: |[IWEF]\d{3,4} |Traceback|During handling|"
    r"The above exception|[A-Za-z_][\w.]*:|[\w.\-]+: |[\w.]*(?:Error|Exception|Warning|Interrupt)\b|"
    r"[^\s:]+:\d+:\d+ \[|\s+File \"|\s*frame #|Exception raised|terminate called|\s*what\(\)|NCCL |#|\*\*\*|"
    r"=+\s*$|-+\s*$|[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d|(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\b|\+ ")


def unresidue(text: str) -> str:
    """``text`` without colour residue at its start: what the gate's ``RESIDUE`` flag asks for, for a line
    that holds no ESC (the scanner marks those). A line without the flag is returned as it is."""
    return strip_ansi(text) if text[:1] == "[" else text
