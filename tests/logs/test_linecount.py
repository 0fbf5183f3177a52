"""``linecount.newlines`` is ``bytes.count(b"\\n", start, stop)`` on every stretch, short and long."""

from __future__ import annotations

import random

from cockpit.logs.parse.linecount import SHORT, newlines


def test_newlines_counts_what_bytes_count_counts_on_short_and_long_stretches():
    rng = random.Random(7)
    data = b"".join(rng.choice([b"\n", b"x" * rng.randrange(0, 300), b"\r\n", b"\xff\n", b""]) for _ in range(4000))
    assert len(data) > 20 * SHORT
    cases = [(0, None), (0, len(data)), (len(data), None), (5, 5), (9, 3)]
    cases += [(a, a + n) for a in (0, 1, 777) for n in (0, 1, SHORT - 1, SHORT, SHORT + 1, 5 * SHORT)]
    cases += [(a, None) for a in (0, 3, len(data) - SHORT, len(data) - 1)]
    for start, stop in cases:
        assert newlines(data, start, stop) == data.count(b"\n", start, stop), (start, stop)
    assert newlines(b"") == 0
    assert newlines(b"\n" * (3 * SHORT)) == 3 * SHORT
