"""Opening a run's files on a shared login node: regular files only, never through a planted symlink, never
more than a bound into memory, and writes only into a directory the caller owns.

A login node has other users, and a runs directory may be a team's. What can be planted in a run directory —
a FIFO named status.json, /dev/zero as a rank log, a symlink at the name of a temporary file, a 2 GiB log, a
line of 512 MB — must cost one reader a clear "skipped" and bounded memory, never a hang, a crash or a write
through someone else's link:

- reads open with O_NONBLOCK (a FIFO opens at once instead of waiting for a writer) and O_NOFOLLOW (a run's
  files are never symlinks: cockpit and the rank wrapper write them), then keep only a regular file
  (``SpecialFile`` otherwise, an OSError, so every reader that skips an unreadable file skips it too); a
  size is read with a cap (``TooLarge``), a tail from the end;
- writes go through a descriptor of their directory, checked to be the caller's and writable by nobody else
  (``Untrusted``); a temporary is created O_EXCL | O_NOFOLLOW under a random name and renamed relative to
  that descriptor, so neither a symlink at its name nor a rename of the directory redirects the write;
- JSON nested deeper than the interpreter recurses is a bad record (ValueError), not a RecursionError.

Which directories may hold runs at all (``trusted_runs_dir``): see its docstring. Stdlib only; no cockpit
imports (the readers of cockpit.logs, which are core, use it too).
"""

from __future__ import annotations

import contextlib
import errno
import grp
import json
import os
import pwd
import stat
from pathlib import Path
from typing import BinaryIO

_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
BLOCK = 1 << 20


class SpecialFile(OSError):
    """A path that is not a regular file (a FIFO, a device, a socket, a directory) or is a symlink where a
    run's file should be: skipped and reported, never read."""


class TooLarge(OSError):
    """A file larger than a reader's cap (a status.json of gigabytes is not a status)."""


class Untrusted(Exception):
    """A directory another user could change under cockpit: its message says why and what to do."""


def kind(mode: int) -> str:
    """What a file of ``mode`` is, in words."""
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def open_fd(path: str | os.PathLike[str], *, dir_fd: int | None = None, follow: bool = False) -> int:
    """A read-only descriptor of the regular file at ``path``; SpecialFile for anything else. ``follow``:
    a symlink is followed (a path a person named on the command line), else refused (a run's own file)."""
    return open_stat(path, dir_fd=dir_fd, follow=follow)[0]


def open_stat(path: str | os.PathLike[str], *, dir_fd: int | None = None,
              follow: bool = False) -> tuple[int, os.stat_result]:
    """``open_fd``, and the descriptor's stat (its size and mtime: a reader that skips a file unchanged since
    its last read needs no other call)."""
    try:
        fd = os.open(path, _READ | (0 if follow else os.O_NOFOLLOW), dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise SpecialFile(errno.ELOOP, "a symbolic link, not followed (a run's files are never links)",
                              os.fspath(path)) from None
        raise
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise SpecialFile(errno.EINVAL, f"{kind(st.st_mode)}, not a regular file: skipped", os.fspath(path))
    return fd, st


def open_regular(path: str | os.PathLike[str], *, follow: bool = False) -> BinaryIO:
    """``open(path, "rb")`` for a regular file only (open_fd), without blocking on a FIFO."""
    return os.fdopen(open_fd(path, follow=follow), "rb")


def read_bytes(path: str | os.PathLike[str], cap: int, *, follow: bool = False) -> bytes:
    """The whole file, at most ``cap`` bytes (TooLarge beyond: a file that grows while read costs no more).
    Read on the descriptor itself (no file object: a supervisor reads thousands of small files a second)."""
    fd = open_fd(path, follow=follow)
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, min(size, cap) + 1)
        while size < len(data) <= cap and (more := os.read(fd, cap + 1 - len(data))):
            data += more  # it grew while read: the rest, up to the cap
    finally:
        os.close(fd)
    if len(data) > cap:
        raise TooLarge(errno.EFBIG, f"larger than {cap} bytes", os.fspath(path))
    return data


def read_capped(f: BinaryIO, cap: int) -> bytes:
    """The rest of the regular file ``f``, at most ``cap + 1`` bytes (more than ``cap``: too large). Sized by
    the file: a read of ``cap + 1`` would allocate that much for every small file (a listing of thousands of
    status files paid 20 us each for a 16 MiB cap)."""
    size = os.fstat(f.fileno()).st_size
    data = f.read(min(size, cap) + 1)
    if size < len(data) <= cap:  # it grew while read: the rest, up to the cap
        data += f.read(cap + 1 - len(data))
    return data


def read_text(path: str | os.PathLike[str], cap: int, *, follow: bool = False) -> str:
    """read_bytes decoded as UTF-8, undecodable bytes replaced."""
    return read_bytes(path, cap, follow=follow).decode("utf-8", "replace")


def tail_bytes(path: str | os.PathLike[str], size: int, *, follow: bool = False) -> tuple[bytes, bool]:
    """The last ``size`` bytes of the file, and whether they are all of it (False: it starts before). One
    positioned read on the descriptor (the watchdog reads every rank's beat and metrics tail each second)."""
    fd = open_fd(path, follow=follow)
    try:
        end = os.lseek(fd, 0, os.SEEK_END)
        start = max(0, end - size)
        data = os.pread(fd, end - start, start)
    finally:
        os.close(fd)
    return data, start == 0


def blocks(f: BinaryIO, block: int = BLOCK):
    """The file's bytes in blocks of at most ``block``."""
    while chunk := f.read(block):
        yield chunk


