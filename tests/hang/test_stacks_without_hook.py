"""cockpit.hang.stacks.without_hook: a faulthandler dump as the user reads it without cockpit — the hook's wrapper
frames and its beat thread out, every other line as it was (the parse of the raw dump is unchanged: it still
knows the hook's thread). The live run's case is in test_local_hangs (cockpit stacks, --raw)."""

from __future__ import annotations

from cockpit.hang.stacks import parse_dump, without_hook

DUMP = """\
(cockpit: the script handles SIGURG itself; these stacks come from cockpit's thread)
Thread 0x00007f3a1c5ff6c0 (most recent call first):
  File "/runs/r/hook/sitecustomize.py", line 221 in _beat_loop
  File "/usr/lib/python3.11/threading.py", line 982 in run
  File "/usr/lib/python3.11/threading.py", line 1045 in _bootstrap_inner
  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

Thread 0x00007f3a1d0006c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 324 in wait
  File "/work/train.py", line 20 in prefetch
  File "/usr/lib/python3.11/threading.py", line 982 in run
  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

Current thread 0x00007f3a2b1f2740 (most recent call first):
  File "/venv/site-packages/torch/distributed/distributed_c10d.py", line 2806 in all_reduce
  File "/venv/site-packages/torch/distributed/c10d_logger.py", line 81 in wrapper
  File "/runs/r/hook/sitecustomize.py", line 205 in timed
  File "/work/train.py", line 41 in step
  File "/work/train.py", line 60 in <module>
"""


def test_the_hooks_frames_and_thread_are_left_out_and_the_rest_kept():
    shown = without_hook(DUMP)
    assert "sitecustomize" not in shown and "_beat_loop" not in shown
    kept = [line for line in DUMP.splitlines(keepends=True) if "sitecustomize" not in line]
    beat = DUMP.index("Thread 0x00007f3a1c5ff6c0")
    beat_block = DUMP[beat:DUMP.index("Thread 0x00007f3a1d0006c0")]
    assert shown == "".join(kept).replace(beat_block.replace(
        '  File "/runs/r/hook/sitecustomize.py", line 221 in _beat_loop\n', ""), "")
    # what the user sees still reads as the same dump: same user frame, same collective, the other thread kept
    before, after = parse_dump(DUMP), parse_dump(shown)
    assert after.user_frame == before.user_frame and after.collective == before.collective == "all_reduce"
    assert len(after.threads) == 2 and "prefetch" in shown


def test_a_dump_without_the_hook_is_unchanged():
    plain = DUMP.replace("/runs/r/hook/sitecustomize.py", "/work/mine.py")
    assert without_hook(plain) == plain
