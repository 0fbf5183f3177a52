"""torchrun's own restarts (max_restarts) on a node that does not share the run directory: the node agent's
`watch` (the real agent program cockpit sends, run here as a process) tells cockpit's side which copied exit
record the rank wrapper set aside in logs/restart-<K>/, and cockpit.launch.ssh.stream moves its copy the same
way, so the local logs/ holds the current round's records alone, as the node's does. The run itself over the
lab's sshd: tests/multinode/test_ssh_restarts.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cockpit.launch.ssh.shell import agent_source
from cockpit.launch.ssh.stream import file_messages, write_chunk
from cockpit.run import layout
from cockpit.run.restarts import restarts


def _watch_once(node: Path, offsets: dict[str, int], batch: bool = False) -> list[dict]:
    """One look of the real node agent at ``node`` (its run directory), from ``offsets``; ``batch``: the round's
    files in as few lines as fit, as the supervisor asks for them (cockpit.launch.ssh.stream.watch_args)."""
    args = {"run_dir": str(node), "exit_file": str(node / "no-such.exit"), "pid": os.getpid(), "start": None,
            "copy": True, "offsets": offsets, "once": True, "batch": batch}
    r = subprocess.run([sys.executable, "-c", agent_source(), "watch", json.dumps(args)], capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def _follow(node: Path, here: Path, offsets: dict[str, int], batch: bool = False) -> list[dict]:
    msgs = _watch_once(node, offsets, batch)
    for msg in msgs:
        for one in file_messages(msg):  # as cockpit.launch.ssh.unit.SSHUnit.handle
            write_chunk(here, False, offsets, one)
    return msgs


def _files(run_dir: Path) -> dict[str, bytes]:
    return {p.relative_to(run_dir).as_posix(): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _set_aside(node: Path, name: str, k: int) -> None:
    """What the rank wrapper does when torchrun starts round k + 1 (cockpit.render.rankwrap)."""
    aside = node / layout.LOGS / f"restart-{k}"
    aside.mkdir(exist_ok=True)
    os.replace(node / layout.LOGS / name, aside / name)


def test_a_record_set_aside_on_the_node_is_moved_here_too_and_the_next_rounds_comes_as_new(tmp_path):
    node, here = tmp_path / "node", tmp_path / "here"
    (here / layout.LOGS).mkdir(parents=True)
    logs = node / layout.LOGS
    _write(logs / "rank-1.n2.log", "rank 1 round 0\n")
    _write(logs / "rank-1.n2.exit", "3 10.0\n")
    _write(logs / "rank-0.n2.exit", "143 11.0\n")
    offsets: dict[str, int] = {}
    _follow(node, here, offsets)
    assert (here / layout.LOGS / "rank-1.n2.exit").read_text() == "3 10.0\n"
    # round 1 starts: the wrappers set round 0's records aside, and rank 1 ends round 1 before the agent looks
    _set_aside(node, "rank-1.n2.exit", 0)
    _set_aside(node, "rank-0.n2.exit", 0)
    _write(logs / "rank-1.n2.exit", "0 20.0\n")
    msgs = _follow(node, here, offsets)
    assert {"path": "logs/rank-1.n2.exit", "moved": "logs/restart-0/rank-1.n2.exit"} in msgs
    assert (here / layout.LOGS / "restart-0" / "rank-1.n2.exit").read_text() == "3 10.0\n"
    assert (here / layout.LOGS / "restart-0" / "rank-0.n2.exit").read_text() == "143 11.0\n"
    assert (here / layout.LOGS / "rank-1.n2.exit").read_text() == "0 20.0\n"
    assert not (here / layout.LOGS / "rank-0.n2.exit").exists()
    assert [(r.rank, r.status) for r in restarts(here, [])] == [(1, 3)]
    assert [m for m in _follow(node, here, offsets) if "path" in m] == []  # nothing new: nothing sent again


def test_a_record_set_aside_before_it_was_copied_comes_under_its_new_name(tmp_path):
    node, here = tmp_path / "node", tmp_path / "here"
    (here / layout.LOGS).mkdir(parents=True)
    _write(node / layout.LOGS / "rank-1.n2.exit", "3 10.0\n")
    _set_aside(node, "rank-1.n2.exit", 0)  # the agent was away (a reconnect) while round 0 ended and round 1 began
    offsets: dict[str, int] = {}
    msgs = _follow(node, here, offsets)
    assert not any("moved" in m for m in msgs)
    assert (here / layout.LOGS / "restart-0" / "rank-1.n2.exit").read_text() == "3 10.0\n"
    assert not (here / layout.LOGS / "rank-1.n2.exit").exists()


def test_a_move_outside_the_restart_folders_is_refused(tmp_path):
    (tmp_path / layout.LOGS).mkdir()
    (tmp_path / layout.LOGS / "rank-1.n2.exit").write_text("3 10.0\n")
    offsets = {"logs/rank-1.n2.exit": 7}
    for to in ("metrics/rank-1.n2.exit", "logs/restart-0/../../x", "logs/other/rank-1.n2.exit"):
        write_chunk(tmp_path, False, offsets, {"path": "logs/rank-1.n2.exit", "moved": to})
    assert (tmp_path / layout.LOGS / "rank-1.n2.exit").exists() and offsets == {"logs/rank-1.n2.exit": 7}
    write_chunk(tmp_path, True, offsets, {"path": "logs/rank-1.n2.exit", "moved": "logs/restart-0/rank-1.n2.exit"})
    assert (tmp_path / layout.LOGS / "rank-1.n2.exit").exists()  # a node that shares the run directory: its own


def test_a_look_without_the_supervisor_moves_no_later_round_over_an_earlier_ones_copy(tmp_path):
    """`cockpit attach` of an ssh run whose supervisor is gone asks each node once, from what is here
    (cockpit.launch.ssh.orphan.copied): round 0's record was moved here already and round 1's copied; the node
    has since started round 2. Only round 1's copy moves, to restart-1/."""
    from cockpit.launch.ssh.orphan import copied

    node, here = tmp_path / "node", tmp_path / "here"
    (here / layout.LOGS).mkdir(parents=True)
    _write(node / layout.LOGS / "rank-1.n2.exit", "3 10.0\n")
    offsets: dict[str, int] = {}
    _follow(node, here, offsets)
    _set_aside(node, "rank-1.n2.exit", 0)
    _write(node / layout.LOGS / "rank-1.n2.exit", "3 20.0\n")
    _follow(node, here, offsets)  # the supervisor's last look, then it died
    _set_aside(node, "rank-1.n2.exit", 1)
    _write(node / layout.LOGS / "rank-1.n2.exit", "0 30.0\n")
    _follow(node, here, copied(here))
    logs = here / layout.LOGS
    assert [(logs / p).read_text() for p in ("restart-0/rank-1.n2.exit", "restart-1/rank-1.n2.exit",
                                             "rank-1.n2.exit")] == ["3 10.0\n", "3 20.0\n", "0 30.0\n"]


