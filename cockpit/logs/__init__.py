"""Logs, pure and stdlib-only: what the ranks printed -> typed events -> findings with fixes.

    parse*.py      one physical line at a time (or a block of them) -> Event; linear on any input, with a cheap
                   gate (parse_gate) in front; parse_rules / parse_nccl say what is recognised, parse_prefix
                   reads launcher prefixes and timestamps, parse_table torchelastic's failure table
    diagnose*.py   events of every rank -> findings (crash, NCCL/gloo trouble, timeouts) and what to change
    report.py      a run's files -> its diagnosis (what `cockpit diagnose` prints)
    tail.py, follow.py
                   following many growing files without losing a line (the live views)
    teardown.py    the gloo teardown abort that follows a finished run, recognised as noise
"""
