"""The TUI's models and feeds: everything of the TUI that imports no textual, so each is tested on its own.
models/X is the pure half of screens/X or widgets/X where one exists. tests/tui/test_models.py checks the folder
both ways: no module here reaches textual, even through a deferred import, and every TUI module outside it does."""
