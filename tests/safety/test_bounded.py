"""Unbounded reads (issue 27, 5): a real 2 GiB sparse log, a 512 MB line without a newline, a 100 MB tqdm-style
log. Here: what the readers give back (streamed in full, the last lines from the end, a cut line's head and tail
with a marker, the line numbers kept); their memory and time are tests/bench/bench_safety.py's. And the three
bounded readers against the plain ones on random input cut at random places."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest
from safety.hostile import cockpit, make_run, rank_file

from cockpit.logs.bounded import LINE_CAP, capped_blocks, marker, printable, tail
from cockpit.logs.diagnose.report import read_lines

GIB = 1 << 30
RUN = "big-20260101-000000-aaaa"


def test_a_2_gib_sparse_log_streams_in_full_and_its_tail_is_read_from_the_end(tmp_path):
    """Every byte comes out, the NUL run (no newline for 2 GiB) in pieces of at most 1 MiB, each a line."""
    runs = tmp_path / "runs"
    run = make_run(runs, RUN)
    log = rank_file(run, "log")
    with open(log, "wb") as f:
        f.write(b"first line\n")
        f.truncate(2 * GIB)
        f.seek(0, 2)
        f.write(b"\nthe last line\n")
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "logs", RUN, "--rank", "0"], stdout=subprocess.PIPE,
                            env={"PATH": "/usr/bin:/bin", "COCKPIT_RUNS_DIR": str(runs), "PYTHONPATH": sys.path[0]})
    first, newlines, other, longest, run_len = b"", 0, 0, 0, 0
    while chunk := proc.stdout.read(1 << 20):
        first = first or chunk[:11]
        newlines += chunk.count(b"\n")
        other += len(chunk) - chunk.count(b"\n")
        for i, segment in enumerate(chunk.split(b"\n")):
            run_len = run_len + len(segment) if i == 0 else len(segment)
            longest = max(longest, run_len)
    assert proc.wait(60) == 0
    assert first == b"first line\n" and other == log.stat().st_size - 3 and longest <= 1 << 20
    assert newlines >= 3 + (2 * GIB) // (1 << 20) - 1  # the NUL run came in pieces
    last = cockpit("logs", RUN, "--rank", "0", "-n", "1", runs=runs)
    assert last.returncode == 0 and last.stdout == "the last line\n", last.stderr


def test_a_512_mb_line_without_a_newline(tmp_path):
    runs = tmp_path / "runs"
    run = make_run(runs, RUN)
    log = rank_file(run, "log")
    with open(log, "wb") as f:
        f.write(b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n" + b"x" * (512 << 20))
    last = cockpit("logs", RUN, "--rank", "0", "-n", "2", runs=runs)
    lines = last.stdout.splitlines()
    assert last.returncode == 0 and len(lines) == 1, last.stderr  # the line before is past the cap read
    assert lines[0] == "…" + "x" * LINE_CAP
    diagnose = cockpit("diagnose", RUN, runs=runs)
    assert diagnose.returncode == 1 and "out of memory" in diagnose.stdout, diagnose.stdout + diagnose.stderr


def test_a_100_mb_tqdm_log_and_the_error_after_it(tmp_path):
    runs = tmp_path / "runs"
    run = make_run(runs, RUN)
    frame = b"\r 45%|####      | 450/1000 [00:01<00:02, 300.12it/s]"
    with open(rank_file(run, "log"), "wb") as f:
        f.write(b"[rank0] start\n" + frame * ((100 << 20) // len(frame)))
        f.write(b"\nTraceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
                b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    diagnose = cockpit("diagnose", RUN, "--json", runs=runs)
    assert diagnose.returncode == 1, diagnose.stderr
    assert "OutOfMemoryError" in diagnose.stdout and '"line": 5' in diagnose.stdout  # line numbers kept
    last = cockpit("logs", RUN, "--rank", "0", "-n", "3", runs=runs)
    assert last.stdout.splitlines()[0] == 'Traceback (most recent call last):', last.stdout[:300]


def chunked(data: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(0, 12)))) if len(data) > 1 else []
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def random_log(rng: random.Random, cap: int) -> bytes:
    parts = []
    for _ in range(rng.randint(0, 30)):
        size = rng.choice([0, 1, 5, cap // 2, cap // 2 + 1, cap - 1, cap, cap + 1, 3 * cap])
        body = bytes(rng.choice(b"ab\r\x00\xe2\x96\x88") for _ in range(size))
        parts.append(body + rng.choice([b"\n", b"\r\n", b"\r", b""]))
    return b"".join(parts)


@pytest.mark.parametrize("seed", range(40))
def test_capped_blocks_keeps_short_lines_and_cuts_long_ones_to_head_and_tail(seed):
    rng = random.Random(seed)
    cap = rng.choice([16, 40, 64])
    data = random_log(rng, cap)
    got = b"".join(capped_blocks(chunked(data, rng), cap))
    expect = []
    for line in data.split(b"\n"):
        expect.append(line if len(line) <= cap else
                      line[:cap // 2] + marker(len(line) - 2 * (cap // 2)) + line[-(cap // 2):])
    assert got == b"\n".join(expect)


@pytest.mark.parametrize("seed", range(60))
def test_printable_and_tail_give_the_lines_splitlines_gives(seed, tmp_path):
    """What `cockpit logs` printed before (read_text().splitlines(), a line each), whatever the block size and
    wherever a \\r\\n or a UTF-8 character falls; with a prefix on every line."""
    rng = random.Random(seed)
    data = random_log(rng, 40)
    path = tmp_path / "log"
    path.write_bytes(data)
    lines = data.decode("utf-8", "replace").splitlines()
    for prefix in ("", "[node0:1] "):
        got = b"".join(printable(path, prefix, block=rng.randint(1, 64), piece=10_000))
        assert got == "".join(f"{prefix}{line}\n" for line in lines).encode()
    n = rng.randint(1, 8)
    assert tail(path, n, cap=10_000) == lines[-n:]


def test_printable_cuts_a_line_without_a_newline_into_pieces(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"a\n" + b"x" * 25 + b"\r" + b"y" * 3 + b"\xe2\x96\x88" * 10)
    pieces = b"".join(printable(path, block=7, piece=10)).decode().splitlines()
    assert pieces[0] == "a" and all(len(p.encode()) <= 10 for p in pieces)
    assert "".join(pieces[1:]) == "x" * 25 + "yyy" + "█" * 10  # nothing lost, cut after the \\r


def test_read_lines_cuts_a_line_over_the_cap(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"a\n" + b"y" * (LINE_CAP + 10) + b"\nz")
    lines = list(read_lines(path))
    half = LINE_CAP // 2
    assert lines == ["a", "y" * half + marker(10).decode() + "y" * half, "z"]
