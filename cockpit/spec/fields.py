"""Field-level checks for job files: each reads one value, records a positioned Problem if it is wrong,
and returns a usable default so that every other problem in the file is still found. What a well-formed
value looks like (names, hosts, Slurm times, hostlists) is cockpit.spec.formats; the bounds are here."""

from __future__ import annotations

import json
import re
from typing import Any, TypeGuard

from cockpit.spec import formats
from cockpit.spec.yamlpos import KeyPath, Positions, Problem, YamlMap, dotted

MAX_GPUS = 1024  # per node: ids 0..1023; no machine has more
MAX_PROCS = 1024  # ranks per node
MAX_NODES = MAX_HOSTS = 100_000  # nodes of a job, hosts of a hostlist: a typo like n[0-99999999] must fail
MAX_TRIALS = 10_000  # sweep trials (the product of the grid's value counts)
MAX_SEED = 2**32 - 1  # numpy's seed range; torch's is wider
# Variables cockpit sets itself: a user value would silently break ranks, GPU pinning or the contract.
_OWNED_ENV = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
              "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"}
_OWNED_HINT = {"CUDA_VISIBLE_DEVICES": "pick GPUs with gpus: [0, 1]", "MASTER_PORT": "use master_port:",
               "CUDA_DEVICE_ORDER": "cockpit always sets PCI_BUS_ID, the nvidia-smi order"}


def _close_matches(word: str, known: tuple[str, ...], cutoff: float) -> list[str]:
    """difflib's closest match of ``word`` among ``known``; difflib is imported only for a file with a wrong key
    or value (a valid job file's validate and render do not pay for it: issue 29)."""
    import difflib

    return difflib.get_close_matches(word, known, n=1, cutoff=cutoff)


