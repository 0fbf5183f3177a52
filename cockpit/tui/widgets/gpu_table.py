"""The fleet table: nodes, then their GPUs in nvidia-smi order. Rows come from cockpit.tui.models.fleet; this
widget only shows them (updating cells in place while the rows stay the same, so the cursor stays put) and
turns space / enter / a click on the mark column into ``Toggle`` messages."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from cockpit.tui.models.fleet import COLUMNS, Row, widths


class GpuTable(DataTable):
    BINDINGS = [Binding("space", "toggle_pick", "Select", show=True)]

    class Toggle(Message):
        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self._keys: list[str] = []
        self._rows: dict[str, Row] = {}
        self._spark = 0  # sparkline cells the columns are made for; 0: no columns yet

    def show(self, rows: list[Row], spark: int) -> None:
        """Show ``rows`` whose sparklines are ``spark`` cells wide: cells change in place; the columns are
        made again only when the width changes (the terminal was resized), keeping the cursor's row."""
        keys = [r.key for r in rows]
        current = self.current_key()
        if spark != self._spark:
            self.clear(columns=True)
            self._spark = spark
            for i, (label, width) in enumerate(zip(COLUMNS, widths(spark), strict=True)):
                self.add_column(label, width=width, key=f"c{i}")
            self._keys = []
        if keys != self._keys:
            self.clear()
            for r in rows:
                self.add_row(*self._cells(r), key=r.key)
            self._keys = keys
            if current in keys:
                self.move_cursor(row=keys.index(current), animate=False)
        else:
            for r in rows:
                if self._rows.get(r.key) != r:
                    for i, cell in enumerate(self._cells(r)):
                        self.update_cell(r.key, f"c{i}", cell)
        self._rows = {r.key: r for r in rows}

    def _cells(self, row: Row) -> list[Text]:
        theme = self.app.current_theme
        colour = {"node-error": theme.error, "node-cpu": theme.secondary, "node-ok": theme.success}.get(row.kind)
        cells = [Text(c) for c in row.cells]
        cells[0].stylize(f"bold {theme.primary}" if row.cells[0] != "○" else "")
        if row.gpu is None:
            cells[1].stylize("bold")
            cells[2].stylize(colour or "")
        return cells

    def current_key(self) -> str | None:
        if not self._keys or self.cursor_row < 0 or self.cursor_row >= len(self._keys):
            return None
        return self._keys[self.cursor_row]

    def restyle(self) -> None:
        """Colours come from the theme: redraw the cells after a theme change."""
        rows, self._keys = list(self._rows.values()), []
        self.show(rows, self._spark)

    def action_toggle_pick(self) -> None:  # not action_toggle: DOMNode's toggles an attribute
        key = self.current_key()
        if key is not None:
            self.post_message(self.Toggle(key))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.post_message(self.Toggle(str(event.row_key.value)))

    def on_click(self, event: events.Click) -> None:
        meta = event.style.meta
        row, column = meta.get("row", -1), meta.get("column", -1)
        if column == 0 and 0 <= row < len(self._keys) and row != self.cursor_row:
            self.post_message(self.Toggle(self._keys[row]))
