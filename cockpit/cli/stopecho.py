"""torchrun's own traceback when a stop reaches it, told in one line on a follower's screen.

A stop (Ctrl-C twice, `cockpit stop`, on_stall: stop) sends torchrun SIGTERM; torchrun raises SignalException out of
its monitor loop and prints ~30 lines of its own traceback (two chained ones on some versions) into the agent's
log, which `cockpit run` / `attach` / `logs -f` stream just before the summary. Once a stop was asked, an agent's
traceback is held back; if it ends in ``SignalException: Process N got signal: S`` it is shown as one line naming
the log that keeps it, and any other traceback is shown whole, as it came. The log files are never changed, and
the diagnosis reads them in full.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from cockpit.logs.filetail import Line

_SIGNAL = re.compile(r"SignalException: Process \d+ got signal: (\d+)\s*$")
_START = "Traceback (most recent call last):"
_CHAIN = ("", "During handling of the above exception, another exception occurred:",
          "The above exception was the direct cause of the following exception:")
HELD_MAX = 400  # lines: longer is no torchrun traceback of ours to fold (shown whole)


class StopEcho:
    """Per agent source, the traceback held since a stop was asked (see the module)."""

    def __init__(self) -> None:
        self.held: dict[object, list[Line]] = {}
        self.open: dict[object, bool] = {}  # a traceback of the held block has not ended yet
        self.signal: dict[object, str] = {}  # the signal its last SignalException named

    def filter(self, lines: list[Line], stopping: Callable[[], bool]) -> list[Line]:
        """``lines`` as they should be shown: an agent's traceback after a stop held, then folded or let out.
        ``stopping`` is asked only when an agent's traceback starts."""
        out: list[Line] = []
        for line in lines:
            source = line.source
            if not isinstance(source, tuple) or source[1:] != ("agent",):
                out.append(line)
            elif source in self.held:
                out.extend(self._more(source, line))
            elif line.text.startswith(_START) and stopping():
                self.held[source], self.open[source] = [line], True
            else:
                out.append(line)
        return out

    def flush(self) -> list[Line]:
        """What is still held, at the end of the following."""
        out: list[Line] = []
        for source in list(self.held):
            out.extend(self._release(source))
        return out

    def _more(self, source: object, line: Line) -> list[Line]:
        held, text = self.held[source], line.text.rstrip("\r")
        if self.open[source]:
            held.append(line)
            if (m := _SIGNAL.search(text)) is not None:
                self.open[source], self.signal[source] = False, m[1]
            elif len(held) > HELD_MAX:
                return self._release(source)
            return []
        if text.strip() in _CHAIN or text.startswith(_START):  # a chained traceback goes on
            held.append(line)
            self.open[source] = text.startswith(_START)
            return []
        return [*self._release(source), line]

    def _release(self, source: object) -> list[Line]:
        held, opened = self.held.pop(source), self.open.pop(source)
        signal = self.signal.pop(source, None)
        if signal is None or opened:
            return held  # not (only) torchrun's answer to the stop: every line, as it came
        host = source[0] if isinstance(source, tuple) else "?"
        words = (f"torchrun got signal {signal} from the stop and ended its workers ({len(held)} lines of its "
                 f"traceback in logs/agent.{host}.log)")
        return [held[-1]._replace(text=words)]
