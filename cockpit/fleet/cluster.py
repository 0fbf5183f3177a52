"""Naming the nodes: hostlists expanded, and the cluster file (~/.config/cockpit/cluster.yaml) that says which
nodes there are, how to reach them and which python probes them. NodesError is any of these gone wrong.

The cluster file is read the way job files are (cockpit.spec.jobfile, cockpit.spec.yamlpos): bounded in size,
safe YAML with limits on nesting and aliases, every value remembered with its position. So a mistake in it
names ``cluster.yaml:LINE:COL: field: what (hint: ...)`` like a job file's would, instead of a bare PyYAML
trace or an unpositioned complaint; all the problems of the file are found at once, one line each, in order.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cockpit.remote import SSHOptions
from cockpit.slurm import hostlist
from cockpit.spec import jobfile, yamlpos
from cockpit.spec.yamlpos import Positions, Problem, dotted


class NodesError(ValueError):
    """Node names that cannot be worked out: one clear line for the user."""


Hostnames = Callable[[str], "list[str] | None"]  # hostlist -> names, None: cannot answer


def expand_hostlist(text: str, slurm: Hostnames | None = None) -> list[str]:
    """Host names of a hostlist: ``slurm``'s answer when given and it answers (``scontrol_hostnames()``),
    else (or when that fails: Slurm installed but not configured here) cockpit.slurm.hostlist's expansion. No IO
    of its own: a caller that wants Slurm's word passes it."""
    hosts = slurm(text) if slurm is not None else None
    if hosts:
        return hosts
    try:
        return hostlist.expand(text)
    except hostlist.HostlistError as exc:
        raise NodesError(str(exc)) from None


def scontrol_hostnames(scontrol: str | None = None) -> Hostnames | None:
    """``scontrol show hostnames`` (``scontrol``: its path; None: the one on PATH), or None where it is not
    installed: the expansion for expand_hostlist where Slurm's own word is wanted."""
    path = shutil.which("scontrol") if scontrol is None else scontrol
    return (lambda text: _scontrol_hostnames(path, text)) if path else None


