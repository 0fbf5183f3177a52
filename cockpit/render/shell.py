"""Small, careful helpers for generating bash: every value from a job file goes through ``quote``."""

from __future__ import annotations

import shlex


def quote(value: str) -> str:
    return shlex.quote(str(value))


def export(name: str, value: str) -> str:
    """`export NAME=value` with the value quoted (names are validated identifiers)."""
    return f"export {name}={quote(value)}"


def command(segments: list[str], indent: str = "  ") -> str:
    """One command over continuation lines, one segment (words already quoted) per line."""
    return f" \\\n{indent}".join(segments)


def comment(text: str) -> str:
    """A `# ...` line whose text cannot end the comment: a newline (or any control character, or a Unicode
    line separator) in a value would start a new line of shell, so each is written as an escape instead."""
    return "# " + "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def header(title: str) -> list[str]:
    return ["#!/usr/bin/env bash", comment(title), "set -euo pipefail"]
