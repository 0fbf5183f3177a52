"""A path in the few columns a header line has left for it. Pure."""

from __future__ import annotations

import os

NAV_WIDTH = 41  # the navigation bar's own text before its info: "cockpit  F2 Fleet  F3 Compose  F4 Runs  "


def fit_path(path: str, room: int, home: str | None = None) -> str:
    """``path`` with the home directory as ``~`` and, where it is still longer than ``room``, the directories
    between its first and its last two as ``…`` (``~/…/cockpit/runs``): the end says which runs directory,
    the start from where. Never shorter than that: a header cut off is better than a path that lies."""
    home = os.path.expanduser("~") if home is None else home
    if home and home != "/" and (path == home or path.startswith(home.rstrip("/") + "/")):
        path = "~" + path[len(home.rstrip("/")):]
    if len(path) <= room:
        return path
    parts = path.split("/")
    if len(parts) <= 4:
        return path
    return "/".join([parts[0] or "", "…", *parts[-2:]]) if parts[0] else "/" + "/".join(["…", *parts[-2:]])
