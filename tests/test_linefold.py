"""cockpit.cli.linefold: identical lines of many ranks shown once, "[ranks 0-4095] step 100 ...", nothing lost and
each rank's lines in order. Fed by hand (no event loop: ``flush`` shows what is held)."""

from __future__ import annotations

import re
from types import SimpleNamespace

from cockpit.cli.console import Painter
from cockpit.cli.linefold import LineFold, folded_states, line_fold
from cockpit.logs.filetail import Line

PREFIX = Painter(False).prefix


def lines(ranks, text, per_host: int = 8, cut: bool = False) -> list[Line]:
    return [Line((f"n{r // per_host:03d}", r), text.format(r=r), 0, 0, 0.0, cut) for r in ranks]


def shown(out: str) -> list[tuple[list[int], str]]:
    """Each printed line as (the ranks its label names, its text)."""
    got = []
    for line in out.splitlines():
        label, text = re.match(r"^\[([^\]]*)\] (.*)$", line).groups()
        if label.startswith("ranks "):
            ranks = []
            for part in label[6:].split(","):
                lo, _, hi = part.partition("-")
                ranks += range(int(lo), int(hi or lo) + 1)
        else:
            ranks = [int(label.split(":")[1])]
        got.append((ranks, text))
    return got


def test_4096_ranks_writing_the_same_line_are_one_line_and_a_rank_that_differs_stands_alone():
    fold = LineFold(PREFIX, print, hold=1e9, expect=4096)
    out = fold.feed(lines(range(0, 2048), "step 100 loss 0.52"))
    rest = [r for r in range(2048, 4096) if r != 3073]
    out += fold.feed(lines([3073], "step 99 loss 0.61") + lines(rest, "step 100 loss 0.52"))
    out += fold.flush()
    assert "[ranks 0-4095]" not in out  # rank 3073 wrote another line: it is not among them
    assert out.splitlines() == ["[ranks 0-3072,3074-4095] step 100 loss 0.52", "[n384:3073] step 99 loss 0.61"]


def test_a_group_of_every_rank_is_shown_at_once_without_waiting():
    fold = LineFold(PREFIX, print, hold=1e9, expect=16)
    assert fold.feed(lines(range(8), "epoch 1")) == ""
    assert fold.feed(lines(range(8, 16), "epoch 1")) == "[ranks 0-15] epoch 1\n"


def test_every_line_is_shown_once_and_each_rank_keeps_its_order():
    fold = LineFold(PREFIX, print, hold=1e9)
    out = fold.feed(lines(range(4), "a") + lines([0], "b") + lines([1], "b"))
    out += fold.feed(lines([2], "b") + lines([2], "a") + lines([3], "b"))  # rank 2: a, b, a
    out += fold.feed(lines([5], "x", cut=True) + lines([6], "x", cut=True))  # pieces of a long line: never folded
    out += fold.flush()
    got = shown(out)
    per_rank: dict[int, list[str]] = {}
    for ranks, text in got:
        for r in ranks:
            per_rank.setdefault(r, []).append(text)
    assert per_rank == {0: ["a", "b"], 1: ["a", "b"], 2: ["a", "b", "a"], 3: ["a", "b"], 5: ["x"], 6: ["x"]}
    assert got[:2] == [([0, 1, 2, 3], "a"), ([0, 1, 2, 3], "b")]


def test_a_label_of_scattered_ranks_is_their_number_and_fewer_ranks_or_no_fold_mean_no_fold(tmp_path):
    fold = LineFold(PREFIX, print, hold=1e9)
    out = fold.feed(lines(range(0, 4096, 2), "same")) + fold.flush()
    assert out == "[2,048 ranks] same\n"
    args = SimpleNamespace(no_fold=False, quiet=False, rank=None, host=None)
    assert line_fold(tmp_path, args, PREFIX, print) is None  # no status.json: no world size


def test_the_ctrl_c_report_of_many_ranks_says_each_state_once_with_its_ranks():
    many = {"step 100": [r for r in range(4096) if r != 3073], "step 99": [3073]}
    assert folded_states(many, 4096) == "3073: step 99; 0-3072,3074-4095: step 100"
    assert folded_states({"step 5": [0, 2], "step 4": [1]}, 3) == "0: step 5, 1: step 4, 2: step 5"  # a few: each
