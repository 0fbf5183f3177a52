"""recover:'s node policy on NCCL RAS (issue 30 with the deadlink work's ras_missing): when the sockets show nothing
and RAS names a missing or dead process on one node alone, the stall's link finding names that node, and the next
attempt leaves it out as it would a dead link's node: on ssh a spare in its place, on Slurm an --exclude. The
findings are made from the recorded RAS answers and TCP snapshots tests/hang/test_deadlink_ras_finding.py uses."""

from __future__ import annotations

import time

from autopilot.test_ssh_spare import POLICY, _status, _write_plan
from hang.test_deadlink_ras_finding import STOPPED_172_213, lab, with_ras

from cockpit.hang.linkfind import LinkFinding, link_finding
from cockpit.hang.linkwords import link_dict
from cockpit.launch import recovery
from cockpit.launch.recovery import blame, decide, link_node, stall_outcome
from cockpit.launch.slurm.relaunch import sbatch_argv
from cockpit.launch.ssh import spare


def _stall(link: dict | None) -> dict:
    """The watchdog's stall finding (cockpit.hang.finding) as the supervisor hands it to recovery."""
    found = {"text": "every rank waits in all_reduce", "culprits": [{"rank": 0, "host": "n0"}], "found": time.time()}
    return {**found, "link": link} if link is not None else found


def _ras_missing_on_n2() -> dict:
    """A healthy snapshot (nothing queued anywhere) and RAS on n0 naming a stopped process at n2's address."""
    f = link_finding(with_ras(lab("healthy"), "n0", STOPPED_172_213), {"172.16.64.213": "n2"})
    assert isinstance(f, LinkFinding) and (f.kind, f.node) == ("ras_missing", "n2")
    return link_dict(f)


def test_the_node_ras_names_is_blamed_as_a_dead_links_node_is_not_the_culprits():
    link = _ras_missing_on_n2()
    assert link_node(link) == "n2"
    now = stall_outcome(_stall(link))
    assert (now.host, now.node, blame(now)) == ("n0", "n2", ("n2",))
    assert "ras_missing" in recovery.BLAMING_LINKS and "slow_link" not in recovery.BLAMING_LINKS
    assert link_node({**link, "kind": "slow_link"}) is None  # a slow link leaves no node out


def test_on_ssh_the_node_ras_names_gets_a_spare_in_its_place(tmp_path):
    now = stall_outcome(_stall({**_ras_missing_on_n2(), "node": "n1"}))  # the job's nodes here are n1, n2
    s = _status(tmp_path)
    _write_plan(tmp_path, ("n1", "n2"))
    assert spare.replacement(tmp_path, s, blame(now)) is None  # s1 is free to take its place
    d = decide(POLICY, [], now, 0, 2, blame(now), None)
    assert d.retry and d.leave_out == ("n1",)
    assert d.words.startswith("relaunched as attempt 1 of 3 without node n1 after a stall"), d.words
    s.recover = {"attempts": 2, "on": ["failure", "stall"], "spare_nodes": []}
    blocked = spare.replacement(tmp_path, s, blame(now))
    assert blocked == "no spare node is left (spare_nodes: [])"
    stop = decide(POLICY, [], now, 0, 2, blame(now), blocked)
    assert not stop.retry and "n1" in stop.words, stop.words


def test_on_slurm_the_node_ras_names_is_excluded_from_the_requeue(tmp_path):
    now = stall_outcome(_stall(_ras_missing_on_n2()))
    d = decide(POLICY, [], now, 0, 4, blame(now), None)
    assert d.retry and d.leave_out == ("n2",)
    script = str((tmp_path / "commands" / "sbatch.sh").resolve())
    assert sbatch_argv(tmp_path, d.leave_out) == ["sbatch", "--parsable", "--exclude=n2", script]


def test_on_slurm_an_address_ras_names_that_no_node_has_is_not_excluded():
    """RAS may name an address no node of the gather maps to: the finding names it as it is, but --exclude takes
    node names, so only the run's own hosts are left out (a Slurm run's hosts are known once it started)."""
    from cockpit.launch.slurm.relaunch import node_names
    from cockpit.run.status import RunStatus

    status = RunStatus(run_id="r", name="r", launcher="slurm", job_file="job.yaml", hosts=["n1", "n2"], world_size=4)
    assert node_names(status, ("172.16.64.213", "n2")) == ("n2",)
    assert node_names(status, ("172.16.64.213",)) == ()
    unknown = RunStatus(run_id="r", name="r", launcher="slurm", job_file="job.yaml", hosts=[], world_size=4)
    assert node_names(unknown, ("n7",)) == ("n7",)  # hosts not known yet: the blame stands