def test_between_two_wrappers_moves_the_stale_record_is_no_failure_of_this_round(tmp_path):
    """Round 1 starts: rank 1's wrapper set its round-0 record aside, rank 0's not yet. The ssh side, which stops
    every node on a failure once no restart is left, must not read rank 0's round-0 exit 143 as round 1's."""
    from cockpit.run.restarts import this_round
    from cockpit.run.store import first_failure, rank_exits

    logs = tmp_path / layout.LOGS
    _write(logs / "rank-0.n2.exit", "143 11.0\n")
    _write(logs / "rank-1.n2.exit", "3 10.0\n")
    assert this_round(tmp_path, rank_exits(tmp_path)) == rank_exits(tmp_path)  # no restart yet: every record
    _set_aside(tmp_path, "rank-1.n2.exit", 0)
    exits = rank_exits(tmp_path)
    assert first_failure(exits) is not None and this_round(tmp_path, exits) == {}
    _set_aside(tmp_path, "rank-0.n2.exit", 0)
    _write(logs / "rank-1.n2.exit", "3 20.0\n")  # round 1's own failure counts
    assert [(r, e.status) for r, e in this_round(tmp_path, rank_exits(tmp_path)).items()] == [(1, 3)]


def test_a_rounds_files_come_in_batches_under_the_line_limit_moves_first(tmp_path):
    """The supervisor asks for a round's files batched (issue 32: a message per node per round, not one per
    changed file): the same copy as file by file, every line under asyncio's 64 KiB, a record set aside moved
    before the next round's record of the same name comes."""
    node, here, one = tmp_path / "node", tmp_path / "here", tmp_path / "one"
    (here / layout.LOGS).mkdir(parents=True)  # the run directory here, as the launch makes it
    (one / layout.LOGS).mkdir(parents=True)
    logs = node / layout.LOGS
    for r in range(64):
        _write(logs / f"rank-{r}.n2.log", f"[cockpit] step=1 rank={r}\n" * 100)
        _write(logs / f"rank-{r}.n2.beat", '{"t":1.5,"sync":0.1,"n":3,"in":null}\n' * 10)
        _write(node / layout.METRICS / f"rank-{r}.jsonl", '{"step":1}\n')
    (logs / "rank-0.n2.log").write_bytes(b"hello \xff world\n" * 3000)  # more than one chunk, not UTF-8
    _write(logs / "rank-1.n2.exit", "3 10.0\n")
    offsets: dict[str, int] = {}
    offsets_one: dict[str, int] = {}

    def look() -> list[dict]:
        lines = _follow(node, here, offsets, batch=True)
        _follow(node, one, offsets_one)
        assert all(len(json.dumps(m, separators=(",", ":"))) < 64 * 1024 for m in lines)
        assert _files(here) == _files(one) == _files(node)
        files = [m for m in lines if file_messages(m)]
        assert files and all("batch" in m for m in files)
        return files

    first = look()
    assert 1 < len(first) < 64  # 64 ranks' history so far: a few lines of 40 KB, not 193 of their own
    # torchrun's round 1: rank 1's record set aside, its next one written; a beat from every rank
    _set_aside(node, "rank-1.n2.exit", 0)
    _write(logs / "rank-1.n2.exit", "0 20.0\n")
    for r in range(64):
        with open(logs / f"rank-{r}.n2.beat", "a") as f:
            f.write('{"t":2.5,"sync":0.2,"n":4,"in":null}\n')
    [second] = look()  # the round's 66 files in one line
    assert second["batch"][0] == {"path": "logs/rank-1.n2.exit", "moved": "logs/restart-0/rank-1.n2.exit"}
    assert len(second["batch"]) == 1 + 1 + 64
