"""Safe YAML loading that remembers where every value came from.

Validation errors must point at ``job.yaml:LINE:COL``; PyYAML's ``safe_load`` forgets positions, so this
module composes the node tree with the *safe* loader (no arbitrary tags, no object construction), converts it
to plain Python values itself and records the position of each value under its field path, e.g.
``("slurm", "time")`` or ``("gpus", 1)``. Duplicate keys, which PyYAML silently resolves to the last one, are
reported instead.

Composing is bounded before it starts: a first pass over the parser's event stream (iterative, streaming)
measures nesting depth, alias count and the number of values the aliases would expand to, and refuses
"billion laughs" files, recursive aliases and absurdly deep nesting with a positioned problem. Only then is
the (recursive) composer run, so neither memory nor the stack can be exhausted by a job file.

The message for a file nested too deep is cockpit's whatever libyaml says: from libyaml 0.2.6 (PyYAML 6.0.4's
wheels) its scanner refuses more than 1000 levels while it looks ahead along a line of brackets, before the
event pass has seen level 33; when libyaml refuses a text that could nest that deep, PyYAML's own parser (no
limit of its own, the same YAML 1.1 and marks) measures it again, so cockpit's bound is what the user reads.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import yaml

KeyPath = tuple[Any, ...]  # a field path: the mapping keys (any YAML scalar) and list indices to a value
YamlMap = dict[Any, Any]  # a YAML mapping as loaded: keys are any scalar, values any YAML value

MAX_DEPTH = 32  # nesting of lists / mappings; a job file needs 4
MAX_ALIASES = 1_000
MAX_VALUES = 20_000  # scalars + collections, counted with every alias expanded; a job file needs < 1,000
# libyaml where it is installed: the same YAML 1.1 and marks, ~30x faster on a large file.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file, with where it is and what to try."""

    line: int  # 1-based; 0 when unknown
    col: int  # 1-based; 0 when unknown
    path: str  # dotted field path, e.g. "slurm.time" or "gpus[1]"; "" for the file as a whole
    message: str
    hint: str | None = None
    warning: bool = False  # usable as written, but likely not what was meant (e.g. an env name torch never reads)

    def format(self, filename: str) -> str:
        where = f"{filename}:{self.line}:{self.col}" if self.line else filename
        field_part = f" {self.path}:" if self.path else ""
        level = " warning:" if self.warning else ""
        hint = f" (hint: {self.hint})" if self.hint else ""
        return f"{where}:{level}{field_part} {self.message}{hint}"


@dataclass
class Positions:
    """Field path -> (line, col), both 1-based. Keys of mappings are recorded at the key's position."""

    at: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)

    def of(self, path: KeyPath) -> tuple[int, int]:
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


def dotted(path: KeyPath) -> str:
    """("slurm", "modules", 2) -> "slurm.modules[2]"; a key that is not printable text is written as Python
    would (``env['A\\n']``), so a problem stays one line."""
    out = ""
    for part in path:
        if isinstance(part, int) or not str(part).isprintable():
            out += f"[{part!r}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def load(text: str) -> tuple[object, Positions]:
    """Parse ``text`` safely; return (plain value, positions). Raises LoadError with positions."""
    try:
        _bounded(text)
        node = yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        what = exc.problem or exc.context or "not valid YAML"
        raise LoadError([Problem(line, col, "", f"YAML syntax error: {what}",
                                 "check indentation and quoting on this line")]) from None
    except yaml.YAMLError as exc:
        raise LoadError([Problem(0, 0, "", f"YAML error: {exc}")]) from None
    if node is None:
        return None, Positions()
    convert = _Converter()
    value = convert.node(node, ())
    if convert.problems:
        raise LoadError(convert.problems)
    return value, convert.positions


def _bounded(text: str) -> None:
    """``_measure`` with libyaml; where libyaml refuses the text and it holds more brackets than MAX_DEPTH (so
    it could nest deeper by flow collections), again with PyYAML's parser, whose LoadError is cockpit's own
    bound (see the module). If PyYAML refuses it too, libyaml's error stands, as before."""
    try:
        _measure(text, _LOADER)
    except yaml.YAMLError as refused:
        if _LOADER is yaml.SafeLoader or text.count("[") + text.count("{") <= MAX_DEPTH:
            raise
        with contextlib.suppress(yaml.YAMLError):  # PyYAML refuses it too: libyaml's message stands
            _measure(text, yaml.SafeLoader)
        raise refused from None


class _Open:
    """A collection the event pass is inside: its anchor, the value count when it opened, where it is."""

    def __init__(self, anchor: str | None, start: int, is_map: bool):
        self.anchor, self.start, self.is_map = anchor, start, is_map
        self.items = 0  # nodes seen directly inside (keys and values alike for a mapping)
        self.key: object = None  # a mapping's latest key


def _path_of(open_: list[_Open]) -> KeyPath:
    """The field path of the node the event pass is at, e.g. ("sweep", "grid", "lr", 3)."""
    out: list[object] = []
    for c in open_:
        if c.is_map:
            if c.items % 2 == 1:  # at a key: the path is the mapping's own
                break
            out.append(c.key)
        else:
            out.append(c.items - 1)
    return tuple(out)


def _too_big(event: yaml.Event, open_: list[_Open], what: str, hint: str) -> LoadError:
    mark = event.start_mark  # the parser's events always have one
    line, col = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
    return LoadError([Problem(line, col, dotted(_path_of(open_)), what, hint)])


