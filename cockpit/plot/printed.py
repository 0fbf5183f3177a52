"""Metrics from a rank's printed progress lines: what a plain script, a Hugging Face Trainer or a hand-written loop
prints, read back from its log by cockpit.plot.sources. Pure: one line of text in, a typed reading out; no IO.

The forms read::

    step 10 loss=2.31 lr=0.001                              key=value pairs
    rank 0 epoch 1 step 16 loss 0.1234                      "loss N" beside "step N" (only with a step)
    Epoch 1 | step 20 | loss: 1.92                          key: value pairs, "step N"
    {'loss': 0.53, 'learning_rate': 4e-05, 'epoch': 0.5}    a printed dict (Hugging Face Trainer's log)

Strict on purpose, so that ordinary output invents nothing: a line counts only when it holds a *training loss*
(``loss``, ``train_loss``, ``train/loss``, ... as a number after ``=`` or ``:``, or after a space on a line that
also names its step: ``loss 0.5`` alone is prose). NCCL's ``cudaDev 0 busId 1000``,
torchrun's ``exitcode : 1 (pid: 1234)``, a printed config dict, an evaluation dict (``eval_loss`` only) and the
Trainer's closing summary (``train_runtime``) yield nothing. A progress bar's frame (``50%|█████ |``) is skipped:
its refresh is not a step. The step is the line's ``step`` / ``global_step`` / ``it`` / ``iter`` /
``iteration`` when it has one; otherwise the caller counts the lines that counted.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

MAX_LINE = 4096  # a progress line is short; a longer one (a dumped tensor, a base64 blob) is not read
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"
# key=value or key: value; the key starts a word (not "x.loss" inside a path), the value ends one
_PAIR = re.compile(rf"(?<![\w./-])([A-Za-z_][\w./-]*)\s*(?:=|:)\s*({_NUMBER})(?![\w.:])", re.IGNORECASE)
_STEP_WORDS = ("step", "global_step", "it", "iter", "iteration")
# "step 20", "global_step=20", "it: 20", also "step 20/100"; not "12.3it/s" (a word character before "it")
_STEP = re.compile(r"(?<![\w.])(step|global_step|it|iter|iteration)\b\s*[=:]?\s*(\d+)(?![\w.:])", re.IGNORECASE)
# "loss 0.1234" with no = or :, read only on a line that names its step ("step 16 loss 0.1234")
_SPACED_LOSS = re.compile(rf"(?<![\w./-])(loss|train_loss|training_loss)\s+({_NUMBER})(?![\w.:])", re.IGNORECASE)
_BAR = re.compile(r"\d+%\|")  # a tqdm frame
# the training loss under the names frameworks and scripts give it, most specific first
LOSS_KEYS = ("loss", "train_loss", "train/loss", "loss/train", "train.loss", "training_loss", "train_loss_step",
             "trn_loss")
_SUMMARY_KEYS = ("train_runtime",)  # Hugging Face's closing dict: the mean loss of the whole run, not a step


@dataclass(frozen=True)
class Reading:
    """What one line says: its training ``loss`` (finite or not: a diverged run prints nan), its ``step`` (None:
    the line has none; the caller counts lines), and every numeric pair it holds (``values``, by lower-case key)."""

    loss: float
    step: int | None
    values: tuple[tuple[str, float], ...]


def read_line(line: str) -> Reading | None:
    """The reading of one printed line, or None when it is not a progress line (see the module's docstring)."""
    text = line.strip()
    if not text or len(text) > MAX_LINE or ("%|" in text and _BAR.search(text)):
        return None
    values = _dict_values(text) if text.startswith("{") and text.endswith("}") else _pair_values(text)
    if any(k in values for k in _SUMMARY_KEYS):
        return None
    loss = next((values[k] for k in LOSS_KEYS if k in values), None)
    if loss is None:
        return _spaced(text)
    return Reading(loss, _step(text, values), tuple(values.items()))


def readings(text: str) -> list[Reading]:
    """The readings of one log line as its file holds it: a progress bar's frames (``\\r`` updates) each on its
    own, a frame's refresh not being a step (read_line skips the bar itself, not a loss printed in a frame)."""
    return [r for segment in text.split("\r") if (r := read_line(segment)) is not None]


class StepCount:
    """The step each reading of one rank's log stands for, its lines read in order: the line's own step, else the
    count of the readings without one so far. Shared by the charts (cockpit.plot.sources) and the TUI's rank table,
    so both say the same step. ``counting`` False: the log is read from a cut, where that count is not known, and a
    reading without its own step stands for none."""

    def __init__(self, counting: bool = True):
        self.counted: int | None = 0 if counting else None

    def step(self, reading: Reading) -> int | None:
        if reading.step is not None:
            return reading.step
        if self.counted is None:
            return None
        self.counted += 1
        return self.counted


def _spaced(text: str) -> Reading | None:
    """A "step 16 loss 0.1234" line (the loss after a space): read only when the line names its step too."""
    found = _SPACED_LOSS.search(text) if "oss" in text else None
    if found is None or (step := _STEP.search(text)) is None:
        return None
    loss = float(found.group(2))
    return Reading(loss, int(step.group(2)), ((found.group(1).lower(), loss),))


def _pair_values(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in _PAIR.findall(text):
        out.setdefault(key.lower(), float(value))
    return out


def _dict_values(text: str) -> dict[str, float]:
    """A printed dict literal's numeric entries (strings and the rest left out); {} for anything else. A literal
    only: ``ast.literal_eval`` evaluates no code, and the line is at most MAX_LINE long."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return {}
    if not isinstance(value, dict):
        return {}
    return {k.lower(): float(v) for k, v in value.items()
            if isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)}


def _step(text: str, values: dict[str, float]) -> int | None:
    for word in _STEP_WORDS:
        v = values.get(word)
        if v is not None and math.isfinite(v) and v >= 0 and v == int(v):
            return int(v)
    found = _STEP.search(text)
    return int(found.group(2)) if found else None
