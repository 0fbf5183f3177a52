"""Safe YAML loading that remembers where every value came from.

Validation errors must point at ``job.yaml:LINE:COL``; PyYAML's ``safe_load`` forgets positions, so this
module composes the node tree with the *safe* loader (no arbitrary tags, no object construction), converts it
to plain Python values itself and records the position of each value under its field path, e.g.
``("slurm", "time")`` or ``("gpus", 1)``. Duplicate keys, which PyYAML silently resolves to the last one, are
reported instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

Path = tuple  # a field path: tuple of str keys and int list indices


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file, with where it is and what to try."""

    line: int  # 1-based; 0 when unknown
    col: int  # 1-based; 0 when unknown
    path: str  # dotted field path, e.g. "slurm.time" or "gpus[1]"; "" for the file as a whole
    message: str
    hint: str | None = None

    def format(self, filename: str) -> str:
        where = f"{filename}:{self.line}:{self.col}" if self.line else filename
        field_part = f" {self.path}:" if self.path else ""
        hint = f" (hint: {self.hint})" if self.hint else ""
        return f"{where}:{field_part} {self.message}{hint}"


@dataclass
class Positions:
    """Field path -> (line, col), both 1-based. Keys of mappings are recorded at the key's position."""

    at: dict = field(default_factory=dict)

    def of(self, path: Path) -> tuple[int, int]:
        """Position of ``path``, else of its nearest recorded parent, else (0, 0)."""
        while path:
            if path in self.at:
                return self.at[path]
            path = path[:-1]
        return self.at.get((), (0, 0))


class LoadError(Exception):
    """The text is not YAML we accept; ``problems`` says where and why."""

    def __init__(self, problems: list[Problem]):
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


def dotted(path: Path) -> str:
    """("slurm", "modules", 2) -> "slurm.modules[2]"."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def load(text: str) -> tuple[object, Positions]:
    """Parse ``text`` safely; return (plain value, positions). Raises LoadError with positions."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        what = exc.problem or exc.context or "not valid YAML"
        raise LoadError([Problem(line, col, "", f"YAML syntax error: {what}",
                                 "check indentation and quoting on this line")]) from None
    except yaml.YAMLError as exc:
        raise LoadError([Problem(0, 0, "", f"YAML error: {exc}")]) from None
    positions = Positions()
    problems: list[Problem] = []
    if node is None:
        return None, positions
    value = _convert(node, (), positions, problems)
    if problems:
        raise LoadError(problems)
    return value, positions


_PLAIN_TAGS = {"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"}


def _convert(node: yaml.Node, path: Path, positions: Positions, problems: list[Problem]) -> object:
    line, col = node.start_mark.line + 1, node.start_mark.column + 1
    positions.at.setdefault(path, (line, col))
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.tag not in _PLAIN_TAGS:
        problems.append(Problem(line, col, dotted(path), f"tag {node.tag!r} is not allowed",
                                "job files hold plain values only"))
        return None
    if isinstance(node, yaml.MappingNode):
        return _convert_mapping(node, path, positions, problems)
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, (*path, i), positions, problems) for i, item in enumerate(node.value)]
    try:
        return _scalar(node)
    except yaml.YAMLError as exc:
        problems.append(Problem(line, col, dotted(path), f"cannot read this value: {exc.problem or exc}",
                                "job files hold plain values only; quote it if it is a string"))
        return None


def _convert_mapping(node: yaml.MappingNode, path: Path, positions: Positions,
                     problems: list[Problem]) -> dict:
    out: dict = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            mark = key_node.start_mark
            problems.append(Problem(mark.line + 1, mark.column + 1, dotted(path),
                                    "a key must be a plain name", "remove the brackets or braces"))
            continue
        key = str(_scalar(key_node))
        mark = key_node.start_mark
        if key in out:
            problems.append(Problem(mark.line + 1, mark.column + 1, dotted((*path, key)),
                                    "duplicate key", "keep one of them"))
            continue
        positions.at[(*path, key)] = (mark.line + 1, mark.column + 1)
        out[key] = _convert(value_node, (*path, key), positions, problems)
    return out


_SAFE = yaml.constructor.SafeConstructor()


def _scalar(node: yaml.ScalarNode) -> object:
    # The safe constructor resolves `yes`, `null`, `~`, numbers as YAML says; it builds no objects.
    # Except YAML 1.1's base-60 numbers: `time: 1:30` would become 90; nobody means that, keep the text.
    if node.tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float") and ":" in node.value:
        return node.value
    return _SAFE.construct_object(node)
