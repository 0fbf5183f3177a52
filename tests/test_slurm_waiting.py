"""The wait on a slow Slurm client (cockpit.launch.slurm.waiting): one line once the wait lasts, none for a short
one; the signals that end cockpit raised as Interrupted during the wait only. The real sinfo and sbatch waiting on
a stopped controller: tests/slurm/test_slurm_slow_client.py."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from cockpit.launch.slurm.waiting import Interrupted, interruptible, said_after


def test_a_wait_that_lasts_is_said_once_and_a_short_one_not_at_all():
    said: list[str] = []
    heard = threading.Event()
    with said_after("sbatch", after=0.05, say=lambda text: (said.append(text), heard.set())):
        assert heard.wait(10)
    with said_after("sinfo", after=30, say=said.append):
        pass
    assert said == ["cockpit: waiting for sbatch"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_an_ending_signal_in_the_wait_is_raised_and_the_handlers_come_back(signum):
    before = signal.getsignal(signum)
    with pytest.raises(Interrupted) as caught, interruptible():
        os.kill(os.getpid(), signum)
        threading.Event().wait(10)  # the handler raises at once; this only bounds a failure
    assert caught.value.signum == signum
    assert signal.getsignal(signum) == before
