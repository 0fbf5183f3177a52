"""Small edits of a job file's YAML *text*: set or remove one key, add one item to a list, keeping the
user's comments, order and quoting everywhere else.

Why text and not load-modify-dump: a job file is the user's document (comments explain settings, the order
is theirs); a fix proposed by `cockpit diagnose --fix` must show as a one- or two-line diff. Why it is still
safe: the text is read with the project's safe, bounded loader first (``yamlpos.load``), the places to edit
are the composed nodes' marks, and after every edit the new text is loaded again and must equal the old
values with exactly the intended change; anything else (flow mappings over several lines, a value that is a
block scalar, a key that is not where a plain edit can reach) raises ``EditError`` instead of guessing.
Pure: text in, text out.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

import yaml

from cockpit.spec import yamlpos
from cockpit.spec.yamlpos import YamlMap

_PLAIN = re.compile(r"\A[A-Za-z0-9_./=^+@-][A-Za-z0-9_./=^+@,:-]*\Z")  # a value YAML reads as written


@dataclass(frozen=True)
class Change:
    """One edit. ``path`` names a key from the top: ("env", "NCCL_SOCKET_IFNAME"), ("node_env", "n1", "X"),
    ("slurm", "mem"), ("master_port",). ``value`` None removes the key; with ``append`` the key is a list
    and ``value`` one item to add (an item that starts with the same ``--option=`` is replaced instead)."""

    path: tuple[str, ...]
    value: object
    append: bool = False

    def words(self) -> str:
        where = ".".join(self.path)
        if self.value is None:
            return f"remove {where}"
        return f"add {self.value} to {where}" if self.append else f"set {where}: {self.value}"


class EditError(Exception):
    """The edit cannot be made safely on this text; the message says which key and why."""


def apply(text: str, changes: tuple[Change, ...] | list[Change]) -> str:
    """``text`` with every change made, in order. Raises EditError (or yamlpos.LoadError for bad YAML)."""
    for change in changes:
        text = _apply_one(text, change)
    return text


def expected(data: YamlMap, change: Change) -> YamlMap:
    """The values ``change`` should leave: what the text edit is checked against."""
    out = copy.deepcopy(data)
    here = out
    for key in change.path[:-1]:
        here = here.setdefault(key, {})
    last = change.path[-1]
    if change.value is None:
        here.pop(last, None)
    elif change.append:
        items = list(here.get(last) or [])
        at = _same_option(items, change.value)
        if at is None:
            items.append(change.value)
        else:
            items[at] = change.value
        here[last] = items
    else:
        here[last] = change.value
    return out


def _same_option(items: list[Any], value: object) -> int | None:
    """The index of an item that sets the same ``--option=`` as ``value``, if any."""
    if not (isinstance(value, str) and value.startswith("--") and "=" in value):
        return None
    prefix = value.split("=", 1)[0] + "="
    return next((i for i, item in enumerate(items) if isinstance(item, str) and item.startswith(prefix)), None)


def _apply_one(text: str, change: Change) -> str:
    data, _ = yamlpos.load(text)
    if not isinstance(data, dict):
        raise EditError("the job file is not a mapping of keys")
    root = yaml.compose(text, Loader=yamlpos._LOADER)
    if root is None:  # never: it loaded as a mapping
        raise EditError("the job file is not a mapping of keys")
    new = _edit(text, root, change)
    got, _ = yamlpos.load(new)
    if got != expected(data, change):
        raise EditError(f"{'.'.join(change.path)}: the text edit would not make exactly this change")
    return new


def _entry(mapping: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    """The (key, value) nodes of ``key`` in ``mapping``; None where it has no such key."""
    return next(((k, v) for k, v in mapping.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)


def _edit(text: str, root: yaml.Node, change: Change) -> str:
    node = root
    for depth, key in enumerate(change.path):
        if not isinstance(node, yaml.MappingNode):
            raise EditError(f"{'.'.join(change.path[:depth])}: not a mapping, cannot add {key} under it")
        entry = _entry(node, key)
        if entry is None:
            if change.value is None:
                return text  # nothing to remove
            value = [change.value] if change.append else change.value
            return _insert(text, node, change.path[depth:], value, _step(root))
        knode, vnode = entry
        if depth == len(change.path) - 1:
            return _set(text, node, knode, vnode, change)
        node = vnode
    return text


def _set(text: str, parent: yaml.MappingNode, knode: yaml.Node, vnode: yaml.Node, change: Change) -> str:
    where = ".".join(change.path)
    if change.value is None:
        return _remove(text, parent, knode, vnode, where)
    if change.append:
        if not isinstance(vnode, yaml.SequenceNode):
            raise EditError(f"{where}: not a list")
        items = [i.value if isinstance(i, yaml.ScalarNode) else None for i in vnode.value]
        at = _same_option(items, change.value)
        if at is not None:
            return _replace(text, vnode.value[at], change.value, vnode.flow_style, where)
        if vnode.flow_style or not vnode.value:
            return _replace_flow(text, vnode, [*(i.value for i in vnode.value), change.value], where)
        first = vnode.value[0].start_mark
        dash = text.splitlines()[first.line].rfind("-", 0, first.column)  # the item's column is after "- "
        return _insert_line(text, _last_line(vnode), " " * dash + "- " + _render(change.value))
    if not isinstance(vnode, yaml.ScalarNode):
        raise EditError(f"{where}: holds a list or mapping, not one value")
    return _replace(text, vnode, change.value, parent.flow_style, where)


def _replace(text: str, node: yaml.ScalarNode, value: object, flow: bool, where: str) -> str:
    start, end = node.start_mark, node.end_mark
    if start.line != end.line or node.style in ("|", ">"):
        raise EditError(f"{where}: the value spans several lines; edit it by hand")
    if start.index == end.index:  # `key:` with nothing after it
        return text[:start.index] + " " + _render(value, flow) + text[end.index:]
    return text[:start.index] + _render(value, flow) + text[end.index:]


def _replace_flow(text: str, node: yaml.Node, items: list[Any], where: str) -> str:
    start, end = node.start_mark, node.end_mark
    if start.line != end.line:
        raise EditError(f"{where}: a [..] list over several lines; edit it by hand")
    return text[:start.index] + "[" + ", ".join(_render(i, True) for i in items) + "]" + text[end.index:]


def _remove(text: str, parent: yaml.MappingNode, knode: yaml.Node, vnode: yaml.Node, where: str) -> str:
    if parent.flow_style:
        raise EditError(f"{where}: inside a {{..}} mapping; edit it by hand")
    lines = text.splitlines(keepends=True)
    first, last = knode.start_mark.line, _last_line(vnode)
    if lines[first][:knode.start_mark.column].strip():
        raise EditError(f"{where}: not at the start of its line")
    if len(parent.value) == 1:  # the mapping's last key: leave an empty mapping, not a null
        end = sum(map(len, lines[:last + 1]))
        return text[:parent.start_mark.index] + "{}" + ("\n" if lines[last].endswith("\n") else "") + text[end:]
    return "".join(lines[:first] + lines[last + 1:])


def _insert(text: str, mapping: yaml.MappingNode, path: tuple[str, ...], value: object, step: int) -> str:
    """Add ``path: value`` (nested keys as a block) as the last entry of ``mapping``."""
    where = ".".join(path)
    if mapping.flow_style:
        if len(path) != 1 or mapping.start_mark.line != mapping.end_mark.line:
            raise EditError(f"{where}: inside a {{..}} mapping; edit it by hand")
        pairs = [f"{k.value}: {_render(yamlpos._scalar(v) if isinstance(v, yaml.ScalarNode) else None, True)}"
                 for k, v in mapping.value if isinstance(v, yaml.ScalarNode)]
        if len(pairs) != len(mapping.value):
            raise EditError(f"{where}: a {{..}} mapping with nested values; edit it by hand")
        pairs.append(f"{path[0]}: {_render(value, True)}")
        s, e = mapping.start_mark.index, mapping.end_mark.index
        return text[:s] + "{" + ", ".join(pairs) + "}" + text[e:]
    indent = mapping.value[0][0].start_mark.column if mapping.value else 0
    block = []
    for depth, key in enumerate(path):
        pad = " " * (indent + depth * step)
        block.append(f"{pad}{key}:" + ("" if depth < len(path) - 1 else " " + _render(value)))
    if not mapping.value:
        raise EditError(f"{where}: an empty mapping; add it by hand")
    return _insert_line(text, _last_line(mapping), "\n".join(block))


def _insert_line(text: str, after: int, new: str) -> str:
    lines = text.splitlines(keepends=True)
    if after < len(lines) and not lines[after].endswith("\n"):
        lines[after] += "\n"
    lines.insert(after + 1, new + "\n")
    return "".join(lines)


def _last_line(node: yaml.Node) -> int:
    """The 0-based line a value's own text ends on (a block collection's end mark is the next token's)."""
    if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
        return _last_line(node.value[-1][1])
    if isinstance(node, yaml.SequenceNode) and not node.flow_style and node.value:
        return _last_line(node.value[-1])
    end = node.end_mark
    return end.line - 1 if end.column == 0 and end.line > node.start_mark.line else end.line


def _step(root: yaml.Node) -> int:
    """The file's indent step: from its first nested block mapping, else 2."""
    if isinstance(root, yaml.MappingNode):
        for k, v in root.value:
            if isinstance(v, yaml.MappingNode) and not v.flow_style and v.value:
                step: int = v.value[0][0].start_mark.column - k.start_mark.column
                return max(1, step)
    return 2


def _render(value: object, flow: bool = False) -> str:
    """A scalar (or a list, in flow style) as YAML that loads back to ``value``: plain where that is safe,
    else double-quoted (JSON's quoting is YAML's)."""
    if isinstance(value, list):
        return "[" + ", ".join(_render(v, True) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    plain = _PLAIN.fullmatch(text) and not (flow and ("," in text or ":" in text))
    if plain and yaml.safe_load(text) == text:
        return text
    return json.dumps(text)
