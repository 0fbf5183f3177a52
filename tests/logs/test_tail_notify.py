"""The tail engine's two ways of knowing what to read: inotify (a directory watch per directory on a local file
system; quiet files cost nothing) and polling (every file, the fallback for NFS/Lustre and where inotify is not
to be had, forced here with ``notify=False``). Real files, real writers.

The safety-net full poll is set to a minute in the inotify cases: a line that comes within the test's deadline
(seconds) came through an event, not through that poll. Every async test runs under a hard timeout.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from cockpit.logs import notify
from cockpit.logs.tail import Line, Tailer

SLOW_FULL_POLL = 60.0  # inotify cases: no full poll within a test, so what comes, came by an event
MODES = {"inotify": {"notify": True, "full_poll_interval": SLOW_FULL_POLL},
         "polling": {"notify": False, "idle_poll_interval": 0.05}}


def run(coro, timeout: float = 30.0):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


async def collect(tailer: Tailer, until, timeout: float = 10.0) -> list[Line]:
    lines: list[Line] = []
    deadline = time.monotonic() + timeout
    while not until(lines):
        left = deadline - time.monotonic()
        assert left > 0, f"timed out; got {[(x.source, x.text) for x in lines][-10:]}"
        try:
            batch = await asyncio.wait_for(tailer.next_batch(), left)
        except asyncio.TimeoutError:
            continue
        assert batch is not None, "iteration ended early"
        lines.extend(batch.lines)
    return lines


def texts(lines: list[Line]) -> list[str]:
    return [line.text for line in lines]


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def has(*wanted: str):
    return lambda lines: all(w in texts(lines) for w in wanted)


async def quiet(seconds: float = 0.6) -> None:
    """Let the Tailer back off to its quiet pace (inotify: waiting on the descriptor)."""
    await asyncio.sleep(seconds)


async def started(tailer: Tailer, path: Path) -> list[Line]:
    """Start the Tailer's loop (its first batch) with a line of ``path``, which it must follow."""
    append(path, b"started\n")
    return await collect(tailer, has("started"))


@pytest.fixture(params=list(MODES))
def mode(request):
    return MODES[request.param]


def test_a_line_appended_to_a_quiet_file_among_many_is_delivered(tmp_path, mode):
    paths = [tmp_path / f"rank-{r}.log" for r in range(64)]
    for p in paths:
        p.write_bytes(b"")

    async def main():
        async with Tailer(**mode) as tailer:
            for r, p in enumerate(paths):
                tailer.add(r, p)
            await started(tailer, paths[0])
            await quiet()
            append(paths[37], b"late line\n")
            return await collect(tailer, has("late line"))

    lines = run(main())
    assert [(x.source, x.text) for x in lines] == [(37, "late line")]


def test_a_file_that_appears_later_is_read_from_its_start(tmp_path, mode):
    path, other = tmp_path / "rank-0.log", tmp_path / "rank-1.log"

    async def main():
        async with Tailer(**mode) as tailer:
            tailer.add(0, path)
            tailer.add(1, other)
            await started(tailer, other)
            await quiet()
            path.write_bytes(b"first\nsecond\n")
            return await collect(tailer, has("second"))

    assert texts(run(main())) == ["first", "second"]


def test_a_directory_that_appears_later_is_watched_and_read(tmp_path):
    """Its files are polled until the directory exists, then watched (at the next full poll)."""
    path, other = tmp_path / "logs" / "rank-0.log", tmp_path / "rank-1.log"

    async def main():
        async with Tailer(full_poll_interval=0.3) as tailer:
            tailer.add(0, path)
            tailer.add(1, other)
            await started(tailer, other)
            await quiet()
            path.parent.mkdir()
            path.write_bytes(b"one\n")
            got = await collect(tailer, has("one"))
            await quiet()  # watched by now; the next line comes by an event
            append(path, b"two\n")
            return got + await collect(tailer, has("two"))

    assert texts(run(main())) == ["one", "two"]


