"""Logs, pure and stdlib-only: what the ranks printed -> typed events -> findings with fixes.

    parse/         one physical line at a time (or a block of them) -> Event; linear on any input, with a cheap
                   gate (gate, scan) in front; rules / nccl / ends say what is recognised, prefix reads
                   launcher prefixes and timestamps, table torchelastic's failure table, trace a traceback
    diagnose/      events of every rank -> findings (crash, NCCL/gloo trouble, timeouts) and what to change:
                   engine (summaries + rules), rules (cross-rank), cause and first (the root cause), nccl,
                   advice, model (the values), teardown and peerloss (consequences, not causes), report (a
                   run's files -> its diagnosis: what `cockpit diagnose` prints)
    bounded.py     reading a log in bounded memory, whatever it holds
    tail.py, filetail.py
                   following many growing files without losing a line (the live views)
"""
