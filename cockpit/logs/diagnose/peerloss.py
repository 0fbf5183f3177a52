"""A rank that failed because a peer vanished: what gloo, NCCL and the TCPStore print when the process on the
other end of a connection died. Such a failure is a consequence; the rank that died first is the cause, even one
that exited 0 (an early exit: it left its peers waiting in a collective). Pure: a rank's last lines in, a verdict
out (runs.first_failure asks when two ranks failed at nearly the same time, or every failure lost its peer).
"""

from __future__ import annotations

PEER_LOST = ("Connection closed by peer", "Connection reset by peer", "closed by remote peer",
             "remote process exited", "Connection refused by peer")
"""gloo's tcp pair ("Connection closed by peer [127.0.0.1]:29500"), NCCL ("Connection closed by remote peer",
"remote process exited or there was a network error"), the TCPStore client ("Connection reset by peer")."""


EARLY_EXIT = "exited with code 0 while its peers still waited for it in a collective (an early exit)"
"""What to call a rank that left the job while the others were mid-collective (status.json's describe)."""
EARLY_EXIT_HINT = ("a rank that ends while the others still train leaves them waiting in a collective: decide "
                   "together when to stop (all_reduce the stop flag so every rank breaks on the same step) and end "
                   "every rank the same way (dist.barrier() then dist.destroy_process_group())")


def lost_a_peer(last_lines: list[str]) -> bool:
    """Whether a failed rank's last lines say it failed because the other end of a connection went away."""
    return any(words in line for line in last_lines for words in PEER_LOST)
