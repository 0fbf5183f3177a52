"""The rank hook's wrappers (timed collectives, backward, DDP's constructor; `import torch` alike) leave no frame of
theirs in the user's tracebacks: the default excepthook, traceback.format_exc, a logger and the user's own
sys.excepthook all show the user's code calling torch's, as without cockpit, the same exception and message.
A real interpreter started as the rank wrapper starts one, with torch (gloo, one process)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import cockpit_env

from cockpit.run.store import create_run_dir

SCRIPT = """
    import os, sys, traceback, torch, torch.distributed as dist
    assert dist.all_reduce.__wrapped__  # the hook is in place: its wrappers are what is called
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[1])
    dist.init_process_group("gloo", rank=0, world_size=1)

    def user_all_reduce():
        dist.all_reduce("not a tensor")

    def user_backward():
        x = torch.ones(2, requires_grad=True)
        torch.autograd.backward((x * 2).sum(), grad_tensors=torch.ones(3))

    def user_ddp():  # no parameter that needs a gradient: DDP's constructor refuses it
        torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2).requires_grad_(False))

    for call in (user_all_reduce, user_backward, user_ddp):
        try:
            call()
        except Exception:
            text = traceback.format_exc()
            print("CAUGHT", call.__name__, "sitecustomize" in text, f"in {call.__name__}" in text, flush=True)

    import time  # a beat after the errors (the hook beats once a second): what the beat test reads
    beat, deadline = os.path.join(os.environ["COCKPIT_RUN_DIR"], "logs", "rank-0.h1.beat"), time.time() + 60
    while time.time() < deadline and not (os.path.exists(beat)
                                          and '"in":null' in (open(beat).read().splitlines() or [""])[-1]):
        time.sleep(0.05)

    def mine(kind, exc, tb):
        text = "".join(traceback.format_exception(kind, exc, tb))
        print("EXCEPTHOOK", type(exc).__name__, "sitecustomize" in text, "in user_all_reduce" in text, flush=True)
        sys.__excepthook__(kind, exc, tb)

    if sys.argv[2] == "own":
        sys.excepthook = mine
    user_all_reduce()  # unhandled: Python's excepthook, or the user's
"""


def run_under_hook(tmp_path: Path, mode: str) -> subprocess.CompletedProcess:
    run_dir = create_run_dir(tmp_path, "r")
    env = cockpit_env(COCKPIT_RUN_DIR=str(run_dir), COCKPIT_HOST="h1", RANK="0", PYTHONPATH=str(run_dir / "hook"))
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    script = tmp_path / "train.py"  # a file, so that tracebacks show its lines
    script.write_text(textwrap.dedent(SCRIPT))
    wrapper = 'export COCKPIT_WRAPPER_PID=$$; "$@" & wait $!'
    return subprocess.run(["bash", "-c", wrapper, "wrap", sys.executable, str(script), port, mode],
                          env=env, capture_output=True, text=True, timeout=180)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 re-raises the traceback it saved: the frame stays")
@pytest.mark.parametrize("mode", ["default", "own"])
def test_no_hook_frame_in_a_traceback_through_a_collective_or_backward(tmp_path, mode):
    r = run_under_hook(tmp_path, mode)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "CAUGHT user_all_reduce False True" in r.stdout, r.stdout + r.stderr
    assert "CAUGHT user_backward False True" in r.stdout, r.stdout + r.stderr
    assert "CAUGHT user_ddp False True" in r.stdout, r.stdout + r.stderr
    if mode == "own":
        assert "EXCEPTHOOK" in r.stdout and "sitecustomize" not in r.stdout.split("EXCEPTHOOK", 1)[1].split("\n")[0]
        assert "EXCEPTHOOK" in r.stdout and " False True" in r.stdout.split("EXCEPTHOOK", 1)[1].split("\n")[0]
    tb = r.stderr[r.stderr.index("Traceback (most recent call last)"):]
    assert "sitecustomize" not in tb and "in user_all_reduce" in tb, tb
    assert 'dist.all_reduce("not a tensor")' in tb  # the user's own line, then torch's frames


def test_wrappers_still_time_the_collective_after_an_error(tmp_path):
    """The except clause changes nothing else: the collective's error leaves the hook ready for the next one
    (the beat's 'in' is cleared by the finally clause, as before)."""
    r = run_under_hook(tmp_path, "default")
    beat = next((tmp_path / "r" / "logs").glob("rank-0.h1.beat"), None)
    assert r.returncode == 1 and beat is not None and beat.read_text(), r.stderr
    assert '"in":null' in beat.read_text().splitlines()[-1]
