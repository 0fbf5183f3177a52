"""The TUI's user settings: $XDG_CONFIG_HOME/cockpit/tui.yaml (default ~/.config/cockpit/tui.yaml).

Only what the user chose in the TUI lives here (today: the theme). A missing file is the defaults; an
unreadable one is reported and ignored, never fatal. Writes are atomic (cockpit.run.store.write_atomic). No textual."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from cockpit.run.store import write_atomic

KEYS = ("theme",)


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "cockpit" / "tui.yaml"


def load_config(path: Path | None = None) -> tuple[dict, str | None]:
    """(settings, problem): the known keys of the file; problem is one line when the file is unusable."""
    p = path or config_path()
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return {}, f"{p}: cannot read the TUI settings ({exc}); using defaults"
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return {}, f"{p}: expected a mapping such as 'theme: cockpit-dark'; using defaults"
    return {k: v for k, v in data.items() if k in KEYS and isinstance(v, str)}, None


def save_config(settings: dict, path: Path | None = None) -> Path:
    """Merge ``settings`` into the file (keeping what else it holds) and write it atomically."""
    p = path or config_path()
    try:
        current = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        current = None  # missing or unreadable: start afresh (load_config reported why)
    current = current if isinstance(current, dict) else {}
    p.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(p, yaml.safe_dump({**current, **settings}, sort_keys=True))
    return p
