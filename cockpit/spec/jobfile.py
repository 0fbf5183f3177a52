"""Reading a job file from disk, bounded: what `cockpit validate/render/run` and the TUI open.

A job file is a few hundred bytes of settings. Whatever path is given — a 50 MB log by mistake, a FIFO, a
device, a symlink loop — reading it must end at once with a clear problem, never block or fill memory.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from cockpit.spec.yamlpos import LoadError, Problem

MAX_BYTES = 1 << 20  # 1 MiB; a job file is a few hundred bytes, and 1 MiB of YAML parses well under a second


def read_text(path: str | Path) -> str:
    """The text of a job file: a regular file of at most MAX_BYTES of UTF-8.

    Opened without blocking, so a FIFO or a device is refused instead of waited on; read with a cap, so a
    file that is huge (or grows while read) costs no more than the cap. Raises OSError when it cannot be
    opened (missing, a symlink loop, no permission; IsADirectoryError for a directory), else LoadError.
    """
    name = str(path)
    if name.endswith((".py", ".sh")):  # the torchrun / sbatch habit: `cockpit run train.py`
        kind = "Python script" if name.endswith(".py") else "shell script"
        raise LoadError([Problem(0, 0, "", f"a {kind}, not a job file",
                                 f"cockpit takes a job file (YAML) that names the script: `name: NAME` and "
                                 f"`script: {Path(name).name}` (start from jobs/demo.yaml)")])
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
        if not stat.S_ISREG(st.st_mode):
            raise LoadError([Problem(0, 0, "", "not a regular file (a pipe, device or socket)",
                                     "give the path of a .yaml file")])
        if st.st_size > MAX_BYTES:
            raise LoadError([too_large(st.st_size)])
        chunks, size = [], 0
        while size <= MAX_BYTES and (chunk := os.read(fd, MAX_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > MAX_BYTES:
        raise LoadError([too_large(max(size, st.st_size))])
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LoadError([Problem(0, 0, "", f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                                 "save the file as UTF-8")]) from None


def too_large(size: int) -> Problem:
    """The problem of a job file (or job text) over MAX_BYTES."""
    return Problem(0, 0, "", f"{size} bytes is too large for a job file (at most {MAX_BYTES})",
                   "a job file holds settings, not data; is this the right file?")
