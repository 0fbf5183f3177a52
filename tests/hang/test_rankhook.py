"""The rank-side hook as Python loads it: a real interpreter started the way the rank wrapper starts one
(the hook's folder first on PYTHONPATH, the wrapper's pid as COCKPIT_WRAPPER_PID), without torch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from helpers import cockpit_env, wait_for

from cockpit.run.store import create_run_dir


def start(run_dir: Path, code: str, *, extra_path: str | None = None, hook: str | None = None,
          as_wrapper: bool = True, **extra_env: str) -> subprocess.Popen:
    """Python running ``code`` under the hook, as the rank wrapper would start it (a shell in between, so
    the interpreter's parent is the 'wrapper' whose pid the hook checks)."""
    path = str(run_dir / "hook") + (f":{extra_path}" if extra_path else "")
    env = cockpit_env(COCKPIT_RUN_DIR=str(run_dir), COCKPIT_HOST="h1", RANK="3", PYTHONPATH=path, **extra_env)
    if hook is not None:
        env["COCKPIT_HOOK"] = hook
    wrapper = 'export COCKPIT_WRAPPER_PID=$$; "$@" & wait $!' if as_wrapper else '"$@" & wait $!'
    return subprocess.Popen(["bash", "-c", wrapper, "wrap", sys.executable, "-c", textwrap.dedent(code)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def child_pid(wrapper: subprocess.Popen) -> int:
    return wait_for(lambda: int(Path(f"/proc/{wrapper.pid}/task/{wrapper.pid}/children").read_text().split()[0])
                    if Path(f"/proc/{wrapper.pid}/task/{wrapper.pid}/children").read_text().split() else None)


WAITING = """
    import sys, time
    print("ready", flush=True)
    def stuck_here():
        time.sleep(60)
    stuck_here()
"""


def test_sigurg_dumps_every_thread_to_the_rank_file_and_a_beat_comes_every_second(tmp_path):
    run_dir = create_run_dir(tmp_path, "r")
    proc = start(run_dir, WAITING)
    try:
        assert proc.stdout.readline().strip() == "ready"
        pid, stacks = child_pid(proc), run_dir / "logs" / "rank-3.h1.stacks"

        def dumped():  # "ready" comes just before stuck_here is entered: ask until the dump shows it there
            os.kill(pid, signal.SIGURG)
            time.sleep(0.1)
            return "stuck_here" in stacks.read_text() and stacks.read_text()

        text = wait_for(dumped)
        assert 'File "<string>", line 5 in stuck_here' in text and "_beat_loop" in text  # all threads
        beat = run_dir / "logs" / "rank-3.h1.beat"
        wait_for(lambda: beat.exists() and len(beat.read_text().splitlines()) >= 2, timeout=5)
        last = json.loads(beat.read_text().splitlines()[-1])
        assert last["pid"] == child_pid(proc) and last["n"] == 0 and last["in"] is None
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the wrapper and its python
        proc.communicate()


def test_it_chains_to_the_sitecustomize_it_hides(tmp_path):
    run_dir = create_run_dir(tmp_path, "r")
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['CHAINED'] = 'yes'\n")
    proc = start(run_dir, "import os, sys; print(os.environ.get('CHAINED'), sys.modules['sitecustomize'].__file__)",
                 extra_path=str(other))
    out, err = proc.communicate(timeout=30)
    assert out.split() == ["yes", str(other / "sitecustomize.py")], err


def test_the_users_own_sigurg_handler_wins_and_forked_children_stay_out_of_the_rank_file(tmp_path):
    run_dir = create_run_dir(tmp_path, "r")
    proc = start(run_dir, """
        import os, signal, sys, time
        got = []
        signal.signal(signal.SIGURG, lambda *a: got.append(1))
        os.kill(os.getpid(), signal.SIGURG)
        time.sleep(0.2)
        print("user handler", len(got), flush=True)
        signal.signal(signal.SIGURG, signal.SIG_DFL)
        pid = os.fork()
        if pid == 0:
            os.kill(os.getpid(), signal.SIGURG)  # the child: no hook, SIGURG ignored, nothing written
            time.sleep(0.2)
            os._exit(0)
        os.waitpid(pid, 0)
        print("child done", flush=True)
    """)
    out, err = proc.communicate(timeout=30)
    assert out.splitlines() == ["user handler 1", "child done"], err
    stacks = run_dir / "logs" / "rank-3.h1.stacks"
    assert not stacks.exists() or stacks.read_text() == ""


def test_off_with_cockpit_hook_0_and_in_processes_the_wrapper_did_not_start(tmp_path):
    for kwargs in ({"hook": "0"}, {"as_wrapper": False}):
        run_dir = create_run_dir(tmp_path, f"r{len(kwargs)}{kwargs.get('hook', '')}")
        proc = start(run_dir, "import time, sys; time.sleep(1.5); print(sys.meta_path[0].__class__.__name__)",
                     **kwargs)
        out, _ = proc.communicate(timeout=30)
        assert out.strip() != "_TorchFinder"
        assert not (run_dir / "logs" / "rank-3.h1.stacks").exists()
        assert not (run_dir / "logs" / "rank-3.h1.beat").exists()


def test_importing_the_module_does_nothing():
    code = ("import sys, cockpit.node.rankhook as h; "
            "print(any(type(f).__name__ == '_TorchFinder' for f in sys.meta_path))")
    env = cockpit_env(COCKPIT_RUN_DIR="/nonexistent", COCKPIT_HOST="h")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=30)
    assert out.stdout.strip() == "False", out.stderr


def test_with_torch_collectives_are_timed_and_signatures_kept(tmp_path):
    """torch imported under the hook: dist.all_reduce and backward are wrapped, DDP's signature is the same
    (libraries such as accelerate read it to filter their keyword arguments)."""
    run_dir = create_run_dir(tmp_path, "r")
    proc = start(run_dir, """
        import inspect, torch, torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        print(dist.all_reduce.__wrapped__.__name__, torch.autograd.backward.__name__)
        print(list(inspect.signature(DDP.__init__).parameters)[:3])
    """)
    out, err = proc.communicate(timeout=120)
    assert out.splitlines() == ["all_reduce backward", "['self', 'module', 'device_ids']"], err


def test_a_script_that_handles_sigurg_itself_still_answers_a_request_from_the_hooks_thread(tmp_path):
    from cockpit.hang.gather import collect
    from cockpit.run.store import RunStatus

    run_dir = create_run_dir(tmp_path, "r")
    proc = start(run_dir, """
        import signal, time
        calls = []
        signal.signal(signal.SIGURG, lambda *a: calls.append(1))
        print("ready", flush=True)
        def waiting_for_data():
            time.sleep(60)
        waiting_for_data()
    """)
    try:
        assert proc.stdout.readline().strip() == "ready"
        (run_dir / "logs" / "rank-3.h1.log").touch()
        pid = child_pid(proc)
        status = RunStatus(run_id="r", name="r", launcher="local", job_file="-", hosts=["h1"], world_size=1)
        evidence = collect(run_dir, status, timeout=10, signal_ranks=lambda _req: os.kill(pid, signal.SIGURG))
        text = evidence[3].text
        assert "handles SIGURG itself" in text and "in waiting_for_data" in text
        assert evidence[3].stack.user_frame.function == "waiting_for_data"
        assert evidence[3].beat["urg"] == "replaced"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


def test_a_forked_child_answers_a_request_with_its_own_stack_through_the_rank(tmp_path):
    """A rank that forks a worker (as a DataLoader does) and waits for it: the request's answer holds the
    worker's stack, read by the rank's hook from the worker's in-memory file, with its state and source line;
    nothing of the worker goes into the rank's own stacks file."""
    from cockpit.hang.gather import collect
    from cockpit.run.store import RunStatus

    run_dir = create_run_dir(tmp_path, "r")
    script = tmp_path / "forks.py"  # a file: the hook quotes the worker's source line from it
    script.write_text(textwrap.dedent("""
        import os, time
        def read_sample():
            print("worker", flush=True)
            time.sleep(60)  # the worker's stuck read
        pid = os.fork()
        if pid == 0:
            read_sample()
            os._exit(0)
        def wait_for_worker():
            print("ready", pid, flush=True)
            os.waitpid(pid, 0)
        wait_for_worker()
    """))
    proc = start(run_dir, f"import runpy; runpy.run_path({str(script)!r}, run_name='__main__')")
    try:
        said = sorted(proc.stdout.readline().split() for _ in range(2))  # the two print in either order
        assert said[0][0] == "ready" and said[1] == ["worker"], said
        worker = said[0][1]
        (run_dir / "logs" / "rank-3.h1.log").touch()
        pid = child_pid(proc)
        # Both have printed from inside their functions; ask once both sleep (the rank in waitpid, the worker in
        # time.sleep), not while either is still on its way there.
        for waiter in (pid, int(worker)):
            wait_for(lambda w=waiter: Path(f"/proc/{w}/stat").read_text().rsplit(")", 1)[1].split()[0] == "S",
                     timeout=10, what=f"process {waiter} asleep")
        status = RunStatus(run_id="r", name="r", launcher="local", job_file="-", hosts=["h1"], world_size=1)
        evidence = collect(run_dir, status, timeout=10, signal_ranks=lambda _req: os.kill(pid, signal.SIGURG))
        e = evidence[3]
        assert e.stack.user_frame.function == "wait_for_worker"
        [w] = e.workers
        assert w.pid == int(worker) and w.state == "S"
        assert w.stack.main.frames[0].function == "read_sample" and "read_sample" not in e.text
        assert w.stack.worker_frame.where() == "read_sample (forks.py:5)"
        assert w.lines[f"{script}:5"] == "time.sleep(60)  # the worker's stuck read"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


FR_RANK = """
    import os, tempfile, time, torch, torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
    t = torch.ones(4)
    for _ in range(100):
        dist.all_reduce(t)
    dist.broadcast(t, 0)
    # torch marks a gloo collective completed in the Flight Recorder from its own thread, a moment after the
    # caller's wait returned: wait until the dump says so (CI saw 101 enqueued, 100 completed; a count of tries,
    # 1,000 x 10 ms, also ran out once at load 12: a deadline instead, and the test's own bound above it)
    import json
    from torch._C import _distributed_c10d as c10d
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        pg = json.loads(c10d._dump_fr_trace_json(includeCollectives=True, onlyActive=False))["pg_status"]["0"]
        if pg["last_completed_collective"] == pg["last_enqueued_collective"]:
            break
        time.sleep(0.01)
    print("ready", os.environ.get("TORCH_FR_BUFFER_SIZE"), flush=True)
    def waiting_after_collectives():
        time.sleep(60)
    waiting_after_collectives()
"""


def test_the_flight_recorder_keeps_the_last_collectives_and_the_counts_a_hang_finding_reads(tmp_path):
    """The hook sizes torch's Flight Recorder small (the dump is read on every stall; 2,000 entries took ~100 ms
    to dump): the answer still says which collective was enqueued and completed last, and its name."""
    from cockpit.hang.gather import collect
    from cockpit.node.rankhook import FR_ENTRIES
    from cockpit.run.store import RunStatus

    for asked, kept in (({}, int(FR_ENTRIES)), ({"TORCH_FR_BUFFER_SIZE": "8"}, 8)):  # the user's size wins
        run_dir = create_run_dir(tmp_path, f"fr{kept}")
        proc = start(run_dir, FR_RANK, **asked)
        try:
            assert proc.stdout.readline().split() == ["ready", str(kept)]
            (run_dir / "logs" / "rank-3.h1.log").touch()
            pid = child_pid(proc)
            status = RunStatus(run_id="r", name="r", launcher="local", job_file="-", hosts=["h1"], world_size=1)
            evidence = collect(run_dir, status, timeout=20,
                               signal_ranks=lambda _req, pid=pid: os.kill(pid, signal.SIGURG))
            flight = evidence[3].flight
            assert flight is not None and (flight.enqueued, flight.completed, flight.op) == (101, 101, "gloo:broadcast")
            dump = json.loads((run_dir / "logs" / "rank-3.h1.fr.json").read_text())
            assert len(dump["entries"]) == kept
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
