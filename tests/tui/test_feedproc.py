"""The run feed's process end to end: a real writer process appends to the rank logs of a run directory, the
feed process (cockpit.tui.models.feed_process) follows it, and RunFeed (the UI's half, without textual here) reads its
batches. Lines arrive in order and none is lost; the stores keep each rank's last max_lines; a view switch
answers with that rank's lines; the feed process ends with stop() and when its parent is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from helpers import cockpit_env, wait_for

from cockpit.run.store import RunStatus, create_run_dir, write_status
from cockpit.tui.models.log_filter import LineFilter
from cockpit.tui.models.log_store import MERGED
from cockpit.tui.models.run_feed import RunFeed

HOST = "node0"
WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from cockpit.run.store import read_status, write_status
    run_dir, ranks, lines, per_tick = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    files = [open(run_dir / "logs" / f"rank-{r}.node0.log", "a") for r in range(ranks)]
    for start in range(0, lines, per_tick):
        for r, f in enumerate(files):
            f.write("".join(f"rank {r} line {i}\\n" for i in range(start, min(lines, start + per_tick))))
            f.flush()
        time.sleep(0.01)
    status = read_status(run_dir)
    status.state, status.exit_code, status.ended = "succeeded", 0, time.time()
    write_status(run_dir, status)
""")


def make_run(tmp_path: Path, ranks: int) -> Path:
    run_dir = create_run_dir(tmp_path / "runs", "feed-20270101-000000-0001")
    write_status(run_dir, RunStatus(run_id=run_dir.name, name="feed", launcher="local", job_file="/dev/null",
                                    hosts=[HOST], world_size=ranks, state="running", started=time.time()))
    for r in range(ranks):
        (run_dir / "logs" / f"rank-{r}.{HOST}.log").touch()
    return run_dir


def write(run_dir: Path, ranks: int, lines: int, per_tick: int = 50) -> subprocess.Popen:
    env = cockpit_env()
    return subprocess.Popen([sys.executable, "-c", WRITER, str(run_dir), str(ranks), str(lines), str(per_tick)],
                            env=env)


