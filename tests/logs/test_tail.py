"""The tail engine against real files, real writer threads and real writer processes.

Every async test runs through asyncio.run (no pytest-asyncio) under a hard timeout, so a hang fails fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.logs.tail import Batch, FileFollower, Line, Tailer


def run(coro, timeout: float = 15.0):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


async def collect(tailer: Tailer, until, timeout: float = 5.0) -> list[Line]:
    """Pull batches until until(lines) holds; fail with what arrived if it does not within timeout."""
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


async def nothing_for(tailer: Tailer, seconds: float) -> None:
    """Assert no batch arrives within seconds."""
    try:
        batch = await asyncio.wait_for(tailer.next_batch(), seconds)
    except asyncio.TimeoutError:
        return
    raise AssertionError(f"unexpected batch {batch}")


def texts(lines: list[Line]) -> list[str]:
    return [line.text for line in lines]


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def test_existing_lines_decoded_with_offsets_and_seq(tmp_path):
    path = tmp_path / "r0.log"
    path.write_bytes(b"one\ntwo\r\nbad \xff byte\n\n")

    async def main():
        async with Tailer() as tailer:
            tailer.add(("host", 0), path)
            return await collect(tailer, lambda ls: len(ls) >= 4)

    lines = run(main())
    assert texts(lines) == ["one", "two", "bad \ufffd byte", ""]
    assert [x.offset for x in lines] == [0, 4, 9, 20]
    assert [x.seq for x in lines] == [0, 1, 2, 3]
    assert {x.source for x in lines} == {("host", 0)} and not any(x.cut for x in lines)


def test_partial_line_held_until_its_newline(tmp_path):
    path = tmp_path / "r0.log"
    path.write_bytes(b"first\nhalf a li")

    async def main():
        async with Tailer(poll_interval=0.005) as tailer:
            tailer.add("r0", path)
            got = await collect(tailer, lambda ls: len(ls) >= 1)
            await nothing_for(tailer, 0.2)  # the half line must wait
            append(path, b"ne\r\nnext\n")
            return got + await collect(tailer, lambda ls: len(ls) >= 2)

    lines = run(main())
    assert texts(lines) == ["first", "half a line", "next"]
    assert [x.offset for x in lines] == [0, 6, 19] and not any(x.cut for x in lines)


def test_stop_flushes_partials_then_ends_iteration(tmp_path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_bytes(b"a1\na2\nunfinished")
    b.write_bytes(b"b-unfinished")

    async def main():
        tailer = Tailer()
        tailer.add("a", a)
        tailer.add("b", b)
        tailer.stop()
        return [batch async for batch in tailer], tailer

    batches, tailer = run(main())
    lines = [x for batch in batches for x in batch.lines]
    assert [(x.source, x.text, x.cut) for x in lines] == [
        ("a", "a1", False), ("a", "a2", False), ("a", "unfinished", True), ("b", "b-unfinished", True)]
    assert tailer.state("a").is_open is False  # files are closed after the final read


def test_stop_reads_to_the_end_even_past_max_read_bytes(tmp_path):
    path = tmp_path / "r0.log"
    path.write_bytes(b"".join(f"line {i}\n".encode() for i in range(5000)) + b"tail")

    async def main():
        tailer = Tailer(max_read_bytes=1000, max_buffered_lines_per_source=10_000)
        tailer.add("r0", path)
        tailer.stop()
        return [x async for batch in tailer.batches() for x in batch.lines]

    lines = run(main())
    assert texts(lines) == [f"line {i}" for i in range(5000)] + ["tail"]
    assert lines[-1].cut and not any(x.cut for x in lines[:-1])


def test_from_start_false_skips_history_but_keeps_the_line_in_progress(tmp_path):
    path = tmp_path / "r0.log"
    path.write_bytes(b"old 1\nold 2\nhalf")

    async def main():
        async with Tailer() as tailer:
            tailer.add("r0", path, from_start=False)
            append(path, b"-done\nnew\n")
            return await collect(tailer, lambda ls: len(ls) >= 2)

    assert texts(run(main())) == ["half-done", "new"]


def test_file_created_late_is_picked_up(tmp_path):
    path = tmp_path / "later" / "r3.log"

    async def main():
        async with Tailer(idle_poll_interval=0.05) as tailer:
            tailer.add("r3", path)
            await nothing_for(tailer, 0.2)
            waiting = tailer.state("r3")
            path.parent.mkdir()
            path.write_bytes(b"hello\nworld\n")
            return waiting, await collect(tailer, lambda ls: len(ls) >= 2), tailer.state("r3")

    waiting, lines, after = run(main())
    assert waiting.is_open is False and waiting.error is None
    assert texts(lines) == ["hello", "world"] and after.is_open is True


def test_truncation_restarts_from_zero(tmp_path):
    path = tmp_path / "r0.log"
    path.write_bytes(b"a long first line\nanother long line\n")

    async def main():
        async with Tailer() as tailer:
            tailer.add("r0", path)
            first = await collect(tailer, lambda ls: len(ls) >= 2)
            with open(path, "wb") as f:  # O_TRUNC, as a restarted job reopening its log would
                f.write(b"new 1\nnew 2\n")
            return first + await collect(tailer, lambda ls: len(ls) >= 2), tailer.state("r0")

    lines, state = run(main())
    assert texts(lines) == ["a long first line", "another long line", "new 1", "new 2"]
    assert [x.offset for x in lines[2:]] == [0, 6] and [x.seq for x in lines] == [0, 1, 2, 3]
    assert state.truncations == 1


def rotating_writer(path: Path, total: int, rotate_at: set[int]) -> None:
    """Write numbered lines; at each rotate_at the file is renamed away (as logrotate does) while the writer
    keeps writing its old handle for 20 more lines, then reopens the path (a new file)."""
    i, reopen_at, rotated = 0, -1, 0
    while i < total:
        with open(path, "ab", buffering=0) as f:
            while i < total and i != reopen_at:
                if i in rotate_at:
                    rotated += 1
                    os.rename(path, f"{path}.{rotated}")
                    reopen_at = i + 20
                f.write(f"line {i}\n".encode())
                i += 1
                if i % 25 == 0:
                    time.sleep(0.005)
        reopen_at = -1
        time.sleep(0.03)  # the path does not exist meanwhile


def test_rotation_finishes_old_file_then_follows_new_one(tmp_path):
    path = tmp_path / "r0.log"
    path.write_bytes(b"")
    total, rotate_at = 600, {200, 400}

    async def main():
        async with Tailer(poll_interval=0.005) as tailer:
            tailer.add("r0", path)
            writer = threading.Thread(target=rotating_writer, args=(path, total, rotate_at))
            writer.start()
            try:
                lines = await collect(tailer, lambda ls: len(ls) >= total)
            finally:
                writer.join()
            return lines, tailer.state("r0")

    lines, state = run(main())
    assert texts(lines) == [f"line {i}" for i in range(total)]
    assert state.rotations == 2 and (tmp_path / "r0.log.2").exists()


def test_carriage_return_progress_is_cut_into_bounded_pieces(tmp_path):
    path = tmp_path / "r0.log"
    frames = "".join(f"\rstep {i:05d}/00200 [{'#' * (i % 20):<20}]" for i in range(200))

    async def main():
        async with Tailer(max_line_bytes=1024) as tailer:
            tailer.add("r0", path)
            append(path, frames.encode())
            pieces = await collect(tailer, lambda ls: sum(len(x.text) for x in ls) > len(frames) - 1024)
            append(path, b" done\n")
            return pieces + await collect(tailer, lambda ls: any(not x.cut for x in ls))

    lines = run(main())
    assert len(lines) >= 6 and all(x.cut for x in lines[:-1]) and not lines[-1].cut
    assert all(len(x.text.encode()) <= 1024 and x.text.endswith("\r") for x in lines[:-1])
    assert "".join(texts(lines)) == frames + " done"
    assert [x.seq for x in lines] == list(range(len(lines)))


def test_cut_never_splits_a_utf8_character(tmp_path):
    path = tmp_path / "r0.log"
    text = "é" * 5000 + "x€" * 700
    path.write_bytes(text.encode() + b"\n")
    follower = FileFollower("r0", path, max_line_bytes=1001)
    lines = follower.poll()
    follower.close()
    assert "".join(texts(lines)) == text and "\ufffd" not in "".join(texts(lines))
    assert [x.cut for x in lines] == [True] * (len(lines) - 1) + [False]
    assert all(len(x.text.encode()) <= 1001 for x in lines)


def test_bounded_buffer_drops_oldest_and_reports_the_count(tmp_path):
    path = tmp_path / "r0.log"
    path.write_bytes(b"".join(f"{i}\n".encode() for i in range(1000)))

    async def main():
        async with Tailer(max_buffered_lines_per_source=100) as tailer:
            tailer.add("r0", path)
            batch = await tailer.next_batch()
            return batch, tailer.state("r0")

    batch, state = run(main())
    assert batch.dropped == {"r0": 900} and state.dropped == 900
    assert texts(batch.lines) == [str(i) for i in range(900, 1000)]
    assert [x.seq for x in batch.lines] == list(range(900, 1000))


def test_slow_consumer_loses_only_counted_oldest_lines(tmp_path):
    path = tmp_path / "r0.log"
    total = 3000

    def writer():
        with open(path, "ab", buffering=0) as f:
            for i in range(total):
                f.write(f"{i}\n".encode())
                if i % 100 == 0:
                    time.sleep(0.01)

    async def main():
        async with Tailer(max_buffered_lines_per_source=50) as tailer:
            tailer.add("r0", path)
            thread = threading.Thread(target=writer)
            thread.start()
            batches: list[Batch] = []
            seen = 0
            while seen < total:
                batch = await tailer.next_batch()
                batches.append(batch)
                seen = batch.lines[-1].seq + 1 if batch.lines else seen
                await asyncio.sleep(0.05)  # a consumer slower than the writer
            thread.join()
            return batches

    batches = run(main())
    seqs = [x.seq for b in batches for x in b.lines]
    dropped = sum(b.dropped.get("r0", 0) for b in batches)
    assert dropped > 0 and len(seqs) + dropped == total
    assert seqs == sorted(set(seqs)) and all(b.lines[0].text == str(b.lines[0].seq) for b in batches)


def test_remove_stops_delivery_and_state(tmp_path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"

    async def main():
        async with Tailer() as tailer:
            tailer.add("a", a)
            tailer.add("b", b)
            tailer.remove("a")
            append(a, b"from a\n")
            append(b, b"from b\n")
            lines = await collect(tailer, lambda ls: len(ls) >= 1)
            await nothing_for(tailer, 0.1)
            return lines, tailer.sources, tailer.state("a")

    lines, sources, state_a = run(main())
    assert [(x.source, x.text) for x in lines] == [("b", "from b")]
    assert sources == ("b",) and state_a is None


def test_a_directory_is_reported_not_raised(tmp_path):
    async def main():
        async with Tailer(idle_poll_interval=0.02) as tailer:
            tailer.add("d", tmp_path)
            await nothing_for(tailer, 0.1)
            return tailer.state("d")

    state = run(main())
    assert state.is_open is False and "not a regular file" in state.error


WRITER = r"""
import random, sys, time
n, seed, paths = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
rng = random.Random(seed)
files = [open(p, "ab", buffering=0) for p in paths]
for i in range(n):
    for k in rng.sample(range(len(files)), len(files)):
        line = f"{i} {'x' * rng.randrange(0, 120)}\n".encode()
        if rng.random() < 0.2:  # split the write: readers must hold the partial line
            cut = rng.randrange(1, len(line))
            files[k].write(line[:cut])
            time.sleep(rng.random() * 0.002)
            files[k].write(line[cut:])
        else:
            files[k].write(line)
    time.sleep(rng.random() * 0.002)
