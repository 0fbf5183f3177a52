"""Following a run (cockpit.run.watch.follow_run, behind `run`, `attach` and `logs -f`) lists logs/ again only
when its names changed: rank files that appear while the run is followed are still picked up, idle or not."""

from __future__ import annotations

import asyncio
import os
import time

from cockpit.run.store import RunStatus, create_run_dir, write_status
from cockpit.run.watch import DirStamp, StatusReader, follow_run


def test_dir_stamp_says_changed_first_then_only_when_a_name_comes_or_goes(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    old = time.time() - 60
    os.utime(d, (old, old))  # long settled: an unchanged mtime means nothing was added
    stamp = DirStamp(d)
    assert stamp.changed()
    assert not stamp.changed()
    (d / "rank-0.n0.log").write_bytes(b"")
    assert stamp.changed()  # just changed: counts as changed until it is SETTLE_S old
    os.utime(d, (old + 1, old + 1))
    assert stamp.changed() and not stamp.changed()
    (d / "rank-0.n0.log").unlink()
    os.utime(d, (old + 2, old + 2))
    assert stamp.changed()


def test_a_missing_directory_is_always_changed(tmp_path):
    stamp = DirStamp(tmp_path / "nope")
    assert stamp.changed() and stamp.changed()


def test_status_json_is_parsed_again_only_when_it_changed(tmp_path):
    run_dir = create_run_dir(tmp_path, "t-20270101-000000-0001")
    reader = StatusReader(run_dir)
    assert reader.read() is None  # none yet
    write_status(run_dir, status(run_dir, "running"))
    path = run_dir / "status.json"
    old = time.time() - 60
    os.utime(path, (old, old))  # settled: an unchanged identity means an unchanged file
    first = reader.read()
    assert first is not None and first.state == "running"
    assert reader.read() is first  # not read and parsed again
    write_status(run_dir, status(run_dir, "succeeded"))  # replaced whole, as the supervisor writes it
    assert reader.read().state == "succeeded"
    fresh = reader.read()
    assert fresh.state == "succeeded" and reader.read() is not fresh  # written within SETTLE_S: read again
    os.utime(path, (old + 1, old + 1))
    settled = reader.read()
    assert reader.read() is settled
    path.write_text("{not json")  # unreadable: None, and looked at again next time
    os.utime(path, (old + 2, old + 2))
    assert reader.read() is None
    write_status(run_dir, status(run_dir, "failed"))
    os.utime(path, (old + 2, old + 2))
    assert reader.read().state == "failed"


def status(run_dir, state: str) -> RunStatus:
    return RunStatus(run_id=run_dir.name, name="t", launcher="local", job_file="/dev/null", hosts=["n0"],
                     world_size=2, state=state, started=time.time())


def test_rank_files_that_appear_while_followed_are_read(tmp_path):
    run_dir = create_run_dir(tmp_path / "runs", "t-20270101-000000-0001")
    write_status(run_dir, status(run_dir, "running"))
    logs = run_dir / "logs"
    logs.mkdir(exist_ok=True)
    (logs / "rank-0.n0.log").write_bytes(b"zero\n")
    got: list[tuple] = []

    async def main():
        follow = asyncio.create_task(follow_run(run_dir, lambda b: got.extend((x.source, x.text) for x in b.lines),
                                                lossless=True))
        deadline = time.monotonic() + 20
        while ("n0", 0) not in {s for s, _ in got}:
            assert time.monotonic() < deadline, f"rank 0's line not delivered: {got}"
            await asyncio.sleep(0.02)
        await asyncio.sleep(1.5)  # logs/ has settled: discovery now rests on its mtime
        (logs / "rank-1.n0.log").write_bytes(b"one\n")
        while ("n0", 1) not in {s for s, _ in got}:
            assert time.monotonic() < deadline, f"rank 1's line not delivered: {got}"
            await asyncio.sleep(0.02)
        write_status(run_dir, status(run_dir, "succeeded"))
        return await asyncio.wait_for(follow, 20)

    final = asyncio.run(asyncio.wait_for(main(), 60))
    assert final is not None and final.final
    assert sorted(got) == [(("n0", 0), "zero"), (("n0", 1), "one")]
