"""The job file's `recover:` block: what cockpit does when a run fails or hangs (cockpit.launch.recovery).

    recover:
      attempts: 3          # relaunches after the first try; 0 (the default): off
      on: [failure, stall] # what starts one: a rank that failed, a stall the watchdog found
      apply_fixes: false   # true: a cause a configuration fix explains is retried with that fix
      spare_nodes: []      # ssh jobs: nodes to use in place of one the diagnosis blames
      min_nodes: 2         # ssh jobs: with no spare left, go on without the blamed node down to this many nodes

On Slurm a relaunch is the batch script submitted again, with --exclude of the node the diagnosis blamed
(cockpit.launch.slurm.relaunch); on ssh the blamed node's place (its node rank) goes to the first spare left
(cockpit.launch.ssh.spare).

A stop a person asked for never starts an attempt. The block's frozen value and its reader, which checks it
through a Checker (positioned problems, usable defaults), as cockpit.spec.sections does for slurm: and sweep:.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cockpit.spec.fields import Checker
from cockpit.spec.yamlpos import YamlMap

Trigger = Literal["failure", "stall"]
TRIGGERS: tuple[Trigger, ...] = ("failure", "stall")
MAX_ATTEMPTS = 100  # a run that failed 100 times wants a person, not a 101st try
_KEYS = ("attempts", "on", "apply_fixes", "spare_nodes", "min_nodes")


@dataclass(frozen=True)
class RecoverSpec:
    """The `recover:` block. ``attempts`` 0 means off: the run ends at its first failure, as without the block."""

    attempts: int = 0
    on: tuple[Trigger, ...] = TRIGGERS  # each at most once, in file order
    apply_fixes: bool = False
    spare_nodes: tuple[str, ...] = ()
    min_nodes: int | None = None  # None: never fewer nodes than the job names

    @property
    def enabled(self) -> bool:
        return self.attempts > 0

    def to_dict(self) -> dict[str, object]:
        """What status.json keeps of it (``recover``): the supervisor reads the policy there, not the YAML."""
        return {"attempts": self.attempts, "on": list(self.on), "apply_fixes": self.apply_fixes,
                "spare_nodes": list(self.spare_nodes), "min_nodes": self.min_nodes}


def recover_section(check: Checker, raw: object, launcher: str, hosts: tuple[str, ...]) -> RecoverSpec:
    """``recover:`` checked: each problem at its own line, with an example of a good value."""
    if raw is None or not check.mapping(raw, ("recover",), _KEYS):
        return RecoverSpec()
    p = ("recover",)
    attempts = _attempts(check, raw)
    return RecoverSpec(attempts=attempts, on=_triggers(check, raw),
                       apply_fixes=check.boolean(raw, (*p, "apply_fixes"), False),
                       spare_nodes=_spares(check, raw, launcher, hosts), min_nodes=_min_nodes(check, raw, launcher,
                                                                                              hosts))


def _attempts(check: Checker, raw: YamlMap) -> int:
    value = raw.get("attempts")
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_ATTEMPTS:
        check.problem(("recover", "attempts"), f"expected a whole number from 0 to {MAX_ATTEMPTS}, got {value!r}",
                      "attempts: 3 (relaunches after the first try; 0 turns recover: off)")
        return 0
    return value


def _triggers(check: Checker, raw: YamlMap) -> tuple[Trigger, ...]:
    path = ("recover", "on")
    if raw.get("on") is None:
        return TRIGGERS
    given = check.str_list(raw, path)
    out: list[Trigger] = []
    for i, word in enumerate(given):
        trigger = next((t for t in TRIGGERS if t == word), None)
        if trigger is None:
            check.problem((*path, i), f"{word!r} is not one of {' | '.join(TRIGGERS)}",
                          "on: [failure, stall] (a stop you ask for never relaunches)")
        elif trigger in out:
            check.problem((*path, i), f"{word} is listed twice", "list each trigger once")
        else:
            out.append(trigger)
    if given and not out and not check.problems:
        check.problem(path, "names no trigger", "on: [failure, stall]")
    if not given:
        check.problem(path, "an empty list never relaunches", "on: [failure, stall], or attempts: 0 to turn it off")
    return tuple(out)


def _spares(check: Checker, raw: YamlMap, launcher: str, hosts: tuple[str, ...]) -> tuple[str, ...]:
    path = ("recover", "spare_nodes")
    spares = check.hosts(raw, path)
    if spares and launcher != "ssh":
        hint = "Slurm leaves a blamed node out with --exclude" if launcher == "slurm" else "drop spare_nodes:"
        check.problem(path, f"spare nodes replace a node of an ssh job; this job is {launcher}", hint)
        return ()
    for i, host in enumerate(spares):
        if host in hosts:
            check.problem((*path, i), f"{host} is one of the job's nodes already", "a spare is a node the job "
                          "does not use until one of its nodes is left out")
        elif host in spares[:i]:
            check.problem((*path, i), f"{host} is listed twice", "list each spare once")
    return spares


def _min_nodes(check: Checker, raw: YamlMap, launcher: str, hosts: tuple[str, ...]) -> int | None:
    """The fewest nodes an ssh run's next attempt may run on once no spare is left (cockpit.launch.ssh.spare)."""
    value, path = raw.get("min_nodes"), ("recover", "min_nodes")
    if value is None:
        return None
    if launcher != "ssh":
        hint = "Slurm leaves a blamed node out with --exclude and finds another" if launcher == "slurm" else \
            "drop min_nodes:"
        check.problem(path, f"fewer nodes is for an ssh job's next attempt; this job is {launcher}", hint)
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= len(hosts):
        check.problem(path, f"expected a whole number from 1 to {len(hosts)} (the job's nodes), got {value!r}",
                      f"min_nodes: {max(1, len(hosts) - 1)} (the fewest nodes an attempt may run on when no spare "
                      "is left; the script must take a smaller world size)")
        return None
    return value
