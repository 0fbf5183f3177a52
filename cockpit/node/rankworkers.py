"""The rank hook's companion for the processes a rank forks (DataLoader workers). Installed as
``<run>/hook/cockpit_rankworkers.py`` beside the hook (cockpit.node.rankhook), which imports it. Stdlib only.

A rank that waits at ``for batch in loader`` is waiting for a worker; where the worker is (a Dataset's
``__getitem__``, the ``open`` in it) is in the worker's stack, not the rank's. So:

- in a forked child, SIGURG makes faulthandler dump the child's threads into a file of its own that lives in
  memory (memfd: nothing on disk, nothing left to clean up, gone with the process). A SIGURG that reaches the
  child from elsewhere (Slurm signals every process of a step) is harmless: it writes there and nowhere else;
- when the rank answers a stacks request, its hook thread finds its children (/proc), signals them all, reads
  each one's new dump through /proc/PID/fd, and writes them, with each child's process state, kernel wait
  channel and the source lines of its frames, to ``logs/rank-R.HOST.workers`` (JSON, the request's number in
  it) before the beat that says the request was answered. A child blocked in the kernel (state D: a hung
  file system) runs no signal handler: its state and wait channel are then the evidence.
"""

import os

MEMFD_NAME = "cockpit-stacks"
LINK = f"/memfd:{MEMFD_NAME} (deleted)"
MAX_CHILDREN = 64
WAIT_SECONDS = 1.0
POLL_SECONDS = 0.01
MAX_LINES = 40
_LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen ")  # as cockpit.hang.stacks has it
_kept: list = []  # this process's dump file, open for faulthandler (a child of a child closes its parent's)


def in_child() -> None:
    """After fork, in the child: SIGURG dumps this process's threads into its own in-memory file."""
    import faulthandler
    import signal

    for f in _kept:
        f.close()
    _kept.clear()
    try:
        fd = os.memfd_create(MEMFD_NAME)  # close-on-exec: a child that execs another program drops it
    except (AttributeError, OSError):
        return  # not Linux, or no memfd: the child gives no stack
    f = os.fdopen(fd, "w")
    _kept.append(f)
    faulthandler.register(signal.SIGURG, file=f, all_threads=True, chain=False)


def dump_children(pid: int, request: str, path: str) -> None:
    """Ask every descendant of ``pid`` for its stack; write what came to ``path`` (nothing without children)."""
    import json
    import signal
    import time

    children = descendants(pid)
    if not children:
        return
    asked = {}
    for child in children:
        link = _memfd(child)
        size = _size(link)
        if link is None or size is None:
            continue
        asked[child] = (link, size)
        try:
            os.kill(child, signal.SIGURG)
        except OSError:
            asked.pop(child)
    texts = _read_dumps(asked, time.monotonic() + WAIT_SECONDS)
    records = [{"pid": child, "state": _state(child), "wchan": _wchan(child), "text": texts.get(child, ""),
                "lines": _source_lines(texts.get(child, ""))} for child in children]
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps({"req": request, "workers": records}))
    os.replace(tmp, path)


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (children first), at most MAX_CHILDREN, from /proc's children lists."""
    found: list[int] = []
    queue = [pid]
    while queue and len(found) < MAX_CHILDREN:
        parent = queue.pop(0)
        try:
            tids = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except (OSError, ValueError):
                continue
            for kid in kids:
                if kid not in found and len(found) < MAX_CHILDREN:
                    found.append(kid)
                    queue.append(kid)
    return found


def _memfd(pid: int):
    """The /proc path of ``pid``'s dump file (None: it has none, or /proc does not let us see it)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        path = f"/proc/{pid}/fd/{fd}"
        try:
            if os.readlink(path) == LINK:
                return path
        except OSError:
            continue
    return None


def _size(path):
    try:
        return os.stat(path).st_size if path else None
    except OSError:
        return None


def _read_dumps(asked: dict, deadline: float) -> dict:
    """Each child's new text once it has grown and stood still for a poll, or what there is at ``deadline``."""
    import time

    last = {child: start for child, (_, start) in asked.items()}
    done: set = set()
    while len(done) < len(asked) and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        for child, (link, start) in asked.items():
            size = _size(link)
            if size is not None and size > start and size == last[child]:
                done.add(child)
            last[child] = size if size is not None else last[child]
    texts = {}
    for child, (link, start) in asked.items():
        try:
            with open(link, encoding="utf-8", errors="replace") as f:
                f.seek(start)
                texts[child] = f.read(200_000)
        except OSError:
            continue
    return texts


def _state(pid: int):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return stat[stat.rfind(")") + 2:][:1] or None
    except OSError:
        return None


def _wchan(pid: int):
    try:
        with open(f"/proc/{pid}/wchan") as f:
            text = f.read().strip()
    except OSError:
        return None
    return text if text and text != "0" else None


def _source_lines(text: str) -> dict:
    """"path:line" -> the line's source, for the frames of a dump (read here, on the rank's node)."""
    import linecache
    import re

    out = {}
    for path, line in re.findall(r'^\s+File "(.*)", line (\d+) in ', text, re.M)[:MAX_LINES]:
        if any(part in path for part in _LIBRARY):
            continue  # the job's own frames only: those are the ones a finding quotes
        source = linecache.getline(path, int(line)).strip()
        if source:
            out[f"{path}:{line}"] = source[:200]
    return out