class Checker:
    """Collects problems while reading values out of the loaded YAML."""

    def __init__(self, positions: Positions):
        self.positions = positions
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []  # the job is valid with them; validate and run print them

    def problem(self, path: KeyPath, message: str, hint: str | None = None) -> None:
        line, col = self.positions.of(path)
        self.problems.append(Problem(line, col, dotted(path), message, hint))

    def warn(self, path: KeyPath, message: str, hint: str | None = None) -> None:
        line, col = self.positions.of(path)
        self.warnings.append(Problem(line, col, dotted(path), message, hint, warning=True))

    def mapping(self, value: object, path: KeyPath, known: tuple[str, ...]) -> TypeGuard[YamlMap]:
        """True if ``value`` is a mapping; unknown keys are reported with a did-you-mean."""
        if not isinstance(value, dict):
            self.problem(path, "expected a mapping of key: value lines", f"keys: {', '.join(known)}")
            return False
        for key in value:
            if key not in known:
                close = _close_matches(key, known, 0.6)
                hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(known)}"
                self.problem((*path, key), f"unknown key {key!r}", hint)
        return True

    def string(self, data: YamlMap, path: KeyPath) -> str | None:
        value = data.get(path[-1])
        if value is None:
            return None
        if isinstance(value, (dict, list, bool)):
            self.problem(path, f"expected a string, got {_kind(value)}")
            return None
        text = str(value)
        if not text.strip() or "\n" in text or "\0" in text:
            self.problem(path, "must be one non-empty line")
            return None
        return text

    def sbatch_value(self, data: YamlMap, path: KeyPath) -> str | None:
        """A string that becomes part of an ``#SBATCH`` line, which sbatch reads without a shell: one line of
        printable text (a carriage return or a line separator would end the directive where sbatch stops)."""
        text = self.string(data, path)
        if text is not None and (bad := formats.unprintable(text)) is not None:
            self.problem(path, f"{_shown(text)} contains the control character {bad!r}",
                         "an #SBATCH line holds plain text only")
            return None
        return text

    def python_module(self, data: YamlMap, path: KeyPath) -> str | None:
        """``module:``: what `python -m` runs, a dotted name of Python identifiers (pkg.train)."""
        text = self.string(data, path)
        if text is not None and not all(part.isidentifier() for part in text.split(".")):
            self.problem(path, f"{_shown(text)} is not a Python module name",
                         "a dotted name as `python -m` takes it, e.g. mypkg.train (for a file: script: train.py)")
            return None
        return text

    def name(self, data: YamlMap, path: KeyPath) -> str:
        value = data.get(path[-1])
        if value is None:
            self.problem(path, "every job needs a name", "name: my-job")
            return "job"
        text = str(value)
        if not formats.NAME.fullmatch(text):
            self.problem(path, f"{text!r} is not a usable job name",
                         "letters, digits, '.', '_' and '-', at most 64, starting with a letter or digit")
            return "job"
        return text

    def str_list(self, data: YamlMap, path: KeyPath, split_hint: str | None = None) -> tuple[str, ...]:
        """A list of plain values. A single value is a one-item list (YAML users write it both ways), unless
        ``split_hint`` is given and the value has spaces: `args: "--epochs 1"` would pass ONE argument."""
        value = data.get(path[-1])
        if value is None:
            return ()
        if split_hint is not None and isinstance(value, str) and len(value.split()) > 1:
            self.problem(path, f"{value!r} is one string, so the script would get it as a single argument",
                         split_hint.format(items=", ".join(_flow_item(w) for w in value.split())))
            return ()
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, list):
            self.problem(path, f"expected a list, got {_kind(value)}", "write [a, b] or one '- item' per line")
            return ()
        out = []
        for i, item in enumerate(value):
            if isinstance(item, (dict, list)) or item is None:
                self.problem((*path, i), f"expected a plain value, got {_kind(item)}",
                             "quote it if it contains ': ' or starts with '{' or '['")
                continue
            if "\0" in str(item):
                self.problem((*path, i), "contains a NUL character")
                continue
            out.append(_plain(item))
        return tuple(out)

    def choice(self, data: YamlMap, path: KeyPath, choices: tuple[str, ...], default: str) -> str:
        value = data.get(path[-1])
        if value is None:
            return default
        if str(value) not in choices:
            same = [c for c in choices if c.lower() == str(value).lower()]  # `backend: DDP`: the case only
            close = same or _close_matches(str(value), choices, 0.5)
            hint = f"did you mean {close[0]!r}?" if close else f"one of: {' | '.join(choices)}"
            self.problem(path, f"{value!r} is not one of {' | '.join(choices)}", hint)
            return default
        return str(value)

    def integer(self, data: YamlMap, path: KeyPath, default: int, minimum: int | None = None,
                maximum: int | None = None) -> int:
        value = data.get(path[-1])
        if value is None:
            return default
        if not isinstance(value, int) or isinstance(value, bool):
            self.problem(path, f"expected a whole number, got {value!r}")
            return default
        if minimum is not None and value < minimum:
            self.problem(path, f"must be at least {minimum}, got {value}")
            return default
        if maximum is not None and value > maximum:
            self.problem(path, f"must be at most {maximum}, got {value}")
            return default
        return value

    def optional_integer(self, data: YamlMap, path: KeyPath, minimum: int | None = None,
                         maximum: int | None = None) -> int | None:
        """A whole number, or None where the key is not given (its default is worked out later)."""
        if data.get(path[-1]) is None:
            return None
        return self.integer(data, path, 0, minimum, maximum)

    def int_or_auto(self, data: YamlMap, path: KeyPath, minimum: int = 0, maximum: int | None = None) -> int | None:
        value = data.get(path[-1])
        if value is None or value == "auto":
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            self.problem(path, f"expected a whole number or auto, got {value!r}")
            return None
        if value < minimum or (maximum is not None and value > maximum):
            upper = f"..{maximum}" if maximum is not None else " or more"
            self.problem(path, f"{value} is out of range", f"use {minimum}{upper}, or auto")
            return None
        return value

    def boolean(self, data: YamlMap, path: KeyPath, default: bool) -> bool:
        value = data.get(path[-1])
        if value is None:
            return default
        if not isinstance(value, bool):
            self.problem(path, f"expected true or false, got {value!r}")
            return default
        return value

    def env(self, data: YamlMap, path: KeyPath) -> tuple[tuple[str, str], ...]:
        value = data.get(path[-1])
        if value is None:
            return ()
        if not isinstance(value, dict):
            self.problem(path, "expected a mapping of NAME: value", "env: {NCCL_DEBUG: INFO}")
            return ()
        out = []
        for key, item in value.items():
            key_path = (*path, key)
            if not formats.ENV_KEY.fullmatch(key):
                self.problem(key_path, f"{key!r} is not a valid environment variable name",
                             "letters, digits and '_', not starting with a digit")
            elif key in _OWNED_ENV or key.startswith("COCKPIT_"):
                self.problem(key_path, f"{key} is set by cockpit for every rank",
                             _OWNED_HINT.get(key, "remove it; see the environment contract in the README"))
            elif isinstance(item, (dict, list)) or item is None or "\0" in str(item):
                self.problem(key_path, f"expected a plain value, got {_kind(item)}", 'quote it: NAME: "value"')
            else:
                if (meant := _misspelt_ifname(key)) is not None:
                    self.warn(key_path, f"{key} is read by neither torch nor NCCL, so it selects no interface",
                              f"rename it: {meant}: {_plain(item)}")
                out.append((key, _plain(item)))
        return tuple(out)

    def env_names(self, data: YamlMap, path: KeyPath) -> tuple[str, ...]:
        """A list of environment variable names (secret_env:)."""
        names = self.str_list(data, path)
        for i, name in enumerate(names):
            if not formats.ENV_KEY.fullmatch(name):
                self.problem((*path, i), f"{name!r} is not a valid environment variable name",
                             "letters, digits and '_', not starting with a digit")
        return names

    def gpu_ids(self, raw: list[Any], path: KeyPath) -> tuple[int, ...]:
        ids: list[int] = []
        for i, item in enumerate(raw):
            if not isinstance(item, int) or isinstance(item, bool) or not 0 <= item < MAX_GPUS:
                self.problem((*path, i), f"{item!r} is not a GPU id",
                             f"ids are nvidia-smi indices: 0, 1, ... up to {MAX_GPUS - 1}")
            elif item in ids:
                self.problem((*path, i), f"GPU {item} is listed twice", "list each GPU once")
            else:
                ids.append(item)
        return tuple(ids)

    def hosts(self, data: YamlMap, path: KeyPath) -> tuple[str, ...]:
        """ssh nodes: each [user@]host[:port] or [IPv6]; refused otherwise (the names reach shell text)."""
        hosts = self.str_list(data, path)
        for i, host in enumerate(hosts):
            if not formats.HOST.fullmatch(host) or not formats.port_ok(host):
                self.problem((*path, i), f"{_shown(host)} is not a host name",
                             "host, user@host, host:port or [IPv6]: letters, digits, '.', '_', '-'")
        return hosts  # a bad one is a problem already, so no spec is made from them

    def modules(self, data: YamlMap, path: KeyPath) -> tuple[str, ...]:
        """`module load` names: one module each, no spaces or shell syntax."""
        modules = self.str_list(data, path)
        for i, name in enumerate(modules):
            if not formats.MODULE.fullmatch(name):
                self.problem((*path, i), f"{_shown(name)} is not a module name",
                             "one module per item, e.g. cuda/12.1; letters, digits and . _ + / @ : = -")
        return modules  # a bad one is a problem already, so no spec is made from them

    def slurm_time(self, data: YamlMap, path: KeyPath) -> str | None:
        text = self.string(data, path)
        if text is not None and not formats.SLURM_TIME.fullmatch(text):
            self.problem(path, f"{text!r} is not a Slurm time limit",
                         'minutes, "HH:MM:SS" or "D-HH:MM:SS" (quote it: YAML reads 1:30 as a number)')
            return None
        return text

    def slurm_mem(self, data: YamlMap, path: KeyPath) -> str | None:
        text = self.string(data, path)
        if text is not None and not formats.SLURM_MEM.fullmatch(text):
            self.problem(path, f"{text!r} is not a Slurm memory size", 'e.g. "64G" or "500M"')
            return None
        return text

    def sbatch_options(self, data: YamlMap, path: KeyPath) -> tuple[str, ...]:
        options = self.str_list(data, path)
        for i, opt in enumerate(options):
            if not opt.startswith("--") or formats.unprintable(opt) is not None:
                self.problem((*path, i), f"{_shown(opt)} is not an sbatch long option",
                             'e.g. "--exclusive": one line of plain text (sbatch stops reading #SBATCH lines at a '
                             "broken one)")
        return tuple(o for o in options if o.startswith("--") and formats.unprintable(o) is None)

    def grid(self, data: YamlMap, path: KeyPath) -> tuple[tuple[str, tuple[str, ...]], ...]:
        value = data.get(path[-1])
        if not isinstance(value, dict) or not value:
            self.problem(path, "a sweep needs a grid of argument: [values]", "grid: {lr: [0.1, 0.01]}")
            return ()
        out = []
        for key in value:
            flag = key if key.startswith("-") else f"--{key}"
            if not self.flag_name(flag, (*path, key)):
                continue
            items = self.str_list(value, (*path, key))
            if not items:
                self.problem((*path, key), "needs at least one value", f"{key}: [a, b]")
                continue
            out.append((flag, items))
        return tuple(out)

    def flag_name(self, flag: str, path: KeyPath) -> bool:
        """A sweep's argument name (``--lr``); a problem at ``path`` when it is not one."""
        if formats.FLAG.fullmatch(flag):
            return True
        self.problem(path, f"{path[-1]!r} is not an argument name", "e.g. lr or --lr")
        return False