def _scontrol_hostnames(scontrol: str, text: str) -> list[str] | None:
    """Slurm's own expansion, or None when scontrol cannot answer (no controller, no config, hung)."""
    try:
        r = subprocess.run([scontrol, "show", "hostnames", text], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.split() if r.returncode == 0 else None



@dataclass(frozen=True)
class Cluster:
    """The cluster file: which nodes, how to reach them, which python runs the probe there."""

    hosts: tuple[str, ...] = ()
    ssh: SSHOptions = field(default_factory=SSHOptions)
    python: str = "python3"
    partition: str | None = None
    path: str | None = None


def cluster_path() -> Path:
    """$XDG_CONFIG_HOME/cockpit/cluster.yaml (default ~/.config/cockpit/cluster.yaml)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "cockpit" / "cluster.yaml"


_TOP_KEYS = ("hosts", "ssh", "python", "partition")
# ssh key -> (accepted types, what to write); bool is refused where it is not named (YAML's `yes` is no port).
_SSH_KEYS: dict[str, tuple[tuple[type, ...], str, str]] = {
             "user": ((str,), "a user name", "alice"), "port": ((int,), "a port number", "22"),
             "identity": ((str,), "the path of a private key", "~/.ssh/id_ed25519"),
             "config": ((str,), "the path of an ssh config", "~/.ssh/config"),
             "known_hosts": ((str,), "the path of a known_hosts file", "~/.ssh/known_hosts"),
             "connect_timeout": ((int, float), "a number of seconds", "10"),
             "keepalive": ((int, float), "a number of seconds", "5"),
             "trust_new_hosts": ((bool,), "true or false", "false")}
_EXAMPLE = "hosts: [login1, gpu[01-16]]"


def load_cluster(path: str | Path | None = None) -> Cluster | None:
    """Read the cluster file (default: cluster_path(); None when that does not exist). Raises NodesError with
    one ``path:line:col: field: what (hint: ...)`` line per problem."""
    p = Path(path) if path else cluster_path()
    if path is None and not p.exists():
        return None
    try:
        data, positions = yamlpos.load(jobfile.read_text(p))
    except OSError as exc:
        raise NodesError(f"{p}: cannot read the cluster file: {exc.strerror or exc}") from None
    except yamlpos.LoadError as exc:  # its words are a job file's: say which file this is
        raise _error(p, [replace(q, message=q.message.replace("job file", "cluster file"),
                                 hint=q.hint and q.hint.replace("job file", "cluster file"))
                         for q in exc.problems]) from None
    check = _Check(positions)
    cluster = _build(check, {} if data is None else data, str(p))
    if check.problems:
        raise _error(p, check.problems)
    return cluster


def _error(path: Path, problems: list[Problem]) -> NodesError:
    ordered = sorted(problems, key=lambda q: (q.line, q.col))
    return NodesError("\n".join(q.format(str(path)) for q in ordered))


class _Check:
    """Collects positioned problems while the file's values are read."""

    def __init__(self, positions: Positions):
        self.positions = positions
        self.problems: list[Problem] = []

    def add(self, path: tuple, message: str, hint: str | None = None) -> None:
        line, col = self.positions.of(path)
        self.problems.append(Problem(line, col, dotted(path), message, hint))


def _build(check: _Check, data: object, source: str) -> Cluster | None:
    if not isinstance(data, dict):
        check.add((), f"expected a mapping of settings, not {_kind(data)}", f"start with {_EXAMPLE}")
        return None
    for key in data:
        if key not in _TOP_KEYS:
            check.add((key,), "unknown setting", f"known: {', '.join(_TOP_KEYS)}")
    hosts = _hosts(check, data.get("hosts", []))
    python = _text(check, data, "python", "the probe's interpreter on the nodes, e.g. /opt/conda/bin/python")
    partition = _text(check, data, "partition", "a Slurm partition name, e.g. gpu")
    options = _ssh(check, data.get("ssh") or {})
    return Cluster(tuple(hosts), options, python or "python3", partition, source)


def _hosts(check: _Check, value: object) -> list[str]:
    if not isinstance(value, list):
        check.add(("hosts",), f"must be a list, not {_kind(value)}", f"write it in brackets: {_EXAMPLE}")
        return []
    slurm = scontrol_hostnames()
    out: list[str] = []
    for i, text in enumerate(value):
        if isinstance(text, bool) or not isinstance(text, (str, int)):
            check.add(("hosts", i), f"must be a host name or hostlist, not {_kind(text)}", f"e.g. {_EXAMPLE}")
            continue
        try:
            out += expand_hostlist(str(text), slurm)
        except NodesError as exc:
            check.add(("hosts", i), str(exc), "a range is written gpu[01-16] or gpu[1,3,5-8]")
    return out


def _text(check: _Check, data: dict, key: str, hint: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        check.add((key,), f"must be text, not {_kind(value)}", hint)
        return None
    return str(value)


def _ssh(check: _Check, ssh: object) -> SSHOptions:
    if not isinstance(ssh, dict):
        check.add(("ssh",), f"must be a mapping, not {_kind(ssh)}", "e.g. ssh: {user: alice, port: 22}")
        return SSHOptions()
    ok: dict[str, Any] = {}  # each value of the type _SSH_KEYS gives it
    for key, value in ssh.items():
        if key not in _SSH_KEYS:
            check.add(("ssh", key), "unknown ssh setting", f"known: {', '.join(_SSH_KEYS)}")
            continue
        types, what, example = _SSH_KEYS[key]
        if not isinstance(value, types) or (isinstance(value, bool) and types != (bool,)):
            check.add(("ssh", key), f"must be {what}, not {_kind(value)}", f"e.g. {key}: {example}")
        elif key == "port" and isinstance(value, int) and not 0 < value < 65536:  # an int: checked above
            check.add(("ssh", key), f"port {value} is out of range", "a TCP port is 1 to 65535, ssh's is 22")
        elif key in ("connect_timeout", "keepalive") and isinstance(value, (int, float)) and value <= 0:
            check.add(("ssh", key), f"must be more than 0 seconds, not {value}", f"e.g. {key}: {example}")
        else:
            ok[key] = value
    return SSHOptions(
        user=ok.get("user"), port=ok.get("port"), identity=(ok["identity"],) if "identity" in ok else (),
        config=(str(Path(ok["config"]).expanduser()),) if "config" in ok else None,
        known_hosts=ok.get("known_hosts"), connect_timeout=float(ok.get("connect_timeout", 10)),
        keepalive_interval=float(ok.get("keepalive", 5)), trust_new_hosts=bool(ok.get("trust_new_hosts")))


def _kind(value: object) -> str:
    """How a value reads in a message: "a list", "the text 'x'", "nothing"."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return f"the text {value[:40]!r}" + ("..." if len(value) > 40 else "")
    names: dict[type, str] = {dict: "a mapping", list: "a list"}
    return names.get(type(value), type(value).__name__)
