"""An early exit in the exit records (issue 26): a rank that exited 0 while the others still waited for it in a
collective is the run's first failure, not `ok`; the ranks that then lost their peer are its consequences. The
logs are real files (a run directory's logs/), the records as the rank wrappers write them."""

from __future__ import annotations

from cockpit.logs.diagnose.peerloss import EARLY_EXIT
from cockpit.run.records import RankExit
from cockpit.run.store import failure_record, first_failure

LOST = ("[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
        "[127.0.0.1]:51928. This is typically caused by a remote worker crashing.\n")


def logs(tmp_path, rank0: str, rank1: str = "rank 1: loss is low enough, stopping early\n"):
    d = tmp_path / "logs"
    d.mkdir(parents=True)
    (d / "rank-0.vm.log").write_text(rank0)
    (d / "rank-1.vm.log").write_text(rank1)
    return tmp_path


def test_the_rank_that_left_first_is_the_first_failure(tmp_path):
    run_dir = logs(tmp_path, LOST)
    exits = {0: RankExit(0, "vm", 1, 100.4), 1: RankExit(1, "vm", 0, 100.0)}
    first = first_failure(exits, run_dir)
    assert first.rank == 1 and first.status == 0
    assert failure_record(run_dir, first).description == EARLY_EXIT
    # on a busy machine rank 1's wrapper may stamp its end after the peer's error: still the early exit
    late = {0: RankExit(0, "vm", 1, 100.0), 1: RankExit(1, "vm", 0, 100.6)}
    assert first_failure(late, run_dir).rank == 1
    assert first_failure(exits).rank == 0  # without the logs nothing says rank 0 only lost its peer


def test_a_rank_that_finished_long_before_or_a_failure_of_its_own_is_no_early_exit(tmp_path):
    run_dir = logs(tmp_path, "[rank0]: ValueError: bad batch at step 7\n")
    exits = {0: RankExit(0, "vm", 1, 100.4), 1: RankExit(1, "vm", 0, 100.0)}
    assert first_failure(exits, run_dir).rank == 0  # rank 0's own error: it is the cause
    lost = logs(tmp_path / "b", LOST)
    later = {0: RankExit(0, "vm", 1, 100.0), 1: RankExit(1, "vm", 0, 105.0)}  # exited 0 after the failure
    assert first_failure(later, lost).rank == 0
