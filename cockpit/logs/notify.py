"""Which followed log files changed, from the kernel, so that quiet files cost nothing: Linux inotify through
ctypes on libc (inotify_init1, inotify_add_watch, read on its descriptor). Standard library only.

Why it is shaped so:

- One watch per DIRECTORY, not per file: a run's rank logs share a few directories, a file that does not
  exist yet is seen when it appears (IN_CREATE), a rotated or recreated one by its name (IN_MOVED_TO), and
  the kernel's per-user watch limit is spent once per run, not once per rank.
- Only file systems whose changes all pass through this kernel are watched (a list of local types, from
  statfs' f_type). On NFS, Lustre, GPFS, CIFS, FUSE, ... a rank on another node writes without this kernel
  seeing it, so those directories are left to polling (the caller polls what is not watched).
- Events are reduced to a set of names per directory; a queue overflow, or more bytes of events than are
  worth decoding in Python, says "everything" instead, and the caller then polls every file: under a log
  storm that costs one stat per file, less than decoding thousands of events.

Not thread-safe; use from one thread. Every failure (no Linux, no libc, the watch limit reached) makes
``Changes.open()`` or ``watch()`` answer None: the caller polls.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import struct
import sys
from dataclasses import dataclass, field

# <sys/inotify.h>
IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF = 0x400, 0x800
IN_Q_OVERFLOW, IN_IGNORED, IN_ONLYDIR = 0x4000, 0x8000, 0x01000000
IN_NONBLOCK, IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
DIR_MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
            | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
GONE = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED  # the watched directory itself went away or moved
EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of NUL-padded name

# statfs f_type of file systems that only this kernel writes (linux/magic.h): their changes all raise events
LOCAL_FS = frozenset({
    0xEF53,  # ext2/3/4
    0x58465342,  # xfs
    0x9123683E,  # btrfs
    0x01021994,  # tmpfs
    0x858458F6,  # ramfs
    0x794C7630,  # overlayfs (containers)
    0x2FC12FC1,  # zfs
    0xF2F52010,  # f2fs
    0x52654973,  # reiserfs
    0x3153464A,  # jfs
    0xCA451A4E,  # bcachefs
})
DECODE_BYTES = 64 * 1024  # more events than this at once: "everything changed" (see the module docstring)
READ_BYTES = 64 * 1024


@dataclass
class Changed:
    """What changed since the last read: names per watched directory, or ``everything``."""

    names: dict[str, set[str]] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)  # watched directories removed or moved: watch them again
    everything: bool = False


def fs_type(path: str) -> int | None:
    """statfs(path).f_type, or None where it cannot be asked (not Linux, no libc, an error)."""
    libc = _libc()
    if libc is None:
        return None
    buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on 64-bit Linux; f_type comes first
    if libc.statfs(os.fsencode(path), buf) != 0:
        return None
    return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF


class Changes:
    """An inotify descriptor with one watch per directory. ``fileno()`` is readable when events wait."""

    def __init__(self, fd: int, libc: ctypes.CDLL) -> None:
        self._fd, self._libc = fd, libc
        self._wd: dict[int, str] = {}  # watch descriptor -> directory
        self._dirs: dict[str, int] = {}

    @classmethod
    def open(cls) -> Changes | None:
        """A new descriptor, or None where inotify is not to be had."""
        libc = _libc()
        if libc is None:
            return None
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        return None if fd < 0 else cls(fd, libc)

    def fileno(self) -> int:
        return self._fd

    def watch(self, directory: str) -> bool:
        """Watch ``directory`` (again, after ``gone``). False: it is missing, not on a local file system, or
        the kernel refused (the per-user limit): poll its files."""
        if directory in self._dirs:
            return True
        kind = fs_type(directory)
        if kind is None or kind not in LOCAL_FS:
            return False
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(directory), DIR_MASK)
        if wd < 0:
            return False
        self._wd[wd], self._dirs[directory] = directory, wd
        return True

    def watching(self, directory: str) -> bool:
        return directory in self._dirs

    def read(self, decode_bytes: int = DECODE_BYTES) -> Changed:
        """Everything queued now (never blocks); more than ``decode_bytes`` of events: ``everything``."""
        changed = Changed()
        data = bytearray()
        while True:
            try:
                chunk = os.read(self._fd, READ_BYTES)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                changed.everything = True  # cannot tell what changed: the caller polls everything
                break
            if not chunk:
                break
            if len(data) + len(chunk) <= decode_bytes:
                data += chunk
            else:
                changed.everything = True
        if not changed.everything:
            self._decode(bytes(data), changed)
        return changed

    def _decode(self, data: bytes, changed: Changed) -> None:
        at = 0
        while at + EVENT.size <= len(data):
            wd, mask, _cookie, size = EVENT.unpack_from(data, at)
            name = data[at + EVENT.size:at + EVENT.size + size].rstrip(b"\0")
            at += EVENT.size + size
            if mask & IN_Q_OVERFLOW:
                changed.everything = True
                continue
            directory = self._wd.get(wd)
            if directory is None:
                continue
            if mask & GONE and not name:
                self._forget(wd)
                changed.gone.add(directory)
            else:
                changed.names.setdefault(directory, set()).add(os.fsdecode(name))

    def _forget(self, wd: int) -> None:
        directory = self._wd.pop(wd, None)
        if directory is not None:
            self._dirs.pop(directory, None)
            self._libc.inotify_rm_watch(self._fd, wd)  # already gone for IN_IGNORED: harmless EINVAL

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """libc with the inotify calls (the symbols the interpreter already links), loaded once; None off Linux or
    where it lacks them."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        for name, args in (("inotify_init1", [ctypes.c_int]),
                           ("inotify_add_watch", [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]),
                           ("inotify_rm_watch", [ctypes.c_int, ctypes.c_int]),
                           ("statfs", [ctypes.c_char_p, ctypes.c_void_p])):
            fn = getattr(libc, name)
            fn.argtypes, fn.restype = args, ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc
