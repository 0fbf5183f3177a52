"""The top line of every screen: the three modes as clickable tabs (F2 F3 F4), the current one marked, and
what the screen is showing. Replaces textual's Header (which has no navigation)."""

from __future__ import annotations

from textual.markup import escape
from textual.reactive import reactive
from textual.widgets import Static

MODES = (("fleet", "F2", "Fleet"), ("compose", "F3", "Compose"), ("runs", "F4", "Runs"))


class NavBar(Static):
    info = reactive("")

    def __init__(self, mode: str, info: str = "", **kwargs) -> None:
        super().__init__("", **kwargs)
        self.mode = mode
        self.set_reactive(NavBar.info, info)

    def on_mount(self) -> None:
        self._draw()

    def watch_info(self) -> None:
        self._draw()

    def _draw(self) -> None:
        tabs = []
        for mode, key, title in MODES:
            text = f"{key} {title}"
            if mode == self.mode:
                tabs.append(f"[reverse bold] {text} [/]")
            else:
                tabs.append(f"[@click=app.switch_mode('{mode}')] {text} [/]")
        info = f"  [dim]{escape(self.info)}[/]" if self.info else ""
        self.update("[bold]cockpit[/] " + "".join(tabs) + info, layout=False)  # one line: no re-layout
