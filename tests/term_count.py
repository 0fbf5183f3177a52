"""A rank that counts the SIGTERMs it gets, as a framework's own handler would see them (Lightning's acts on
each one): it waits for the first, gives a duplicate time to arrive, prints the count and exits 0 (3: none)."""

import os
import signal
import sys
import time

count = 0


def on_term(signum, frame):
    global count
    count += 1


signal.signal(signal.SIGTERM, on_term)
print(f"term ready rank {os.environ.get('RANK')}", flush=True)
deadline = time.monotonic() + 120
while count == 0 and time.monotonic() < deadline:
    time.sleep(0.05)
time.sleep(2)
print(f"term count {count}", flush=True)
sys.exit(0 if count else 3)
