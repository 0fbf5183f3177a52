"""`python -m cockpit.tui [options]`: the TUI without going through cockpit's CLI (tests, tmux)."""

import sys

from cockpit.tui import before_textual

before_textual()

from cockpit.tui.app import run_tui  # noqa: E402 (after before_textual: textual reads its settings at import)

sys.exit(run_tui(sys.argv[1:]))