# Interface selectors with a near-miss name (seed 004 wrote GLOO_IFACE): torch 2.13's libraries name only
# GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME and TP_SOCKET_IFNAME (tensorpipe) among *IFNAME*/*IFACE* variables, and
# NCCL's own list has NCCL_SOCKET_IFNAME as its one interface selector. Any other spelling is silently ignored.
_IFNAME_LIKE = re.compile(r"\A(GLOO|NCCL|TP)_(?:SOCKET_)?(?:IFACES?|IFNAMES?|IF_NAME|INTERFACES?|NIC)\Z")


def _misspelt_ifname(name: str) -> str | None:
    """The real variable a near-miss interface name meant (GLOO_IFACE -> GLOO_SOCKET_IFNAME), else None."""
    match = _IFNAME_LIKE.fullmatch(name)
    real = f"{match.group(1)}_SOCKET_IFNAME" if match else None
    return real if real != name else None


def _flow_item(word: str) -> str:
    """``word`` as an item of a YAML flow list: quoted unless YAML reads it as the same text."""
    return word if re.fullmatch(r"[A-Za-z0-9_./=+-]+", word) else json.dumps(word)


def _shown(text: str, limit: int = 60) -> str:
    """``text`` for a message: repr (so a newline shows as \\n), shortened."""
    shown = repr(text)
    return shown if len(shown) <= limit else shown[:limit - 4] + "...'"


def _plain(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _kind(value: object) -> str:
    return {dict: "a mapping", list: "a list", type(None): "nothing"}.get(type(value), repr(value))
