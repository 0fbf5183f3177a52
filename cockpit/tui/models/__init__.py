"""The TUI's models and feeds: everything of the TUI that imports no textual (a test imports
each module of this folder and checks), so each is tested on its own. models/X is the pure
half of screens/X or widgets/X where one exists."""
