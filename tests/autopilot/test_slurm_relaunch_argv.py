"""The sbatch commands a Slurm relaunch (recover:) runs: argv lists without a shell, --exclude only where a node is
left out, and the note's form of them quoted so that a shell would read back the same words."""

from __future__ import annotations

import shlex

from cockpit.launch.slurm.relaunch import excluded, sbatch_argv, shown
from cockpit.run.records import NodeRecord, SlurmJob
from cockpit.run.store import RunStatus


def test_exclude_only_where_a_node_is_left_out_and_the_shown_command_reads_back(tmp_path):
    run_dir = tmp_path / "a run; rm -rf ~"
    script = str((run_dir / "commands" / "sbatch.sh").resolve())
    assert sbatch_argv(run_dir, ()) == ["sbatch", "--parsable", script]
    argv = sbatch_argv(run_dir, ("n1", "n3"), test_only=True)
    assert argv == ["sbatch", "--parsable", "--test-only", "--exclude=n1,n3", script]
    assert shlex.split(shown(argv)) == argv and "'" in shown(argv)  # the space and ; are quoted


def test_the_nodes_left_out_so_far_come_from_the_node_record():
    status = RunStatus(run_id="r", name="r", launcher="slurm", job_file="j", hosts=[], world_size=1)
    status.nodes = [NodeRecord("sbatch", 0, slurm=SlurmJob("12", earlier_jobs=("11",), excluded=("n2",)))]
    assert excluded(status) == ("n2",)
    status.nodes = [NodeRecord("sbatch", 0, slurm=SlurmJob("12"))]
    assert excluded(status) == ()