"""


def test_64_files_written_concurrently_arrive_complete_and_in_order(tmp_path):
    n = 300
    groups = [[tmp_path / f"node{p}" / f"rank{p * 8 + k}.log" for k in range(8)] for p in range(8)]
    procs = []

    async def main():
        async with Tailer() as tailer:
            for group in groups:  # added before the files exist: every one is created late
                for path in group:
                    tailer.add(("node", path.stem), path)
            for p, group in enumerate(groups):
                group[0].parent.mkdir()
                args = [sys.executable, "-c", WRITER, str(n), str(p), *map(str, group)]
                procs.append(subprocess.Popen(args))
            lines = await collect(tailer, lambda ls: len(ls) >= 64 * n, timeout=12)
            await nothing_for(tailer, 0.1)  # and nothing extra
            return lines

    try:
        lines = run(main(), timeout=18)
    finally:
        assert [proc.wait(timeout=10) for proc in procs] == [0] * 8
    by_source: dict[object, list[int]] = {}
    for line in lines:
        assert not line.cut
        by_source.setdefault(line.source, []).append(int(line.text.split(" ")[0]))
    assert len(by_source) == 64
    assert all(numbers == list(range(n)) for numbers in by_source.values())


def test_batches_coalesce_a_high_rate_stream(tmp_path):
    paths = [tmp_path / f"r{i}.log" for i in range(16)]
    per_file = 500

    def writer():
        with contextlib.ExitStack() as stack:
            files = [stack.enter_context(open(p, "ab", buffering=0)) for p in paths]
            for i in range(per_file):
                for f in files:
                    f.write(f"{i}\n".encode())
                if i % 10 == 0:
                    time.sleep(0.01)

    async def main():
        async with Tailer(batch_window=0.03) as tailer:
            for i, path in enumerate(paths):
                tailer.add(i, path)
            thread = threading.Thread(target=writer)
            thread.start()
            count, lines = 0, 0
            while lines < 16 * per_file:
                lines += len((await tailer.next_batch()).lines)
                count += 1
            thread.join()
            return count, lines

    count, lines = run(main())
    assert lines == 16 * per_file and count <= 60, (count, lines)


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.text(alphabet=st.sampled_from("ab\ré€"), max_size=60), min_size=1, max_size=8),
    crlf=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
)
def test_any_chunking_gives_the_same_lines(lines, crlf, cuts):
    """Write a stream in arbitrary chunks (poll after each); the pieces always rebuild the lines."""
    data = "".join(x + ("\r\n" if crlf else "\n") for x in lines).encode()
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r.log"
        path.write_bytes(b"")
        follower = FileFollower("r", path, max_line_bytes=16)
        got: list[Line] = []
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            append(path, data[lo:hi])
            got += follower.poll()
        follower.flush(got)
        follower.close()
    rebuilt, current = [], ""
    for line in got:
        current += line.text
        if not line.cut:
            rebuilt.append(current)
            current = ""
    # Trailing "\r" are compared loosely: one before "\n" is stripped, unless a cut already delivered it.
    assert current == "" and [x.rstrip("\r") for x in rebuilt] == [x.rstrip("\r") for x in lines]
    assert [x.seq for x in got] == list(range(len(got)))
    assert all(len(x.text.encode()) <= 16 for x in got)


def test_lossless_never_drops_a_line_for_a_slow_consumer_and_says_how_far_behind_it_is(tmp_path):
    """The CLI's mode: a source whose buffer is full is not read on; the file keeps the backlog."""
    path = tmp_path / "rank-0.log"
    path.write_bytes(b"".join(b"line %06d %s\n" % (i, b"x" * 60) for i in range(20_000)))  # ~1.4 MB

    async def slow_reader():
        tailer = Tailer(lossless=True, max_buffered_lines_per_source=500, max_read_bytes=64 * 1024)
        tailer.add("r0", path)
        got, behind, dropped, sizes = [], [], 0, []
        async for batch in tailer:
            got.extend(batch.lines)
            sizes.append(len(batch.lines))
            behind.append(batch.behind_bytes)
            dropped += sum(batch.dropped.values())
            await asyncio.sleep(0.002)  # a slow terminal
            if len(got) >= 20_000:
                tailer.stop()
        return got, behind, dropped, sizes

    got, behind, dropped, sizes = run(slow_reader())
    assert dropped == 0 and [line.seq for line in got] == list(range(20_000))
    assert max(behind) > 500_000 and behind[-1] == 0  # it was far behind, and then caught up
    assert max(sizes) <= 500 + 64 * 1024 // 70 + 1  # memory stays bounded: a full buffer plus one read


