"""A rank for the Slurm USR1 test (tests/slurm/test_own_scripts.py): counts the SIGUSR1s it gets, as a
framework's own handler would see them (Lightning's auto-requeue acts on each one).

It waits for the first, gives a duplicate time to arrive (a second copy comes within milliseconds: the
rank wrapper passing on what slurmstepd already delivered), prints the count and exits 0 (3: none came)."""

import os
import signal
import sys
import time

count = 0


def on_usr1(signum, frame):
    global count
    count += 1


signal.signal(signal.SIGUSR1, on_usr1)
print(f"usr1 ready rank {os.environ.get('RANK')}", flush=True)
deadline = time.monotonic() + 120
while count == 0 and time.monotonic() < deadline:
    time.sleep(0.05)
time.sleep(3)
print(f"usr1 count {count}", flush=True)
sys.exit(0 if count else 3)
