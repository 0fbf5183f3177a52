"""Progress bars on a followed run (issue 33, item 6): a rank's tqdm-style line ("\\r" updates, no newline until the
bar ends) shows its latest state live on a terminal, and once ended, it is one line, `[host:rank]` kept in front.
Real `cockpit run` processes on a real job; the terminal is a pseudo-terminal (pty) read as a user's would be."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env

from cockpit.cli.liveline import LiveLine
from cockpit.logs.filetail import FileFollower, last_frame

pytestmark = pytest.mark.slow

BAR = """import os, sys, time
go = sys.argv[1]
for i in range(6):
    sys.stderr.write(f"\\rtrain {i * 20}%|{'#' * i}{' ' * (5 - i)}| {i}/5")
    sys.stderr.flush()
    time.sleep(0.02)
while not os.path.exists(go):  # the test says when it has seen the bar, before its newline
    time.sleep(0.02)
sys.stderr.write("\\n")
print("done", os.environ["RANK"])
"""
ENDED = "train 100%|#####| 5/5"


def job(tmp_path: Path) -> Path:
    (tmp_path / "bar.py").write_text(BAR)
    path = tmp_path / "bar.yaml"
    path.write_text(f"name: bar\nscript: bar.py\nargs: [{tmp_path / 'go'}]\nprocs_per_node: 1\n")
    return path


def screen(raw: str) -> list[str]:
    """The lines a terminal keeps of ``raw``: "\\r\\x1b[K" clears the line being written, "\\n" ends it."""
    lines, current = [], ""
    for part in re.split(r"(\r\x1b\[K|\r?\n)", raw):
        if part == "\r\x1b[K":
            current = ""
        elif part in ("\n", "\r\n"):
            lines.append(current)
            current = ""
        else:
            current += part
    return lines + ([current] if current else [])


def test_a_bar_on_a_pipe_is_one_line_by_its_last_frame(tmp_path):
    path = job(tmp_path)
    (tmp_path / "go").touch()
    r = subprocess.run([sys.executable, "-m", "cockpit", "run", str(path)], capture_output=True, text=True,
                       cwd=REPO, env=cockpit_env(COCKPIT_RUNS_DIR=str(tmp_path / "runs"), NO_COLOR="1"),
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "\r" not in r.stdout
    [bar] = [line for line in r.stdout.splitlines() if "train " in line]
    assert re.fullmatch(rf"\[[^\]:]+:0\] {re.escape(ENDED)}", bar), bar


def test_a_bar_on_a_terminal_is_live_before_its_newline_and_one_line_after(tmp_path):
    path = job(tmp_path)
    master, slave = pty.openpty()
    env = cockpit_env(COCKPIT_RUNS_DIR=str(tmp_path / "runs"), NO_COLOR="1", TERM="xterm", COLUMNS="100")
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(path)], stdout=slave,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, cwd=REPO, env=env)
    os.close(slave)
    raw, live_at = b"", None
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the terminal's last reader is gone
                    break
                if not data:
                    break
                raw += data
            if live_at is None and ENDED.encode() in raw:
                live_at = len(raw)  # the bar's last state, shown while the script still holds its newline
                (tmp_path / "go").touch()
        assert proc.wait(timeout=60) == 0
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    text = raw.decode()
    assert live_at is not None, text
    before = screen(raw[:live_at].decode())
    assert re.fullmatch(rf"\[[^\]:]+:0\] {re.escape(ENDED)}", before[-1]), before  # the live line, with its prefix
    after = screen(text)
    bars = [line for line in after if "train " in line]
    assert len(bars) == 1 and re.fullmatch(rf"\[[^\]:]+:0\] {re.escape(ENDED)}", bars[0]), after
    assert any(line.endswith("] done 0") for line in after) and "\r" not in text.replace("\r\x1b[K", "").replace(
        "\r\n", "\n")


def test_last_frame_is_what_a_terminal_shows_at_the_end():
    assert last_frame("plain line") == "plain line"
    assert last_frame("\r 10%|#  |\r 20%|## |  ") == " 20%|## |"
    assert last_frame("\r 50%|##\r     \repoch 1 done") == "epoch 1 done"  # tqdm(leave=False), then a print
    assert last_frame("\r   \r") == ""


def test_the_follower_gives_the_frame_being_drawn_until_the_newline(tmp_path):
    log = tmp_path / "rank-0.log"
    log.write_bytes(b"start\n\r 10%|#")
    f = FileFollower("r0", log)
    assert [line.text for line in f.poll()] == ["start"] and f.frame == " 10%|#"
    with open(log, "ab") as w:
        w.write(b"\r 20%|##\xc3")  # the half of a character: left out until the rest comes
    assert f.poll() == [] and f.frame == " 20%|##"
    with open(log, "ab") as w:
        w.write(b"\xa9\n")
    assert [last_frame(line.text) for line in f.poll()] == [" 20%|##é"] and f.frame is None


def test_a_bar_longer_than_a_line_cap_stays_a_frame(tmp_path):
    log = tmp_path / "rank-0.log"
    log.write_bytes(b"".join(b"\r%3d%%|" % i + b"#" * 40 for i in range(10)))
    f = FileFollower("r0", log, max_line_bytes=64)
    pieces = f.poll()
    assert pieces and all(p.cut for p in pieces) and f.frame is not None and f.frame.startswith("  9%|")


def test_the_live_line_fits_the_width_and_is_cleared_before_lines_above_it():
    out: list[str] = []
    live = LiveLine(out.append, lambda source: f"[h:{source[1]}]", columns=lambda: 30)
    live.write("", {("h", 0): "train 10%|" + "#" * 50})
    assert out == ["[h:0] train 10%|#############"] and len(out[0]) == 29
    live.write("[h:1] hello\n", {})
    assert out[-1] == "\r\x1b[K[h:1] hello\n[h:0] train 10%|#############"
    live.write("[h:0] train 100%\n", {("h", 0): None})
    assert out[-1] == "\r\x1b[K[h:0] train 100%\n" and live.drawn == ""
    live.write("", {("h", 0): "a", ("h", 1): "b"})
    assert out[-1] == "[h:0] a [h:1] b"
