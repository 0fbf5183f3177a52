"""Any job of the user, pure parts: sbatch's filename patterns, squeue's and jobcomp's records parsed from real
output (tests/slurm/fixtures/*-user-jobs.txt say which jobs gave them), the output files each job wrote, and
which arguments are job ids. The same against the running cluster: tests/slurm/test_any_job.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.slurm import jobs
from cockpit.slurm.filenames import NOT_AN_ARRAY, PatternFacts, resolve

FIXTURES = Path(__file__).parent / "fixtures"


def records(name: str) -> str:
    return "".join(ln for ln in (FIXTURES / name).read_text().splitlines(keepends=True) if not ln.startswith("#"))


def by_id(found: list[jobs.UserJob]) -> dict[str, jobs.UserJob]:
    return {j.job_id: j for j in found}


# -- filename patterns ------------------------------------------------------------------------------------------
TASK = PatternFacts("12908", "12904", "0", "root", "arr")
PLAIN = PatternFacts("12905", None, None, "root", "failer")


@pytest.mark.parametrize("facts, pattern, path", [
    (TASK, "out-%x-%j-%a.log", "out-arr-12908-0.log"),  # what slurmstepd wrote (see the fixture)
    (TASK, "slurm-%A_%a.out", "slurm-12904_0.out"),
    (TASK, "%4a-%u-%t-%n-%%.txt", "0000-root-0-0-%.txt"),
    (PLAIN, "f-%A_%a-%u.out", f"f-12905_{NOT_AN_ARRAY}-root.out"),  # as slurmstepd 22.05 wrote it
    (PLAIN, "a\\%j.out", "a%j.out"),  # a backslash turns every replacement off
    (PLAIN, "%J-%8j.log", "12905-00012905.log"),
    (PLAIN, "100%.log", "100%.log"),  # not a pattern: left alone
])
def test_patterns_resolve_as_sbatch_documents(facts, pattern, path):
    assert resolve(pattern, facts).path == path
    assert not resolve(pattern, facts).wildcard


def test_what_only_the_node_knows_becomes_a_wildcard():
    r = resolve("/w/f-%N-%s.out", PLAIN)
    assert r.path == "/w/f-*-*.out" and r.wildcard
    assert resolve("%x.out", PatternFacts("1")).wildcard  # no name known


# -- squeue -----------------------------------------------------------------------------------------------------
def test_squeue_records_every_job_and_array_task_with_its_details():
    found = by_id(jobs.parse_squeue(records("squeue-user-jobs.txt")))
    assert sorted(found) == ["12903", "12904_0", "12904_1", "12904_2", "12905", "12906", "12907"]
    task = found["12904_1"]
    assert (task.raw_id, task.array_job_id, task.array_task_id, task.name) == ("12909", "12904", "1", "arr")
    assert (task.slurm_state, task.state, task.final, task.exit_status) == ("FAILED", "failed", True, 1)
    assert task.reason == "NonZeroExitCode" and task.nodes == "n1" and task.user == "root"
    failer = found["12905"]
    assert failer.exit_code == 3 and failer.stderr == "/tmp/anyjob/w/err-%j.txt"
    held = found["12907"]
    assert (held.state, held.reason, held.nodes, held.batch_host) == ("starting", "JobHeldUser", None, None)
    assert (found["12906"].elapsed, found["12906"].time_limit) == ("0:10", "5:00")


def test_output_files_are_what_slurmstepd_wrote():
    found = by_id(jobs.parse_squeue(records("squeue-user-jobs.txt")))
    paths = {k: [(o.stream, o.path.path) for o in jobs.output_files(j)] for k, j in found.items()}
    assert paths["12904_0"] == [("stdout+stderr", "/tmp/anyjob/w/out-arr-12908-0.log")]
    assert paths["12904_2"] == [("stdout+stderr", "/tmp/anyjob/w/out-arr-12904-2.log")]
    assert paths["12905"] == [("stdout", "/tmp/anyjob/w/f-12905_4294967294-root-*-0-%.out"),
                              ("stderr", "/tmp/anyjob/w/err-12905.txt")]
    assert paths["12903"] == [("stdout+stderr", "/tmp/anyjob/w/slurm-12903.out")]
    assert not any(o.guessed for j in found.values() for o in jobs.output_files(j))


def test_a_name_with_the_separator_stays_whole():
    line = records("squeue-user-jobs.txt").splitlines()[0].replace("|wrap|", "|a|b c|")
    assert jobs.parse_squeue(line)[0].name == "a|b c"


# -- history ----------------------------------------------------------------------------------------------------
def test_jobcomp_gives_finished_jobs_of_the_user_and_guessed_output_files():
    text = records("jobcomp-user-jobs.txt")
    found = by_id(jobs.parse_jobcomp(text, user="root"))
    assert sorted(found) == ["12903", "12904_0", "12904_1", "12904_2", "12905", "12906"]
    assert found["12905"].exit_code == 3 and found["12905"].state == "failed"
    assert found["12906"].elapsed == "0:10"
    assert jobs.parse_jobcomp(text, user="alice") == []
    (out,) = jobs.output_files(found["12904_1"])
    assert out.guessed and out.path.path == "/tmp/anyjob/w/slurm-12904_1.out"
    assert jobs.output_files(found["12903"])[0].path.path == "/tmp/anyjob/w/slurm-12903.out"
    array = jobs.parse_jobcomp(text, ids={"12904"})
    assert sorted(j.job_id for j in array) == ["12904_0", "12904_1", "12904_2"]


def test_job_refs_are_bare_numbers_or_array_tasks():
    assert [jobs.parse_job_ref(r) for r in ("123", "123_4", "demo-20260101-0000-ab12", "last", "12a", "1_2_3")] \
        == ["123", "123_4", None, None, None, None]
