"""The terminal UI: a face over cockpit's core (fleet, spec/render, launch, runs, logs). The ONLY package that
imports textual; it never imports torch. All IO runs in workers; the pure models it renders (models/: the form,
the fleet table, the log store and filter, the feeds) import no textual, so they are tested on their own; screens/
and widgets/ draw them. Entry point: ``app.run_tui``, after ``before_textual()``."""

import os

MAX_FPS = 240


def before_textual() -> None:
    """Settings textual reads once, when it is imported: call before importing cockpit.tui.app.

    TEXTUAL_FPS: textual draws at most MAX_FPS screen updates a second (its default is 60). With a log
    repainting ten times a second, a key press then waited one or two 16 ms frames for its own change to be
    drawn (bench_tui, 64 ranks x 1,000 lines/s on 2 cores: key p90 25 ms, p99 46 ms at 60; 8 ms and 16 ms at
    240, the same CPU). The run view throttles its own repaints (APPLY_EVERY), so the cap only decides how
    soon a change is drawn. A TEXTUAL_FPS the user set wins."""
    os.environ.setdefault("TEXTUAL_FPS", str(MAX_FPS))
