"""What the values of a job file look like: job and environment variable names, ssh hosts, environment
modules, Slurm times, memory sizes and hostlists, as regular expressions, plus counting a hostlist's hosts.
Pure; cockpit.spec.fields reports a value that does not match, and cockpit.slurm.hostlist expands exactly the
hostlists ``HOSTLIST`` accepts.
"""

from __future__ import annotations

import re

# Every pattern is anchored with \A and \Z, never ^ and $: `$` also matches before a final newline, so a name
# ending in "\n" would pass and then break the sbatch header, an `export` line or a run directory's name. ASCII
# only: `\d` would take any Unicode digit ("١٢" as a time), which Slurm and the kernel do not.
NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
ENV_KEY = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")
SLURM_TIME = re.compile(r"\A(\d+-\d{1,2}(:\d{1,2}(:\d{1,2})?)?|\d+(:\d{1,2}(:\d{1,2})?)?|UNLIMITED|INFINITE)\Z",
                        re.ASCII)
SLURM_MEM = re.compile(r"\A\d+[KMGT]?\Z", re.ASCII)
# A node as ssh takes it: [user@]host[:port], host a DNS name / ssh config alias / IPv4, or [IPv6]. Nothing
# else: the name reaches ssh's command line, the rendered scripts and their comments.
HOST = re.compile(r"\A(?:[A-Za-z0-9_][A-Za-z0-9._-]{0,63}@)?"
                  r"(?:[A-Za-z0-9_](?:[A-Za-z0-9._-]{0,252})|\[[0-9A-Fa-f:.]{2,45}(?:%[A-Za-z0-9_.-]{1,15})?\])"
                  r"(?::[0-9]{1,5})?\Z")
# An environment-module name, e.g. cuda/12.1, gcc@12.2, python/3.11-gcc: no spaces, quotes or shell syntax.
MODULE = re.compile(r"\A[A-Za-z0-9_][A-Za-z0-9_.+/@:=-]{0,127}\Z")
# A sweep's argument name, with its dashes: --lr, -b, --model.depth.
FLAG = re.compile(r"\A--?[A-Za-z0-9][A-Za-z0-9_.-]*\Z")

HOST_PART = r"[A-Za-z0-9._-]*(?:\[[0-9,-]+\][A-Za-z0-9._-]*)*"
HOSTLIST = re.compile(rf"\A{HOST_PART}(?:,{HOST_PART})*\Z")
RANGE = r"([0-9]{1,12})(?:-([0-9]{1,12}))?"  # one item of a bracket group; 12 digits is past any count we accept


def unprintable(text: str) -> str | None:
    """The first character of ``text`` that is not printable (a control character, a tab, a line or paragraph
    separator), else None: in an sbatch line such a character ends the directive early."""
    return None if text.isprintable() else next(c for c in text if not c.isprintable())


def hostlist_count(text: str) -> int | None:
    """How many hosts a Slurm hostlist names ("n[01-04,07],login1" -> 5), or None if malformed.

    Counting needs no expansion, so this stays small; expanding names is scontrol's job on a cluster.
    """
    if not HOSTLIST.fullmatch(text):
        return None
    total = 0
    for part in re.findall(HOST_PART, text):
        if not part:
            continue
        count = 1
        for group in re.findall(r"\[([^\]]*)\]", part):
            n = _range_count(group)
            if n is None:
                return None
            count *= n
        total += count
    return total or None


def _range_count(group: str) -> int | None:
    count = 0
    for item in group.split(","):
        m = re.fullmatch(RANGE, item)
        if not m:
            return None
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            return None
        count += hi - lo + 1
    return count


def port_ok(host: str) -> bool:
    """Whether the :port of a ``HOST`` (if it has one) is a TCP port."""
    port = re.search(r":([0-9]+)\Z", host) if not host.endswith("]") else None
    return port is None or 1 <= int(port.group(1)) <= 65535
