"""cockpit: a terminal cockpit for training PyTorch models on GPU clusters.

Importing this package imports nothing heavy (no torch, textual, asyncssh or pynvml); the faces
(cockpit.cli.main, cockpit.tui) and services import those only where a command needs them.
"""

__version__ = "0.1.0"