class Viewer:
    """What the run view does with a RunFeed, without textual: a reader thread, one drain per wake-up."""

    def __init__(self, run_dir: Path, max_lines: int):
        self.ready = threading.Event()
        self.feed = RunFeed(run_dir, self.ready.set, max_lines=max_lines)
        self.lines: list[str] = []
        self.resets = 0
        self.finished = False
        self.stats: dict = {}
        self._start_reader()

    def _start_reader(self) -> None:
        self.reader = threading.Thread(target=self.feed.run, daemon=True)
        self.reader.start()

    def step(self, timeout: float = 10.0):
        """Apply the next batch (None: none came within ``timeout``)."""
        if not self.ready.wait(timeout):
            return None
        self.ready.clear()
        d = self.feed.drain()
        if d is None:
            return None
        assert d.error is None, d.error
        if d.reset:
            self.lines, self.resets = list(d.lines), self.resets + 1
        else:
            self.lines += d.lines
        self.stats.update(d.stats)
        self.finished = self.finished or d.finished
        return d

    def until_finished(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.finished:
            assert time.monotonic() < deadline, "the feed did not finish"
            self.step(1.0)

    def show(self, view, line_filter: LineFilter | None = None) -> list[str]:
        """Switch views as the run view does; the lines of the answer."""
        if self.feed.set_view(view, line_filter or LineFilter()):
            self._start_reader()
        gen = self.feed.gen
        deadline = time.monotonic() + 10
        while True:
            assert time.monotonic() < deadline, f"no answer to the view request {gen}"
            d = self.step(1.0)
            if d is not None and d.view_gen == gen:
                assert d.reset
                return self.lines


def alive(pid: int) -> bool:
    """Running (a zombie waiting for a parent to reap it counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_lines_arrive_in_order_and_a_view_switch_answers_with_that_ranks_lines(tmp_path):
    ranks, count = 4, 3000
    run_dir = make_run(tmp_path, ranks)
    viewer = Viewer(run_dir, max_lines=20_000)
    writer = write(run_dir, ranks, count)
    try:
        viewer.until_finished()
        assert writer.wait(30) == 0
        assert viewer.resets == 0  # never behind by max_lines: every line was appended
        for r in range(ranks):
            prefix = f"[{HOST}:{r}] "
            mine = [t[len(prefix):] for t in viewer.lines if t.startswith(prefix)]
            assert mine == [f"rank {r} line {i}" for i in range(count)]
            assert viewer.stats[(HOST, r)].lines == count and viewer.stats[(HOST, r)].dropped == 0
        assert viewer.show((HOST, 2)) == [f"rank 2 line {i}" for i in range(count)]
        assert viewer.show(MERGED, LineFilter(search="line 2999")) == [
            f"[{HOST}:{r}] rank {r} line 2999" for r in range(ranks)]
        assert len(viewer.show(MERGED)) == ranks * count
    finally:
        pid = viewer.feed.pid
        viewer.feed.stop()
    wait_for(lambda: not alive(pid), 10, "the feed process to end after stop()")
    viewer.reader.join(10)
    assert not viewer.reader.is_alive()


def test_the_stores_keep_each_ranks_last_max_lines(tmp_path):
    ranks, count, keep = 3, 2000, 500
    run_dir = make_run(tmp_path, ranks)
    writer = write(run_dir, ranks, count, per_tick=200)
    viewer = Viewer(run_dir, max_lines=keep)
    try:
        viewer.until_finished()
        assert writer.wait(30) == 0
        for r in range(ranks):
            assert viewer.show((HOST, r)) == [f"rank {r} line {i}" for i in range(count - keep, count)]
        merged = viewer.show(MERGED)
        assert len(merged) == keep
        for r in range(ranks):  # the newest lines of each rank, in order, ending with its last
            mine = [int(t.rsplit(" ", 1)[1]) for t in merged if t.startswith(f"[{HOST}:{r}] ")]
            assert mine == list(range(count - len(mine), count))
    finally:
        viewer.feed.stop()


PARENT = textwrap.dedent("""
    import os, sys, threading, time
    from pathlib import Path
    from cockpit.tui.models.run_feed import RunFeed
    feed = RunFeed(Path(sys.argv[1]), lambda: None)
    threading.Thread(target=feed.run, daemon=True).start()
    while feed.pid is None:
        time.sleep(0.01)
    holder = 0
    if sys.argv[2] == "fork":  # a process that keeps the feed's stdin pipe open after we are gone
        holder = os.fork()
        if holder == 0:
            time.sleep(120)
            os._exit(0)
    print(feed.pid, holder, flush=True)
    time.sleep(120)
""")


@pytest.mark.parametrize("how", ["pipe", "fork"])
def test_the_feed_process_dies_with_its_parent(tmp_path, how):
    """kill -9 of the UI: the feed sees its stdin close ("pipe"), or, when a forked process still holds that
    pipe ("fork"), its parent pid change."""
    run_dir = make_run(tmp_path, 2)
    env = cockpit_env()
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(run_dir), how], env=env, stdout=subprocess.PIPE,
                              text=True)
    feed_pid, holder = (int(x) for x in parent.stdout.readline().split())
    try:
        assert alive(feed_pid)
        wait_for(lambda: "feed_process" in Path(f"/proc/{feed_pid}/cmdline").read_text(), 10, "the feed's exec")
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        wait_for(lambda: not alive(feed_pid), 10, f"the feed process {feed_pid} to end with its parent")
        if holder:
            assert alive(holder)  # the pipe was still open: it was the parent check that ended the feed
    finally:
        for pid in (feed_pid, holder):
            if pid and alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_batch_carries_the_counts_of_the_sources_that_changed_only():
    """4,096 ranks: a count of every source in every frame was most of it. The UI adds what a batch carries
    to what it has (the Viewer above does the same), so its counts stay whole."""
    from cockpit.logs.filetail import Line
    from cockpit.logs.tail import Batch
    from cockpit.tui.models.feed_state import FeedState

    state = FeedState()
    state.on_batch(Batch([Line((HOST, r), f"rank {r} up", 0, 0, 1.0) for r in range(3)], {}))
    assert {s: st.lines for s, st in state.take().stats.items()} == {(HOST, 0): 1, (HOST, 1): 1, (HOST, 2): 1}
    state.on_batch(Batch([Line((HOST, 1), "rank 1 again", 1, 0, 2.0)], {(HOST, 2): 5}))
    stats = state.take().stats
    assert stats.keys() == {(HOST, 1), (HOST, 2)} and stats[(HOST, 1)].lines == 2 and stats[(HOST, 2)].dropped == 5
    assert state.take().stats == {}


def test_a_status_goes_to_the_ui_only_when_its_json_changed():
    """follow_run hands the same status object again while status.json is unchanged, and an equal one when it
    was written again with the same content: neither goes to the UI; a changed one does, once."""
    from dataclasses import replace

    from cockpit.tui.models.feed_state import FeedState

    state = FeedState()
    first = RunStatus(run_id="r", name="t", launcher="local", job_file="/dev/null", hosts=[HOST], world_size=1,
                      state="running", started=1.0)
    state.on_status(first)
    assert state.take().status is first
    state.on_status(first)
    state.on_status(replace(first))
    assert not state.has_news()
    state.on_status(replace(first, state="succeeded"))
    assert state.take().status.state == "succeeded" and not state.has_news()


@pytest.mark.parametrize("ranks", [3, 4096])
def test_a_frame_brings_the_status_and_counts_back_as_they_were(ranks):
    """Past a few hundred ranks the records travel packed (cockpit.tui.models.feed_pack): what the UI gets is
    the same status (every record, of the same types, its JSON byte for byte) and the same counts."""
    from cockpit.run.progress import RankProgress
    from cockpit.tui.models.feed_process import decode, encode
    from cockpit.tui.models.feed_state import Drained, SourceStats

    hosts = [f"n{k:03d}" for k in range(max(1, ranks // 8))]
    progress = {str(r): RankProgress(hosts[r // 8], "running", step=50 + r % 3, step_source="metrics", rate=1.25,
                                     last_output=1e9 + r, flag="straggler" if r == 2 else None,
                                     collective="all_reduce" if r % 2 else None, absent=frozenset({"wait"}))
                for r in range(ranks)}
    status = RunStatus(run_id="r", name="r", launcher="local", job_file="/j.yaml", hosts=hosts, world_size=ranks,
                       state="running", progress=progress)
    stats = {(hosts[r // 8], r): SourceStats(60 + r, 1e9 + r / 7, r % 2) for r in range(ranks)}
    lines = [f"[{hosts[r // 8]}:{r}] step {r}" for r in range(ranks)]
    got = decode(encode(Drained(list(lines), False, status, [], dict(stats), False, view_gen=4))[4:])
    assert got.lines == lines and got.view_gen == 4 and got.stats == stats
    assert all(type(s) is SourceStats for s in got.stats.values())
    assert got.status == status and got.status.to_json() == status.to_json()
    assert list(got.status.progress) == list(progress)
    assert all(type(p) is RankProgress and p.absent == {"wait"} for p in got.status.progress.values())
    assert decode(encode(Drained([], False, None, [], {}, False))[4:]).status is None
