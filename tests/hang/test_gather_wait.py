"""Gathering many ranks' stacks (issue 32): one wait for every answer, from the files the hook writes, and one
listing of logs/ for several kinds of rank file. Real files in a run directory; no process."""

from __future__ import annotations

import json
import threading
import time

from cockpit.hang.gather import wait_answers
from cockpit.hang.stacks import marker
from cockpit.run import layout

DUMP = ('Current thread 0x00007f0000000b80 (most recent call first):\n'
        '  File "/job/train.py", line 88 in train_step\n')


def _rank(logs, rank, host, request, *, answer: bool) -> tuple[str, int]:
    base = logs / f"rank-{rank}.{host}"
    head = marker(request, time.time())
    (logs / f"{base.name}.stacks").write_text("an older dump\n" + head + (DUMP if answer else ""))
    beat = {"t": time.time(), "n": 3, "req": request if answer else None}
    (logs / f"{base.name}.beat").write_text(json.dumps({"t": 1.0, "req": None}) + "\n" + json.dumps(beat) + "\n")
    (logs / f"{base.name}.log").write_text("step 1\n")
    return host, len(("an older dump\n" + head).encode())


def _answer_now(base, request) -> None:
    """What the hook does when asked: the dump after the marker, then a beat that carries the request."""
    with open(f"{base}.stacks", "a") as f:
        f.write(DUMP)
    with open(f"{base}.beat", "a") as f:
        f.write(json.dumps({"t": time.time(), "n": 4, "req": request}) + "\n")


def test_every_rank_that_answered_is_read_and_a_silent_one_is_empty_at_the_deadline(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    asked = {r: _rank(logs, r, f"n{r // 8}", "7.5", answer=r != 13) for r in range(32)}
    began = time.monotonic()
    got = wait_answers(logs, asked, "7.5", time.monotonic() + 0.5, every=0.05)
    assert list(got) == list(range(32))
    assert time.monotonic() - began >= 0.5  # rank 13 never answered: waited for it until the deadline
    assert [r for r, e in got.items() if not e.text] == [13]
    assert all(e.text == DUMP and e.beat["req"] == "7.5" and e.host == f"n{r // 8}"
               for r, e in got.items() if r != 13)


def test_a_rank_answering_late_is_waited_for_and_the_wait_ends_with_the_last_answer(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    asked = {r: _rank(logs, r, "n0", "8.0", answer=r != 2) for r in range(4)}
    late = threading.Timer(0.3, _answer_now, (logs / "rank-2.n0", "8.0"))
    late.start()
    began = time.monotonic()
    try:
        got = wait_answers(logs, asked, "8.0", time.monotonic() + 30, every=0.05)
    finally:
        late.join()
    assert time.monotonic() - began < 20  # ended by the answer, not by the deadline
    assert all(e.text == DUMP for e in got.values()), {r: e.text for r, e in got.items()}


def test_one_listing_gives_each_kind_of_rank_file_as_rank_files_does(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for rank in range(5):
        for kind in ("log", "pid", "beat", "stacks", "fr.json"):
            (logs / f"rank-{rank}.host-{rank % 2}.{kind}").write_text("x")
    (logs / "rank-3.host-1.exit").write_text("0 1.0\n")
    (logs / "agent.host-0.log").write_text("torchrun\n")
    (logs / "supervisor.log").write_text("")
    kinds = layout.rank_file_kinds(tmp_path, ("log", "exit", "pid"))
    assert kinds == {k: layout.rank_files(tmp_path, k) for k in ("log", "exit", "pid")}
    assert sorted(kinds["log"]) == list(range(5)) and list(kinds["exit"]) == [3]
    assert kinds["log"][4] == ("host-0", logs / "rank-4.host-0.log")
    assert layout.rank_file_kinds(tmp_path / "none", ("log",)) == {"log": {}}