def test_truncation_is_followed(tmp_path, mode):
    path = tmp_path / "rank-0.log"
    path.write_bytes(b"old 1\nold 2\n")

    async def main():
        async with Tailer(**mode) as tailer:
            tailer.add(0, path)
            got = await collect(tailer, has("old 2"))
            await quiet()
            with open(path, "wb") as f:  # truncate, then a shorter text
                f.write(b"new\n")
            return got + await collect(tailer, has("new")), tailer.state(0)

    lines, state = run(main())
    assert texts(lines) == ["old 1", "old 2", "new"]
    assert state is not None and state.truncations == 1


def test_rotation_reads_the_old_file_to_its_end_then_the_new_one(tmp_path, mode):
    path = tmp_path / "rank-0.log"
    path.write_bytes(b"a\n")

    async def main():
        async with Tailer(**mode) as tailer:
            tailer.add(0, path)
            got = await collect(tailer, has("a"))
            await quiet()
            with open(path, "ab") as old:
                old.write(b"b\n")
                os.rename(path, tmp_path / "rank-0.log.1")
                old.write(b"c\n")  # the writer has not reopened yet
            path.write_bytes(b"d\n")
            return got + await collect(tailer, has("d")), tailer.state(0)

    lines, state = run(main())
    assert texts(lines) == ["a", "b", "c", "d"]
    assert state is not None and state.rotations == 1


def test_a_deleted_file_still_open_is_read_on(tmp_path, mode):
    """The writer keeps writing to a file removed from the directory: its lines still come."""
    path = tmp_path / "rank-0.log"
    path.write_bytes(b"")

    async def main():
        async with Tailer(**mode) as tailer:
            tailer.add(0, path)
            with open(path, "ab", buffering=0) as f:
                f.write(b"before\n")
                got = await collect(tailer, has("before"))
                path.unlink()
                await quiet()
                f.write(b"after\n")
                return got + await collect(tailer, has("after"))

    assert texts(run(main())) == ["before", "after"]


def test_a_busy_directory_of_other_files_delivers_nothing_and_misses_nothing(tmp_path):
    """Beat files written beside the logs raise events for names nobody follows: no lines from them, and a
    line of a followed file among them still comes."""
    logs = [tmp_path / f"rank-{r}.log" for r in range(4)]
    beats = [tmp_path / f"rank-{r}.beat" for r in range(4)]
    for p in logs:
        p.write_bytes(b"")

    async def main():
        async with Tailer(**MODES["inotify"]) as tailer:
            for r, p in enumerate(logs):
                tailer.add(r, p)
            await started(tailer, logs[0])
            for i in range(50):
                for b in beats:
                    append(b, b'{"t": %d}\n' % i)
                await asyncio.sleep(0.005)
            append(logs[2], b"real\n")
            return await collect(tailer, has("real"))

    lines = run(main())
    assert [(x.source, x.text) for x in lines] == [(2, "real")]


def test_watch_refused_off_local_file_systems_and_for_missing_directories(tmp_path):
    changes = notify.Changes.open()
    assert changes is not None, "inotify is not available on this Linux machine"
    try:
        assert notify.fs_type(str(tmp_path)) in notify.LOCAL_FS
        assert changes.watch(str(tmp_path)) and changes.watching(str(tmp_path))
        assert notify.fs_type("/proc") not in notify.LOCAL_FS  # procfs: changes no event reports
        assert not changes.watch("/proc") and not changes.watching("/proc")
        assert not changes.watch(str(tmp_path / "missing"))
    finally:
        changes.close()


def test_events_name_the_changed_files_and_an_overlong_queue_says_everything(tmp_path):
    changes = notify.Changes.open()
    assert changes is not None
    try:
        assert changes.watch(str(tmp_path))
        append(tmp_path / "a.log", b"x\n")
        (tmp_path / "b.log").write_bytes(b"")
        got = changes.read()
        assert got.names == {str(tmp_path): {"a.log", "b.log"}} and not got.everything
        for i in range(200):
            append(tmp_path / f"f{i}.log", b"x\n")
        assert changes.read(decode_bytes=1024).everything
        assert changes.read() == notify.Changed()  # the queue was emptied
        sub = tmp_path / "sub"
        sub.mkdir()
        assert changes.watch(str(sub))
        changes.read()
        sub.rmdir()
        assert str(sub) in changes.read().gone and not changes.watching(str(sub))
    finally:
        changes.close()
