"""A rank ended by the kernel's OOM killer: its node is blamed when the job's ranks held little of the node's memory
(something else took it), the job when they filled it (not retried: any node of that size runs out the same way);
no verdict without a later beat of the same node showing the OOM-kill count rise."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from cockpit.launch import memblame, recovery
from cockpit.launch.recovery import Policy, blame, decide
from cockpit.run.records import FirstFailure
from cockpit.run.status import RunStatus

GIB = 1 << 20  # KiB
POLICY = Policy(attempts=3, on=("failure",))


def beat(t: float, oomk: int, rss_gib: float, memt_gib: float = 64) -> dict:
    return {"t": t, "pid": 1, "in": None, "rss": int(rss_gib * GIB), "memt": int(memt_gib * GIB), "oomk": oomk}


def test_the_node_is_blamed_when_the_job_held_little_of_its_memory():
    v = memblame.judge({0: beat(10.0, 3, 6), 1: beat(11.0, 4, 6)}, 0, "n1")
    assert v is not None and (v.blame, v.held_kib, v.ranks) == ("node", 12 * GIB, 2)
    assert v.words(0) == ("rank 0 was killed by the kernel's OOM killer on n1 (host memory): the job's 2 rank(s) "
                          "there held 12.0 of the 64.0 GiB they may use (19%)")


def test_the_job_is_blamed_when_its_ranks_filled_the_node():
    v = memblame.judge({0: beat(10.0, 3, 30), 1: beat(11.0, 4, 27)}, 0, "n1")
    assert v is not None and v.blame == "job"


@pytest.mark.parametrize("beats", [
    {0: beat(10.0, 3, 6), 1: beat(11.0, 3, 6)},  # the count did not rise: a SIGKILL from someone else
    {0: beat(10.0, 3, 6), 1: beat(9.0, 4, 6)},  # the other rank's last beat is older than the killed one's
    {0: beat(10.0, 3, 6)},  # one rank on the node: no beat after its death
    {0: {"t": 10.0, "in": None}, 1: {"t": 11.0, "in": None}},  # a hook from before the memory fields
    {1: beat(11.0, 4, 6)},  # no beat of the killed rank
])
def test_no_verdict_without_a_later_beat_showing_an_oom_kill(beats):
    assert memblame.judge(beats, 0, "n1") is None


def test_the_count_in_the_killed_ranks_exit_record_shows_the_kill_without_a_later_beat():
    # under torchrun the other ranks are SIGTERMed ~0.1 s after the kill, mostly before their next beat
    assert memblame.judge({0: beat(10.0, 3, 6), 1: beat(9.5, 3, 6)}, 0, "n1", at_exit=4).blame == "node"
    assert memblame.judge({0: beat(10.0, 3, 60)}, 0, "n1", at_exit=4).blame == "job"  # one rank on the node
    assert memblame.judge({0: beat(10.0, 3, 6)}, 0, "n1", at_exit=3) is None  # a SIGKILL from someone else


def test_the_exit_records_count_is_read_from_its_third_field(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank-0.n1.beat").write_text(json.dumps(beat(10.0, 3, 6)) + "\n")
    for record, found in (("137 10.5 4\n", True), ("137 10.5 3\n", False), ("137 10.5\n", False),
                          ("137 10.5 x\n", False)):
        (logs / "rank-0.n1.exit").write_text(record)
        assert (memblame.oom_verdict(tmp_path, 0, "n1") is not None) is found, record


def test_a_sigkilled_rank_whose_node_counted_an_oom_kill_blames_the_node_in_the_outcome(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank-0.n1.log").write_text("step=5 loss=1.0\n")
    (logs / "rank-0.n1.beat").write_text("\n".join(json.dumps(b) for b in (beat(9.0, 3, 5), beat(10.0, 3, 6))) + "\n")
    (logs / "rank-1.n1.beat").write_text(json.dumps(beat(11.0, 4, 6)) + "\n")
    (logs / "rank-2.n2.beat").write_text(json.dumps(beat(11.0, 0, 6)) + "\n")  # another node's: not counted
    s = RunStatus("r", "t", "ssh", "/j.yaml", ["n1", "n2"], 4)
    s.first_failure = FirstFailure(0, "n1", 137, 10.5, "killed by SIGKILL (status 137)")
    out = recovery.failure_outcome(tmp_path, s)
    assert (out.oom, out.node, out.remedy, blame(out)) == ("node", "n1", "resources", ("n1",))
    assert out.cause.startswith("rank 0 was killed by the kernel's OOM killer on n1")
    s.first_failure = FirstFailure(0, "n1", 1, 10.5, "exit code 1")  # not a SIGKILL: the beats are not asked
    assert recovery.failure_outcome(tmp_path, s).oom is None


def test_decide_stops_a_job_made_oom_and_a_second_node_oom_and_moves_off_a_node_made_one():
    node = recovery.Outcome("failure", 0, "n1", "rank 0 was killed by the kernel's OOM killer on n1", "resources",
                            node="n1", oom="node")
    d = decide(POLICY, [], node, 0, 2, blame(node), None)
    assert d.retry and d.leave_out == ("n1",)
    job = recovery.Outcome("failure", 0, "n1", "rank 0 was killed by the kernel's OOM killer on n1", "resources",
                           oom="job")
    assert blame(job) == ()
    d = decide(POLICY, [], job, 0, 2, blame(job), None)
    assert not d.retry and d.words.startswith("not retried: rank 0 was killed by the kernel's OOM killer on n1: "
                                              "the job's own ranks fill the node's memory")
    again = recovery.Outcome("failure", 0, "s1", "rank 0 was killed by the kernel's OOM killer on s1", "resources",
                             node="s1", oom="node")
    d = decide(POLICY, [node], again, 1, 2, blame(again), None)
    assert not d.retry and d.words.startswith("not retried: the kernel's OOM killer ended ranks on n1 and then on s1")


def test_the_hook_reads_this_machines_memory_and_oom_count():
    # loaded under another name than sitecustomize: it installs nothing into this process
    spec = importlib.util.spec_from_file_location("cockpit_rankhook_probe",
                                                  Path(__file__).parents[2] / "cockpit" / "node" / "rankhook.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    rss, total, limit = hook._rss_kib(), hook._proc_kib("/proc/meminfo", "MemTotal:"), hook._mem_limit_kib()
    assert isinstance(rss, int) and isinstance(total, int) and 0 < rss < total
    assert isinstance(limit, int) and rss < limit <= total  # a cgroup's limit where it is lower
    assert isinstance(hook._proc_kib("/proc/vmstat", "oom_kill "), int)
    assert hook._proc_kib("/proc/vmstat", "no_such_counter ") is None