def test_the_default_live_view_drops_the_oldest_lines_when_its_consumer_falls_behind(tmp_path):
    path = tmp_path / "rank-0.log"
    path.write_bytes(b"".join(b"line %06d\n" % i for i in range(20_000)))

    async def reader():
        tailer = Tailer(max_buffered_lines_per_source=500, max_read_bytes=1 << 20)
        tailer.add("r0", path)
        batch = await tailer.next_batch()
        await tailer.aclose()
        return batch

    batch = run(reader())
    assert len(batch.lines) == 500 and batch.dropped == {"r0": 19_500} and batch.lines[-1].seq == 19_999


def test_a_history_comes_in_batches_of_max_batch_lines_each_line_once(tmp_path):
    """max_batch_lines (a live view's catch-up of 4,096 ranks' history, issue 32): no batch holds much more than
    that many lines (one file's read beyond it at most), and every line of every file comes once, in order."""
    files = 64
    for k in range(files):
        (tmp_path / f"r{k}.log").write_text("".join(f"{k} {i}\n" for i in range(500)))

    async def main() -> list[Batch]:
        tailer = Tailer(max_batch_lines=1000, notify=False)
        for k in range(files):
            tailer.add(k, tmp_path / f"r{k}.log")
        batches: list[Batch] = []
        deadline = time.monotonic() + 20
        while sum(len(b.lines) for b in batches) < files * 500 and time.monotonic() < deadline:
            batches.append(await asyncio.wait_for(tailer.next_batch(), 10))
        await tailer.aclose()
        return batches

    batches = run(main(), timeout=30)
    assert max(len(b.lines) for b in batches) <= 1000 + 500 and len(batches) >= files * 500 // 1500
    by_source: dict[int, list[str]] = {}
    for b in batches:
        for line in b.lines:
            by_source.setdefault(line.source, []).append(line.text)
    assert by_source == {k: [f"{k} {i}" for i in range(500)] for k in range(files)}
    assert not any(b.dropped for b in batches)