def loads(data: str | bytes) -> object:
    """json.loads; JSON nested deeper than the interpreter recurses raises ValueError, like any bad JSON."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def depth_at_most(value: object, limit: int) -> bool:
    """True when ``value`` (parsed JSON) nests no deeper than ``limit`` lists/objects (walked a level at a time,
    without recursion, so a deep value cannot break the walk itself; only the lists/objects are kept to walk: a
    status of hundreds of numbers and strings is checked for each `cockpit ps --json` prints)."""
    level = [value] if isinstance(value, (dict, list)) else []
    depth = 1
    while level:
        if depth > limit:
            return False
        deeper = []
        for item in level:
            deeper += [v for v in (item.values() if isinstance(item, dict) else item) if isinstance(v, (dict, list))]
        level, depth = deeper, depth + 1
    return True


# Writes


def _private_group(gid: int) -> bool:
    """The caller's own user-private group (same name as the user, no other listed member): a directory
    writable by it is writable by the caller alone (umask 002 on distributions that give each user a group)."""
    try:
        me = pwd.getpwuid(os.geteuid())
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    return gid == me.pw_gid and group.gr_name == me.pw_name and set(group.gr_mem) <= {me.pw_name}


def others_may_write(st: os.stat_result) -> bool:
    """Someone but the owner may create, rename or remove entries (mode o+w, or g+w for a shared group)."""
    return bool(st.st_mode & stat.S_IWOTH) or bool(st.st_mode & stat.S_IWGRP) and not _private_group(st.st_gid)


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def owned(st: os.stat_result) -> bool:
    """The caller's own directory, which nobody else may change."""
    return st.st_uid == os.geteuid() and not others_may_write(st)


def not_owned_reason(path: str | os.PathLike[str], st: os.stat_result) -> str:
    if st.st_uid != os.geteuid():
        return f"{os.fspath(path)} belongs to {user_name(st.st_uid)}, not to you ({user_name(os.geteuid())})"
    return f"{os.fspath(path)} is writable by others (mode {stat.S_IMODE(st.st_mode):04o})"


def open_dir(path: str | os.PathLike[str], *, own: bool = True) -> int:
    """A descriptor of the directory ``path``; with ``own``, Untrusted unless it is the caller's and nobody
    else may write it (whatever happens to its path later, writes through this descriptor land in it)."""
    fd = os.open(path, _DIR)
    if own:
        st = os.fstat(fd)
        if not owned(st):
            os.close(fd)
            raise Untrusted(f"{not_owned_reason(path, st)}: cockpit writes only into a directory of yours "
                            "that nobody else can change")
    return fd


def write_atomic(path: Path, text: str | bytes, *, own_dir: bool = False, mode: int = 0o600,
                 sync: bool = True) -> None:
    """Readers see the old file or the new one, never half of one; the file is ``mode`` (0600). The temporary
    is created O_EXCL | O_NOFOLLOW under a random name in a descriptor of the directory (a symlink at its
    name is never followed), then renamed there. ``own_dir``: the directory must be the caller's (open_dir).
    On an error (a full disk) the old file stays, no temporary is left, the OSError is raised. ``sync=False``:
    no fsync before the rename, for a cache its readers check (a crash may leave it empty or old, never
    believed): a listing that rebuilds thousands of them would wait on thousands of disk flushes."""
    import secrets

    data = text.encode("utf-8") if isinstance(text, str) else text
    dfd = open_dir(path.parent, own=own_dir)
    try:
        tmp = f".{path.name}.{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                if sync:
                    os.fsync(f.fileno())
            os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):  # already renamed: nothing of ours is left behind
                os.unlink(tmp, dir_fd=dfd)
            raise
    finally:
        os.close(dfd)


def write_private(path: Path, text: str, *, mode: int = 0o600) -> None:
    """Write ``path`` readable by its owner only (``mode``, whatever the umask), in a directory of the caller's
    (open_dir), never through a symlink at its name: run files hold env values such as API keys."""
    dfd = open_dir(path.parent)
    try:
        fd = os.open(path.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK
                     | os.O_CLOEXEC, mode, dir_fd=dfd)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SpecialFile(errno.EINVAL, "not a regular file", os.fspath(path))
            os.fchmod(fd, mode)  # an existing file keeps its mode through O_CREAT
            f.write(text)
    finally:
        os.close(dfd)


def open_append(path: Path) -> BinaryIO:
    """``path`` opened to append (created 0600), in a directory of the caller's, never through a symlink."""
    dfd = open_dir(path.parent)
    try:
        fd = os.open(path.name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                     | os.O_CLOEXEC, 0o600, dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SpecialFile(errno.ELOOP, "a symbolic link, not followed", os.fspath(path)) from None
        raise
    finally:
        os.close(dfd)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise SpecialFile(errno.EINVAL, f"{kind(mode)}, not a regular file: not written", os.fspath(path))
    return os.fdopen(fd, "ab")


def append_at(dir_fd: int, name: str, data: bytes) -> int:
    """``open_append``'s append of ``data`` to the file ``name`` of an open directory (checked once by its
    opener, for many files: a stack request appends a marker to every rank's file); the file's size after it."""
    try:
        fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     0o600, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SpecialFile(errno.ELOOP, "a symbolic link, not followed", name) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise SpecialFile(errno.EINVAL, f"{kind(mode)}, not a regular file: not written", name)
        while data:
            data = data[os.write(fd, data):]
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def make_dir(parent_fd: int, name: str, mode: int = 0o700) -> None:
    os.mkdir(name, mode, dir_fd=parent_fd)
