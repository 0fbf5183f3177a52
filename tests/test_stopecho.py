"""cockpit.cli.stopecho: torchrun's traceback after a stop (a recorded one: tests/fixtures/torchrun) is one line on
a follower's screen; every other line, and any other traceback, as it came."""

from __future__ import annotations

from helpers import REPO

from cockpit.cli.stopecho import HELD_MAX, StopEcho
from cockpit.logs.filetail import Line

AGENT = ("vm", "agent")
RECORDED = (REPO / "tests" / "fixtures" / "torchrun" / "sigterm-agent.log").read_text().splitlines()


def lines(texts: list[str], source=AGENT, start: int = 0) -> list[Line]:
    return [Line(source, t, start + i, 0, 0.0, False) for i, t in enumerate(texts)]


def texts(got: list[Line]) -> list[str]:
    return [x.text for x in got]


def test_after_a_stop_torchruns_signal_traceback_is_one_line_and_the_rest_is_kept():
    at = RECORDED.index("Traceback (most recent call last):")
    rank = lines(["[demo] step 131"], ("vm", 0))
    echo = StopEcho()
    shown = echo.filter(lines(RECORDED[:at + 5]) + rank, lambda: True)  # the traceback comes in two batches
    assert texts(shown) == RECORDED[:at] + ["[demo] step 131"]
    shown = echo.filter(lines(RECORDED[at + 5:], start=at + 5), lambda: True) + echo.flush()
    assert texts(shown) == ["torchrun got signal 15 from the stop and ended its workers "
                            f"({len(RECORDED) - at} lines of its traceback in logs/agent.vm.log)"]
    assert echo.flush() == [] and not echo.held


def test_without_a_stop_every_line_is_shown_and_the_stop_is_asked_only_at_a_traceback():
    asked = []
    got = StopEcho().filter(lines(RECORDED), lambda: asked.append(1) or False)
    assert texts(got) == RECORDED and len(asked) == 1


def test_another_traceback_after_a_stop_is_shown_whole():
    other = ["Traceback (most recent call last):", '  File "x.py", line 1, in <module>',
             "RuntimeError: the store went away", "W1128 after"]
    echo = StopEcho()
    assert texts(echo.filter(lines(other), lambda: True) + echo.flush()) == other
    cut = StopEcho()  # ends without a last line: held, then let out whole at the end
    assert cut.filter(lines(other[:3]), lambda: True) == [] and texts(cut.flush()) == other[:3]
    long = ["Traceback (most recent call last):"] + ["  x"] * (HELD_MAX + 5)
    assert len(StopEcho().filter(lines(long), lambda: True)) == len(long)  # no torchrun traceback is that long


def test_a_chained_signal_traceback_is_one_line_and_the_next_line_follows():
    at = RECORDED.index("Traceback (most recent call last):")
    block = RECORDED[at:]
    chained = block + ["", "During handling of the above exception, another exception occurred:", ""] + block
    echo = StopEcho()
    got = echo.filter(lines(chained + ["W1128 the agent's next line"]), lambda: True)
    assert texts(got) == [f"torchrun got signal 15 from the stop and ended its workers ({len(chained)} lines of its "
                          "traceback in logs/agent.vm.log)", "W1128 the agent's next line"]
