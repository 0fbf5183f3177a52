"""A rank that failed because a peer vanished: what gloo, NCCL and the TCPStore print when the process on the
other end of a connection died. Such a failure is a consequence; the rank that died first is the cause. Pure:
a rank's last lines in, a verdict out (runs.first_failure asks when two ranks failed at nearly the same time).
"""

from __future__ import annotations

PEER_LOST = ("Connection closed by peer", "Connection reset by peer", "closed by remote peer",
             "remote process exited", "Connection refused by peer")
"""gloo's tcp pair ("Connection closed by peer [127.0.0.1]:29500"), NCCL ("Connection closed by remote peer",
"remote process exited or there was a network error"), the TCPStore client ("Connection reset by peer")."""


def lost_a_peer(last_lines: list[str]) -> bool:
    """Whether a failed rank's last lines say it failed because the other end of a connection went away."""
    return any(words in line for line in last_lines for words in PEER_LOST)
