"""A run stopped while `cockpit run` follows it (issue 33 item 8): the follower exited 1 and its summary said
`stopped …, exit code 1` beside ranks that ended `ok` (1 was torchrun's own code after its SIGTERM, not a
failure of the job). Now `run`, and `attach` of the ended run, exit 143 (128 + SIGTERM, as a shell reports a
process a stop ended) and the summary says the code they exit with; the follower's own Ctrl-C stays 130
(tests/test_chaos.py). Real torchrun, 2 gloo ranks of the demo, which save and exit 0 on SIGTERM."""

from __future__ import annotations

import pytest
from helpers import wait_for
from test_chaos import LONG, Client, cockpit, started

from cockpit.run.store import read_status

pytestmark = pytest.mark.slow


def test_a_run_stopped_by_cockpit_stop_exits_143_and_says_so(tmp_path):
    run = Client(tmp_path, "run", "jobs/demo.yaml", "-q", *LONG)
    try:
        run_dir = started(tmp_path)
        wait_for(lambda: (s := read_status(run_dir)) is not None and s.supervisor, 30, "the supervisor")
        stop = cockpit(tmp_path, "stop", run_dir.name)
        rc, out = run.finish(120)
    finally:
        run.kill()
    status = read_status(run_dir)
    assert stop.returncode == 0 and status.state == "stopped", stop.stderr
    head = out.splitlines()[0]
    assert rc == 143 and head.startswith(f"== demo ({run_dir.name}): stopped in ") and \
        head.endswith(", exit code 143 =="), (rc, out, run.err)
    assert "first failure" not in out, out
    again = cockpit(tmp_path, "attach", run_dir.name)  # the ended run, shown again: the same code and words
    assert again.returncode == 143 and again.stdout.splitlines()[0] == head, again.stdout + again.stderr
