"""The TUI's screens: fleet, compose, runs (the three modes), the run view, help and small dialogs."""
