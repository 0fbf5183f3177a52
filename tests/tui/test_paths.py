"""The runs directory in the Runs screen's header (cockpit.tui.models.paths): at 80 columns a new user's saw
"6 runs · 0 active · in /tmp/tmp.x/.lo" (the new-user pass); it is said with ~ and, where still too long, with
the directories between its start and its last two elided."""

from __future__ import annotations

from cockpit.tui.models.paths import NAV_WIDTH, fit_path


def test_home_is_tilde_and_a_long_path_keeps_its_last_two_directories():
    home = "/tmp/tmp.abc"
    assert fit_path(f"{home}/.local/state/cockpit/runs", 100, home=home) == "~/.local/state/cockpit/runs"
    assert fit_path(f"{home}/.local/state/cockpit/runs", 16, home=home) == "~/…/cockpit/runs"
    assert fit_path("/scratch/users/me/cockpit/runs", 16, home=home) == "/…/cockpit/runs"
    assert fit_path(f"{home}x/runs", 100, home=home) == f"{home}x/runs"  # a sibling of home is not home
    assert fit_path("runs", 1, home=home) == "runs" and fit_path("/a/b/c", 1, home=home) == "/a/b/c"  # no less


def test_the_runs_header_fits_80_columns_with_the_default_runs_directory():
    said = "6 runs · 0 active · in "
    where = fit_path("/home/alice/.local/state/cockpit/runs", 80 - NAV_WIDTH - len(said), home="/home/alice")
    assert where == "~/…/cockpit/runs" and NAV_WIDTH + len(said) + len(where) <= 80
