"""Slurm hostlists ("node[01-04,07],login1") expanded to host names, and host names folded into one
(``compress``, as ``scontrol show hostlist`` does). Pure: no IO.

On a cluster with Slurm, ``cockpit.fleet.probes.expand_hostlist`` asks ``scontrol show hostnames`` (the reference
implementation); this module is what runs everywhere else (a laptop, a login node without Slurm, the tests).

Why not python-hostlist (PyPI): it is GPL-2.0-or-later and cockpit is Apache-2.0, so depending on it would
put a copyleft licence on every install; it is also published as an sdist only. The grammar needed here is
the one ``cockpit.spec.formats.hostlist_count`` already accepts (same regular expression), so expansion and
counting can never disagree: the tests check ``len(expand(x)) == hostlist_count(x)`` on generated lists.
"""

from __future__ import annotations

import itertools
import re

from cockpit.spec.fields import MAX_HOSTS  # a typo like n[0-99999999] must fail
from cockpit.spec.formats import HOSTLIST, RANGE

__all__ = ["MAX_HOSTS", "HostlistError", "compress", "expand"]


class HostlistError(ValueError):
    """A hostlist that does not parse, or names too many hosts."""


def expand(text: str) -> list[str]:
    """Every host name in ``text``, in order; zero padding follows the lower bound ("n[08-10]" -> n08 n09 n10).

    Several bracket groups in one name multiply, the last varying fastest ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1
    r2n2), as ``scontrol show hostnames`` does. Raises HostlistError on malformed input.
    """
    text = text.strip()
    if not text or not HOSTLIST.match(text):
        raise HostlistError(f"{text!r} is not a hostlist (e.g. node[01-04,07],login1)")
    hosts: list[str] = []
    for part in _split_top(text):
        if part:
            hosts.extend(_expand_part(part, MAX_HOSTS - len(hosts)))
    if not hosts:
        raise HostlistError(f"{text!r} names no host")
    return hosts


_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def compress(hosts: list[str]) -> str:
    """``hosts`` as one hostlist: names that differ only in a trailing number of the same width folded into
    ranges ("n000".."n511" -> "n[000-511]"), in order of first appearance; ``expand`` gives them back (as a
    set). What a user reads where a run has hundreds of nodes (``cockpit ps``, folded stacks)."""
    groups: dict[tuple[str, int], list[int]] = {}
    for host in dict.fromkeys(hosts):
        m = _NUMBERED.match(host)
        key = (m.group(1), len(m.group(2))) if m else (host, -1)
        groups.setdefault(key, []).append(int(m.group(2)) if m else 0)
    parts = []
    for (head, width), numbers in groups.items():
        if width < 0 or len(numbers) == 1:
            parts.append(head if width < 0 else f"{head}{numbers[0]:0{width}d}")
            continue
        spans = [f"{lo:0{width}d}" if lo == hi else f"{lo:0{width}d}-{hi:0{width}d}" for lo, hi in _runs(numbers)]
        parts.append(f"{head}[{','.join(spans)}]")
    return ",".join(parts)


def _runs(numbers: list[int]) -> list[tuple[int, int]]:
    """Sorted, distinct ``numbers`` as (first, last) runs of consecutive ones."""
    out: list[tuple[int, int]] = []
    for n in sorted(set(numbers)):
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def _split_top(text: str) -> list[str]:
    """Split on the commas that are not inside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _expand_part(part: str, budget: int) -> list[str]:
    pieces = re.split(r"\[([^\]]*)\]", part)  # literal, group, literal, group, ..., literal
    literals, groups = pieces[0::2], [_range_values(g) for g in pieces[1::2]]
    total = 1
    for values in groups:
        total *= len(values)
    if total > budget:
        raise HostlistError(f"{part!r} names more than {MAX_HOSTS} hosts")
    out = []
    for combo in itertools.product(*groups):
        name = literals[0]
        for value, literal in zip(combo, literals[1:], strict=True):
            name += value + literal
        out.append(name)
    return out


def _range_values(group: str) -> list[str]:
    values: list[str] = []
    for item in group.split(","):
        m = re.fullmatch(RANGE, item)
        if not m:
            raise HostlistError(f"[{group}]: {item!r} is not a number or a range (of at most 12 digits)")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise HostlistError(f"[{group}]: range {item} runs backwards")
        if hi - lo >= MAX_HOSTS:
            raise HostlistError(f"[{group}]: range {item} names more than {MAX_HOSTS} hosts")
        width = len(m.group(1))
        values.extend(str(n).zfill(width) for n in range(lo, hi + 1))
    return values
