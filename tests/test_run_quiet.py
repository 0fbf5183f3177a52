"""`cockpit run -q` as `srun --quiet` users expect: no rank lines; what cockpit itself has to say stays (the start
line, the notes of a failure or a stall as they are found, the summary, the diagnosis), and the exit code is the
job's. Real local runs of jobs/demo.yaml (torch, gloo on CPU)."""

from __future__ import annotations

import subprocess
import sys

from helpers import REPO, cockpit_env

SHORT = ("--", "--epochs", "1", "--steps-per-epoch", "8")


def cockpit(runs, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=300, env=cockpit_env(NO_COLOR="1", COCKPIT_RUNS_DIR=str(runs)))


def test_quiet_success_has_no_rank_line_and_its_summary(tmp_path):
    r = cockpit(tmp_path, "run", "jobs/demo.yaml", "-q", *SHORT)
    assert r.returncode == 0, r.stdout + r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("== demo (demo-") and "succeeded in " in first and "exit code 0" in first, r.stdout
    assert not [line for line in r.stdout.splitlines() if line.startswith("[")], r.stdout  # no [host:rank] line
    assert "started (supervisor pid" in r.stderr


# A quiet failure (summary first, notes as they happen, the job's exit code): test_runs_e2e's
# test_raising_rank_is_named_with_its_traceback_and_nothing_is_left checks it on its -q run.


# A quiet healed run keeping its whole summary: test_heal_local's
# test_a_raise_is_healed_from_the_last_checkpoint_and_accounted runs jobs/demo-heal.yaml -q and checks it.


# What the demo's failing run wrote, as the tail engine hands it over: rank 1's traceback (its exception line is
# its last line, and long enough to be held for a hard wrap), rank 0's lost peer, then torchrun's reaction.
RANK1 = ["[demo] rank 1: injecting failure 'raise' after step 5 (attempt 0)",
         "[rank1]: Traceback (most recent call last):", '[rank1]:   File "/w/demo.py", line 79, in maybe_fail',
         "[rank1]:     raise RuntimeError(msg)",
         "[rank1]: RuntimeError: injected failure on rank 1 after step 5 (--fail-mode raise)"]
RANK0 = ["[rank0]: Traceback (most recent call last):", '[rank0]:   File "/w/demo.py", line 105, in train',
         "[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection "
         "closed by peer [127.0.0.1]:54703. This is typically caused by a remote worker crashing."]
AGENT = ["W1128 05:18:39.654000 25297 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 25348 "
         "closing signal SIGTERM"]


def test_the_failing_ranks_own_exception_is_a_live_note_before_its_consequences(tmp_path, capsys):
    """On a fresh clone `run -q` of the failing demo noted only torchrun's `worker_failed` (its SIGTERM to the
    other rank) and rank 0's lost peer: rank 1's own RuntimeError, the cause, was held by the parser as a line a
    hard wrap might continue, and a plain exception was no note (issue 33's new-user pass)."""
    from cockpit.cli.console import Painter
    from cockpit.cli.notices import LiveFindings
    from cockpit.logs.filetail import Line

    def batch(source, texts):
        return [Line(source, text, i, 0, 0.0) for i, text in enumerate(texts)]

    live = LiveFindings(Painter(False), tmp_path)
    live.feed_batch(batch(("vm", 1), RANK1))
    live.feed_batch(batch(("vm", 0), RANK0))
    live.feed_batch(batch(("vm", "agent"), AGENT))
    live.feed_batch([])  # a batch from nobody: everyone went quiet
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("cockpit: [")]
    assert notes[0] == ("cockpit: [vm:1] exception: [rank1]: RuntimeError: injected failure on rank 1 after "
                        "step 5 (--fail-mode raise)"), notes
    # then the consequences, as before: rank 0's lost peer (not a python_exception of its own) and torchrun's
    # in words, not kind codes; torch's glog stamp left to the file
    assert [note.split(": ")[1] for note in notes[1:]] == ["[vm:0] Gloo error",
                                                           "[vm:agent] torchrun stopped the workers"], notes
    assert notes[2].split(": ", 2)[2].startswith("Sending process"), notes
    (tmp_path / "stop.json").write_text("{}")  # once a stop was asked for, an exception is that stop's echo
    stopping = LiveFindings(Painter(False), tmp_path)
    stopping.feed_batch(batch(("vm", 1), RANK1))
    stopping.feed_batch(batch(("vm", 0), []))
    assert "cockpit: [" not in capsys.readouterr().err


def test_a_long_note_is_cut_with_an_ellipsis(tmp_path, capsys):
    """The README's `run -q` showed rank 0's Gloo error ending mid-word ("caused by a remote worker hangin"):
    a note's text cut at NOTE_TEXT ends in "…"; a shorter one is whole."""
    from cockpit.cli.console import Painter
    from cockpit.cli.notices import NOTE_TEXT, LiveFindings
    from cockpit.logs.filetail import Line

    long = RANK0[2] + " Or the worker hanging, or a network partition; see the other ranks' logs for why." * 2
    live = LiveFindings(Painter(False), tmp_path)
    live.feed_batch([Line(("vm", 0), text, i, 0, 0.0) for i, text in enumerate([*RANK0[:2], long])])
    live.feed_batch([])
    [note] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("cockpit: [")]
    text = note.split("Gloo error: ", 1)[1]
    assert len(text) == NOTE_TEXT and text.endswith("…") and long.startswith(text[:-1]), note
