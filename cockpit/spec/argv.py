"""The kernel's limits on what reaches a rank through exec(2), checked when the job file is read.

Linux refuses an exec (E2BIG, "Argument list too long") when one argument or one NAME=value of the environment
is longer than MAX_ARG_STRLEN, or when all of them together pass ARG_MAX. The node script's bash then exits
126, no rank starts, and no log says why; so a job whose own arguments or environment are that large is refused
by `cockpit validate` with the field, its size and the limit. ARG_MAX is a fact of the machine (a quarter of the
stack limit, `ulimit -s`): the caller passes it, else this machine's is read.
"""

from __future__ import annotations

import os
from typing import Protocol

from cockpit.spec.fields import Checker
from cockpit.spec.sections import SweepSpec
from cockpit.spec.yamlpos import KeyPath

MAX_ARG_STRLEN = 32 * 4096  # Linux: 32 pages, the NUL included; with 4 KiB pages, the smallest (arm64 may have 64)
# What the job's own strings must leave of ARG_MAX: the contract variables, the wrapper's and torchrun's words,
# and the environment the ranks inherit (a login shell's is a few KiB).
RESERVE = 64 * 1024
_POINTER = 8  # each string also costs its argv/envp pointer
_HINT = "pass a large value in a file and give its path"


def system_arg_max() -> int:
    """This machine's ARG_MAX (sysconf), or Linux's floor of 128 KiB when it cannot be read."""
    try:
        value = os.sysconf("SC_ARG_MAX")
    except (ValueError, OSError):
        value = -1
    return value if value > 0 else MAX_ARG_STRLEN


def exec_size(text: str) -> int:
    """Bytes ``text`` takes in an exec: its UTF-8 and the NUL."""
    return (len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))) + 1


_Words = list[tuple[KeyPath, str]]  # each string with where the job file writes it


class _Job(Protocol):
    """What the limits read of a JobSpec (typed structurally: model.py imports this module)."""

    @property
    def args(self) -> tuple[str, ...]: ...
    @property
    def env(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def node_env(self) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]: ...
    @property
    def sweep(self) -> SweepSpec | None: ...


def check_exec_limits(check: Checker, spec: _Job, arg_max: int | None = None) -> None:
    """One problem per field whose strings pass MAX_ARG_STRLEN, and one when the job's arguments and
    environment together leave less than RESERVE of ``arg_max`` (None: this machine's)."""
    arg_max = system_arg_max() if arg_max is None else arg_max
    args: _Words = [(("args", i), a) for i, a in enumerate(spec.args)]
    env: _Words = [(("env", k), f"{k}={v}") for k, v in spec.env]
    nodes: list[_Words] = [[(("node_env", h, k), f"{k}={v}") for k, v in pairs] for h, pairs in spec.node_env]
    searched = _searched(check, spec.sweep)
    kinds: list[tuple[_Words, str]] = [(args, "argument"), (env, "environment variable"),
                                       *((n, "environment variable") for n in nodes),
                                       *((w, "argument") for _, w in searched)]
    for words, kind in kinds:
        _each(check, words, kind)
    own_args, own_env = _total(args), _total(env)
    total = own_args + own_env + max(map(_total, nodes), default=0)
    total += sum(_cost(flag) + max(_cost(v) for _, v in words) for flag, words in searched if words)
    if total > arg_max - RESERVE:
        check.problem(("env",) if own_env > own_args else ("args",),
                      f"the job's arguments and environment take {total} bytes; with what cockpit and the shell add, "
                      f"that passes the kernel's limit for one exec, ARG_MAX = {arg_max} bytes, and no rank would "
                      "start ('Argument list too long')", _HINT)


def _each(check: Checker, words: list[tuple[KeyPath, str]], kind: str) -> None:
    """The first string over MAX_ARG_STRLEN in ``words``, and how many more there are."""
    over = [(path, text) for path, text in words if exec_size(text) > MAX_ARG_STRLEN]
    if not over:
        return
    path, text = over[0]
    more = f" ({len(over) - 1} more like it)" if len(over) > 1 else ""
    check.problem(path, f"this {kind} is {exec_size(text) - 1} bytes, over the kernel's limit for one "
                  f"{kind} ({MAX_ARG_STRLEN - 1} bytes, MAX_ARG_STRLEN): no rank would start ('Argument list "
                  f"too long'){more}", _HINT)


def _cost(text: str) -> int:
    return exec_size(text) + _POINTER


def _total(words: list[tuple[KeyPath, str]]) -> int:
    return sum(_cost(text) for _, text in words)


def _searched(check: Checker, sweep: SweepSpec | None) -> list[tuple[str, list[tuple[KeyPath, str]]]]:
    """Each flag a sweep searches, with the values a trial may give it and where each is written (a range's
    draw is a short number: one stand-in of its longest form)."""
    if sweep is None:
        return []
    out: list[tuple[str, list[tuple[KeyPath, str]]]] = []
    for flag, values in sweep.grid:
        key = _key(check, ("sweep", "grid"), flag)
        out.append((flag, [(("sweep", "grid", key, j), v) for j, v in enumerate(values)]))
    for p in sweep.params:
        key = _key(check, ("sweep", "params"), p.flag)
        values = p.values if p.kind == "choice" else ("-1.23457e-300",)
        out.append((p.flag, [(("sweep", "params", key, p.kind, j), v) for j, v in enumerate(values)]))
    return out


def _key(check: Checker, parent: KeyPath, flag: str) -> str:
    """The key as the file writes it: ``lr`` or ``--lr``."""
    return flag if (*parent, flag) in check.positions.at else flag.lstrip("-")