def _measure(text: str, loader: type) -> None:
    """Walk the event stream once; raise LoadError if composing it would be too deep, too aliased or too big.

    The size of an anchored value is known when its end event arrives, so an alias costs exactly what it would
    expand to, without expanding anything. An alias to an anchor whose collection is still open is recursive.
    """
    sizes: dict[str | None, int] = {}  # anchor -> values it expands to
    open_: list[_Open] = []
    total = aliases = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.NodeEvent) and open_:
            parent = open_[-1]
            parent.items += 1
            if parent.is_map and parent.items % 2 == 1:
                parent.key = event.value if isinstance(event, yaml.ScalarEvent) else "?"
        if isinstance(event, yaml.CollectionStartEvent):
            if len(open_) >= MAX_DEPTH:
                raise _too_big(event, open_, f"nested more than {MAX_DEPTH} levels deep",
                               "a job file needs a few levels: key: value, lists, one more mapping")
            open_.append(_Open(event.anchor, total, isinstance(event, yaml.MappingStartEvent)))
            total += 1
        elif isinstance(event, yaml.CollectionEndEvent):
            done = open_.pop()
            if done.anchor is not None:
                sizes[done.anchor] = total - done.start
        elif isinstance(event, yaml.ScalarEvent):
            total += 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise _too_big(event, open_, f"more than {MAX_ALIASES} YAML aliases", "write the values out")
            if any(c.anchor == event.anchor for c in open_):
                raise _too_big(event, open_, f"recursive YAML alias *{event.anchor} (it refers to a value that "
                               "contains it)", "an alias may only repeat a value that is already complete")
            total += sizes.get(event.anchor, 1)  # unknown: the composer reports the undefined alias
        if total > MAX_VALUES:
            raise _too_big(event, open_, f"more than {MAX_VALUES} values"
                           + (" once its YAML aliases are expanded" if aliases else ""),
                           "a job file is a few dozen settings; check the aliases (*name) and lists")


_PLAIN_TAGS = {"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"}


class _Converter:
    """Composed nodes -> plain values, with each value's position and every problem. One per load: PyYAML's
    constructor keeps every node it built (for aliases), so a shared one would grow with each file read."""

    def __init__(self) -> None:
        self.positions = Positions()
        self.problems: list[Problem] = []
        self.safe = yaml.constructor.SafeConstructor()

    def node(self, node: yaml.Node, path: KeyPath) -> object:
        line, col = node.start_mark.line + 1, node.start_mark.column + 1
        self.positions.at.setdefault(path, (line, col))
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.tag not in _PLAIN_TAGS:
            self.problems.append(Problem(line, col, dotted(path), f"tag {node.tag!r} is not allowed",
                                         "job files hold plain values only"))
            return None
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.node(item, (*path, i)) for i, item in enumerate(node.value)]
        try:
            return _scalar(node, self.safe)
        except yaml.YAMLError as exc:
            what = exc.problem if isinstance(exc, yaml.MarkedYAMLError) and exc.problem else str(exc)
        except ValueError as exc:  # !!binary, or a number too long to be meant
            what = str(exc)
        self.problems.append(Problem(line, col, dotted(path), f"cannot read this value: {what}",
                                     "job files hold plain values only: strings, numbers, true/false; quote it if "
                                     "it is a string"))
        return None

    def mapping(self, node: yaml.MappingNode, path: KeyPath) -> YamlMap:
        out: YamlMap = {}
        for key_node, value_node in node.value:
            mark = key_node.start_mark
            where = (mark.line + 1, mark.column + 1)
            if not isinstance(key_node, yaml.ScalarNode):
                self.problems.append(Problem(*where, dotted(path), "a key must be a plain name",
                                             "remove the brackets or braces"))
                continue
            try:
                key = _scalar(key_node, self.safe)
            except (yaml.YAMLError, ValueError) as exc:
                key = exc
            if not isinstance(key, (str, int, float, bool)) or (key_node.tag not in _PLAIN_KEY_TAGS):
                self.problems.append(Problem(*where, dotted(path),
                                             f"a key must be a plain name, not a {key_node.tag!r} value",
                                             "remove the !tag before the key"))
                continue
            # a key is a name: YAML 1.1 reads `on:`, `yes:`, `off:` as booleans, which no job field means
            key = key_node.value if key_node.tag == "tag:yaml.org,2002:bool" else str(key)
            key_path = (*path, key)
            if key in out:
                self.problems.append(Problem(*where, dotted(key_path), "duplicate key", "keep one of them"))
                continue
            self.positions.at[key_path] = where
            out[key] = self.node(value_node, key_path)
        return out


_PLAIN_KEY_TAGS = {"tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
                   "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null", "tag:yaml.org,2002:timestamp"}
MAX_DIGITS = 100  # no job field needs more; Python refuses int("9" * 4301) anyway


def _scalar(node: yaml.Node, safe: yaml.constructor.SafeConstructor | None = None) -> object:
    # The safe constructor resolves `yes`, `null`, `~`, numbers as YAML says; it builds no objects.
    # Except YAML 1.1's base-60 numbers: `time: 1:30` would become 90; nobody means that, keep the text.
    if node.tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float") and ":" in node.value:
        return node.value
    # A date or time is text to cockpit (a run name, a tag); Python's datetime would print it differently.
    if node.tag == "tag:yaml.org,2002:timestamp":
        return node.value
    if node.tag == "tag:yaml.org,2002:binary":
        raise ValueError("!!binary data is not allowed")
    if node.tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float") and len(node.value) > MAX_DIGITS:
        raise ValueError(f"a number longer than {MAX_DIGITS} characters")
    return (safe or yaml.constructor.SafeConstructor()).construct_object(node)
