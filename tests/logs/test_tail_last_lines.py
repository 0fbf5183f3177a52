"""`cockpit logs -f -n N` as `tail -f -n N`: each rank's last N lines, then what follows, in one stream —
nothing lost, nothing shown twice, however fast the logs grow while the command starts. The follower itself
(FileFollower(last_lines=N)) starts where the tail starts, so the two cannot disagree. Real `cockpit`
processes over a run directory made here, its logs appended to while the command runs (no run is started)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from helpers import REPO, cockpit_env, wait_for

from cockpit.logs.filetail import FileFollower
from cockpit.run.store import RunStatus, create_run_dir, write_status


@pytest.mark.parametrize(("text", "n", "want"), [
    (b"a\nb\nc\n", 2, ["b", "c"]),
    (b"a\nb\nc\n", 3, ["a", "b", "c"]),
    (b"a\nb\nc\n", 9, ["a", "b", "c"]),
    (b"a\nb\nc", 1, ["c"]),  # an unterminated last line is a line (tail's rule)
    (b"a\nb\nc", 2, ["b", "c"]),
    (b"a\n\n\nb\n", 3, ["", "", "b"]),
    (b"", 4, []),
    (b"\n", 1, [""]),
])
def test_last_lines_are_where_the_follower_starts(tmp_path, text, n, want):
    path = tmp_path / "log"
    path.write_bytes(text)
    follower = FileFollower("s", path, last_lines=n)
    got = follower.poll()
    follower.flush(got)
    assert [line.text for line in got] == want
    with path.open("ab") as f:
        f.write(b"more\n")
    assert [line.text for line in follower.poll()] == ["more"]
    follower.close()


def test_last_lines_across_read_blocks_and_zero(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"".join(b"%06d %s\n" % (i, b"x" * 100) for i in range(5000)))  # ~535 KB: many blocks
    follower = FileFollower("s", path, last_lines=1200)
    got = []
    while batch := follower.poll():
        got.extend(batch)
    assert [int(line.text.split()[0]) for line in got] == list(range(3800, 5000))
    follower.close()
    none = FileFollower("s", path, last_lines=0)
    assert none.poll() == []
    none.close()


def test_a_file_that_appears_after_add_is_read_whole(tmp_path):
    path = tmp_path / "log"
    follower = FileFollower("s", path, last_lines=1)
    assert follower.poll() == []
    path.write_bytes(b"one\ntwo\n")
    assert [line.text for line in follower.poll()] == ["one", "two"]
    follower.close()


def test_negative_last_lines_is_refused(tmp_path):
    with pytest.raises(ValueError, match="last_lines"):
        FileFollower("s", tmp_path / "log", last_lines=-1)


def _status(run_dir, state: str) -> RunStatus:
    return RunStatus(run_id=run_dir.name, name="t", launcher="local", job_file="/dev/null", hosts=["n0"],
                     world_size=2, state=state, started=time.time(), exit_code=0 if state == "succeeded" else None)


@pytest.fixture
def run(tmp_path):
    runs = tmp_path / "runs"
    run_dir = create_run_dir(runs, "t-20270101-000000-0001")
    write_status(run_dir, _status(run_dir, "running"))
    (run_dir / "logs").mkdir(exist_ok=True)
    return runs, run_dir


class Reader:
    """A `cockpit` process whose stdout is collected line by line as it comes."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "cockpit", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, cwd=REPO, env=cockpit_env(NO_COLOR="1"))
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def rank(self, rank: int) -> list[str]:
        mark = f"[n0:{rank}] "
        return [line[len(mark):] for line in list(self.lines) if line.startswith(mark)]

    def finish(self) -> tuple[int, str]:
        rc = self.proc.wait(timeout=60)
        self.thread.join(10)
        return rc, self.proc.stderr.read() if self.proc.stderr else ""


def test_logs_f_n_prints_the_last_lines_then_what_is_appended(run):
    runs, run_dir = run
    for rank in (0, 1):
        (run_dir / "logs" / f"rank-{rank}.n0.log").write_text("".join(f"r{rank} {i}\n" for i in range(10)))
    reader = Reader("logs", run_dir.name, "-f", "-n", "3", "--runs-dir", str(runs))
    wait_for(lambda: len(reader.rank(0)) == 3 and len(reader.rank(1)) == 3, 30, "the last 3 lines of each rank")
    for rank in (0, 1):
        with (run_dir / "logs" / f"rank-{rank}.n0.log").open("a") as f:
            f.write("".join(f"r{rank} {i}\n" for i in range(10, 15)))
    wait_for(lambda: len(reader.rank(0)) == 8 and len(reader.rank(1)) == 8, 30, "the appended lines")
    write_status(run_dir, _status(run_dir, "succeeded"))
    rc, err = reader.finish()
    assert rc == 0, err
    for rank in (0, 1):
        assert reader.rank(rank) == [f"r{rank} {i}" for i in range(7, 15)]


def test_logs_f_n_loses_and_doubles_nothing_while_the_logs_grow_fast(run):
    runs, run_dir = run
    path = run_dir / "logs" / "rank-0.n0.log"
    path.write_text("".join(f"{i}\n" for i in range(1000)))
    written = [1000]
    stop = threading.Event()

    def writer():
        with path.open("a") as f:
            while not stop.is_set():
                f.write("".join(f"{i}\n" for i in range(written[0], written[0] + 50)))
                f.flush()
                written[0] += 50

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        reader = Reader("logs", run_dir.name, "-f", "-n", "5", "--rank", "0", "--runs-dir", str(runs))
        wait_for(lambda: len(reader.rank(0)) >= 200, 30, "lines followed while the writer runs")
    finally:
        stop.set()
        thread.join(10)
    write_status(run_dir, _status(run_dir, "succeeded"))
    rc, err = reader.finish()
    assert rc == 0, err
    got = [int(line) for line in reader.rank(0)]
    assert got == list(range(got[0], written[0])), "a gap or a line twice between the tail and the follow"
    assert got[0] >= 995  # the tail: the last 5 lines when it started, not the whole log


@pytest.mark.parametrize("n", ["-1", "x"])
def test_a_bad_line_count_is_refused_with_exit_2(run, n):
    runs, run_dir = run
    r = subprocess.run([sys.executable, "-m", "cockpit", "logs", run_dir.name, "-n", n, "--runs-dir", str(runs)],
                       capture_output=True, text=True, cwd=REPO, timeout=60, env=cockpit_env(NO_COLOR="1"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "-n" in r.stderr and "lines" in r.stderr


def test_logs_n_0_prints_nothing_and_n_prints_the_last(run):
    runs, run_dir = run
    (run_dir / "logs" / "rank-0.n0.log").write_text("a\nb\nc\n")
    base = [sys.executable, "-m", "cockpit", "logs", run_dir.name, "--rank", "0", "--runs-dir", str(runs)]
    zero = subprocess.run([*base, "-n", "0"], capture_output=True, text=True, cwd=REPO, timeout=60,
                          env=cockpit_env(NO_COLOR="1"))
    two = subprocess.run([*base, "-n", "2"], capture_output=True, text=True, cwd=REPO, timeout=60,
                         env=cockpit_env(NO_COLOR="1"))
    assert (zero.returncode, zero.stdout) == (0, "")
    assert (two.returncode, two.stdout) == (0, "b\nc\n")
