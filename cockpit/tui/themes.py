"""Theme files (themes/*.yaml: data, not code) -> textual Themes, validated with clear errors.

A theme file::

    name: cockpit-dark          # what the user picks; letters, digits, '-'
    dark: true
    colors:                     # textual's base colours; primary is required, the rest derive from it
      primary: "#4EA1FF"
      background: "#0F1419"
      ...
    variables:                  # optional: textual CSS variables to override, e.g. footer-key-foreground
      footer-key-foreground: "#4EA1FF"

A file with a problem is reported (file, key, what is wrong, a hint) and skipped; the others still load.
Looked for in the repository's themes/ and in $XDG_CONFIG_HOME/cockpit/themes/ (a user's file of the same
name wins)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import yaml
from textual.color import Color, ColorParseError
from textual.css.constants import VALID_STYLE_FLAGS
from textual.theme import Theme

COLOR_KEYS = ("primary", "secondary", "accent", "warning", "error", "success", "foreground", "background",
              "surface", "panel", "boost")
TOP_KEYS = ("name", "dark", "colors", "variables", "luminosity_spread", "text_alpha")
DEFAULT_THEME = "cockpit-dark"
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")
_VARIABLE = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")


class ThemeError(ValueError):
    """A theme file that cannot be used; the message names the file, the key and a hint."""


def theme_dirs() -> list[Path]:
    """The repository's themes/ (a checkout or editable install), else the installed copy under
    <prefix>/share/cockpit/themes (pyproject's data-files); then the user's, whose files win."""
    repo = Path(__file__).resolve().parents[2] / "themes"
    shipped = repo if repo.is_dir() else Path(sys.prefix) / "share" / "cockpit" / "themes"
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return [shipped, Path(base) / "cockpit" / "themes"]


def parse_theme(text: str, filename: str) -> Theme:
    """One theme from a file's text; raises ThemeError listing every problem."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ThemeError(f"{filename}: not YAML ({exc})") from None
    if not isinstance(data, dict):
        raise ThemeError(f"{filename}: expected a mapping with name:, dark: and colors:")
    problems = [f"unknown key {k!r} (known: {', '.join(TOP_KEYS)})" for k in data if k not in TOP_KEYS]
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        problems.append(f"name: {name!r} is not a theme name (hint: lower-case letters, digits and '-')")
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        problems.append(f"dark: expected true or false, got {dark!r}")
    colors = data.get("colors")
    if not isinstance(colors, dict) or "primary" not in colors:
        problems.append("colors: a mapping with at least primary: is required (hint: primary: \"#4EA1FF\")")
        colors = colors if isinstance(colors, dict) else {}
    for key, value in colors.items():
        if key not in COLOR_KEYS:
            problems.append(f"colors.{key}: unknown colour (known: {', '.join(COLOR_KEYS)})")
        else:
            problems += _color_problem(f"colors.{key}", value)
    variables = data.get("variables") or {}
    if not isinstance(variables, dict):
        problems.append("variables: expected a mapping of variable: value")
        variables = {}
    for key, value in variables.items():
        problems += _variable_problem(key, value)
    numbers = {k: data[k] for k in ("luminosity_spread", "text_alpha") if k in data}
    for key, value in numbers.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
            problems.append(f"{key}: expected a number from 0 to 1, got {value!r}")
    if problems or not isinstance(name, str):  # a name that is no str is one of the problems
        raise ThemeError(f"{filename}: " + "; ".join(problems))
    options: dict[str, Any] = {k: str(v) for k, v in colors.items()}  # colours by name, then the numbers
    return Theme(name=name, dark=dark, variables=dict(variables), **options, **numbers)


def _color_problem(where: str, value: object) -> list[str]:
    if not isinstance(value, str):
        return [f"{where}: expected a colour string, got {value!r} (hint: quote it: \"#4EA1FF\")"]
    try:
        Color.parse(value)
    except ColorParseError:
        return [f"{where}: {value!r} is not a colour (hint: \"#RRGGBB\", rgb(r,g,b) or a name such as 'red')"]
    return []


def load_themes(dirs: list[Path] | None = None) -> tuple[list[Theme], list[str]]:
    """Every valid theme in ``dirs`` (later directories override earlier ones by name), and one error line per
    file that was skipped."""
    found: dict[str, Theme] = {}
    errors: list[str] = []
    for d in dirs if dirs is not None else theme_dirs():
        if not d.is_dir():
            continue
        for path in sorted(d.glob("*.yaml")):
            try:
                theme = parse_theme(path.read_text(encoding="utf-8"), str(path))
            except (OSError, UnicodeDecodeError) as exc:
                errors.append(f"{path}: cannot read ({exc})")
                continue
            except ThemeError as exc:
                errors.append(str(exc))
                continue
            found[theme.name] = theme
    return list(found.values()), errors


def _variable_problem(key: object, value: object) -> list[str]:
    """A textual CSS variable as a theme may set it: a colour, or text-style flags for ``*-text-style``.
    Checked here because a bad value reaches textual's stylesheet parser at start and stops the app."""
    if not isinstance(key, str) or not _VARIABLE.match(key):
        return [f"variables.{key}: not a variable name (hint: lower-case words joined by '-', e.g. "
                "footer-key-foreground)"]
    if not isinstance(value, str):
        return [f"variables.{key}: expected a string value, got {value!r}"]
    if key.endswith("text-style"):
        bad = [w for w in value.split() if w not in VALID_STYLE_FLAGS]
        return [f"variables.{key}: {' '.join(bad)!r} is not a text style (hint: one or more of bold, italic, "
                "underline, reverse, dim, strike, none)"] if bad or not value.split() else []
    return _color_problem(f"variables.{key}", value)
