"""Widgets of the TUI: each a thin textual view over a pure model of cockpit.tui."""
