"""`python -m cockpit.tui [options]`: the TUI without going through cockpit's CLI (tests, tmux)."""

import sys

from cockpit.tui.app import run_tui

sys.exit(run_tui(sys.argv[1:]))
