"""Read one growing log file line by line: the synchronous half of the tail engine (cockpit.logs.tail).

FileFollower handles files that do not exist yet, partial lines, truncation, rotation and over-long
(progress-bar) lines; Tailer schedules many of them. Standard library only.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
import time
from collections.abc import Hashable
from typing import NamedTuple

# O_NONBLOCK: opening a FIFO that someone put at a log path must not hang the worker (it is then refused).
# O_NOFOLLOW: a run's logs are never symlinks; one planted there (to /dev/zero, to a file of the reader's) is
# refused, not followed (cockpit.fs.safeio).
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)
               | getattr(os, "O_NOFOLLOW", 0))


class Line(NamedTuple):
    """One line of one followed file (a NamedTuple: tens of thousands are made per second).

    - source: the key given to Tailer.add.
    - text: UTF-8 decoded (errors replaced), without its "\\n" or "\\r\\n"; inner "\\r" (progress-bar frames)
      are kept.
    - seq: per-source line number from 0, increasing across rotations and truncations; a gap means drops.
    - offset: byte offset of the line's start in the file it came from (0 again after rotation/truncation).
    - t_read: time.time() when its bytes were read.
    - cut: True when text did not end in a newline: a piece of a line longer than max_line_bytes (the next
      Line of the source continues it; pieces end after a "\\r" where possible), or an unterminated tail
      flushed at stop, truncation or rotation.
    """

    source: Hashable
    text: str
    seq: int
    offset: int
    t_read: float
    cut: bool = False


def last_frame(text: str) -> str:
    """What a line drawn with "\\r" updates (a progress bar: tqdm, Lightning's bar) shows at its end: the text after
    its last "\\r" that is not blank (trailing blanks, the padding over a longer frame, dropped); the text itself
    when it holds no "\\r"."""
    if "\r" not in text:
        return text
    for frame in reversed(text.split("\r")):
        if frame.strip():
            return frame.rstrip()
    return ""


def _cut_point(buf: bytes, cap: int) -> int:
    """Where to cut an over-long line (len(buf) > cap): after its last "\\r" before cap, else at a UTF-8
    character boundary at or just below cap, so pieces decode cleanly."""
    i = buf.rfind(b"\r", 0, cap)
    if i >= 0:
        return i + 1
    c = cap
    while c > cap - 3 and buf[c] & 0xC0 == 0x80:
        c -= 1
    return c


class FileFollower:
    """Reads what is appended to one file; follows truncation, rotation and a file that appears late.

    Not thread-safe: call poll/flush/close from one thread. Reports OS errors in ``error``, never raises them.
    """

    def __init__(self, source: Hashable, path: str | os.PathLike[str], *, from_start: bool = True,
                 last_lines: int | None = None, max_line_bytes: int = 64 * 1024,
                 max_read_bytes: int = 256 * 1024) -> None:
        if max_line_bytes < 16 or max_read_bytes < 1:
            raise ValueError("max_line_bytes must be >= 16 and max_read_bytes >= 1")
        self.source = source
        self.path = os.fspath(path)
        self.seq = 0
        self.rotations = 0
        self.truncations = 0
        self.error: str | None = None
        self._cap = max_line_bytes
        self._max_read = max_read_bytes
        self._fd: int | None = None
        self._ident: tuple[int, int] | None = None
        self._pos = 0  # file offset up to which bytes were read (the pending tail included)
        self._pending = b""  # an unterminated line, never longer than max_line_bytes
        self._bar = False  # the pending line continues one cut after a "\r": a progress bar still drawn
        self._behind = False  # the last poll left bytes unread (max_read_bytes reached)
        self._detached = False  # the last poll read a file the path no longer names (rotated away, deleted)
        # from_start=False: remember where the file ends NOW, so lines written before the first poll count.
        # last_lines=N (`tail -f -n N`): the file there now is read from the start of its last N lines, so
        # the tail and what follows are one stream: nothing shown twice, nothing skipped between them.
        if last_lines is not None and last_lines < 0:
            raise ValueError("last_lines must be >= 0")
        self._last = last_lines
        self._mark = None if from_start and last_lines is None else ident_and_size(self.path)

    @property
    def is_open(self) -> bool:
        """True while a file is open for reading (False: waiting for the path to appear)."""
        return self._fd is not None

    @property
    def behind(self) -> bool:
        """True when the last poll stopped at max_read_bytes with more of the file waiting."""
        return self._behind

    @property
    def detached(self) -> bool:
        """True when the file read is no longer the one at the path (deleted, or rotated while unread bytes
        remained): its growth shows in no event about the path, so it is polled until the follower moves on."""
        return self._detached

    @property
    def frame(self) -> str | None:
        """The latest frame of a progress bar being drawn: ``last_frame`` of the unterminated line read so far,
        where it holds a "\\r" (None otherwise, and once its newline came). Bytes of a character not complete yet
        are left out."""
        pending = self._pending
        if not pending or (b"\r" not in pending and not self._bar):
            return None
        return last_frame(pending.decode("utf-8", "ignore")) or None

    @property
    def offset(self) -> int:
        """Bytes read so far from the current file."""
        return self._pos

    @property
    def unread(self) -> int:
        """Bytes in the file not read yet (0 when it is not open)."""
        try:
            return max(0, self._size() - self._pos) if self._fd is not None else 0
        except OSError:
            return 0

    def poll(self) -> list[Line]:
        """Read what was appended since the last poll (at most max_read_bytes)."""
        out: list[Line] = []
        self._behind = self._detached = False
        if self._fd is None and not self._open():
            return out
        try:
            st: os.stat_result | None = os.stat(self.path)
        except OSError:  # gone (rotated away or deleted): keep reading the open file
            st = None
        if st is not None and (st.st_dev, st.st_ino) == self._ident:
            if st.st_size < self._pos:
                self._restart(out)
            self._read(out, st.st_size)
            return out
        # The path is gone or names another file: finish the old file to EOF, then switch.
        self._read(out, self._size())
        if not self._behind and st is not None:
            self.flush(out)
            self.close()
            self.rotations += 1
            if self._open():
                self._read(out, self._size())
        else:
            self._detached = True
        return out

    def flush(self, out: list[Line]) -> None:
        """Deliver the pending unterminated line, if any, into out (as cut)."""
        if self._pending:
            start = self._pos - len(self._pending)
            out.append(Line(self.source, self._pending.decode("utf-8", "replace"), self.seq, start,
                            time.time(), True))
            self.seq += 1
            self._pending = b""
        self._bar = False

    def close(self) -> None:
        """Close the file (a later poll opens the path again, from its start)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError as exc:  # e.g. EIO from a network filesystem; the descriptor is gone anyway
                self.error = f"closing {self.path}: {exc.strerror}"

    def _open(self) -> bool:
        try:
            fd = os.open(self.path, _OPEN_FLAGS)
        except FileNotFoundError:
            return False
        except OSError as exc:
            self.error = (f"{self.path}: a symbolic link, not followed (a run's logs are never links)"
                          if exc.errno == errno.ELOOP else
                          f"cannot open {self.path}: {exc.strerror} (hint: check its permissions)")
            return False
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise OSError(0, "not a regular file (hint: point the source at a log file)")
            self._pos = self._start_offset(fd, st)
            os.lseek(fd, self._pos, os.SEEK_SET)
        except OSError as exc:
            os.close(fd)
            self.error = f"{self.path}: {exc.strerror}"
            return False
        self._fd, self._ident, self.error = fd, (st.st_dev, st.st_ino), None
        return True

    def _start_offset(self, fd: int, st: os.stat_result) -> int:
        """0, or for from_start=False the start of the line that was being written at add time, or for
        last_lines the start of the file's last lines (a file that was not there at add time: 0)."""
        mark, self._mark = self._mark, None
        if mark is None or mark[:2] != (st.st_dev, st.st_ino):
            return 0
        if self._last:  # (0: from the line being written, as for from_start=False)
            return self._last_lines_start(fd, st.st_size, self._last)
        end = min(mark[2], st.st_size)
        back = min(end, self._cap)
        os.lseek(fd, end - back, os.SEEK_SET)
        i = os.read(fd, back).rfind(b"\n")
        if i >= 0:
            return end - back + i + 1
        return 0 if back == end else end

    def _last_lines_start(self, fd: int, end: int, n: int) -> int:
        """Where the last ``n`` lines (split on "\\n", as poll splits them) of the first ``end`` bytes start,
        read backwards a block at a time: at most (n + 1) x max_line_bytes bytes, however long the file."""
        stop = max(0, end - (n + 1) * self._cap)
        pos, found = end, 0
        last = end - 1  # a newline ending the file ends its last line: it starts none
        while pos > stop:
            size = min(64 << 10, pos - stop)
            pos -= size
            os.lseek(fd, pos, os.SEEK_SET)
            block = os.read(fd, size)
            i = min(len(block), last - pos) if last < pos + len(block) else len(block)
            while (i := block.rfind(b"\n", 0, i)) >= 0:
                found += 1
                if found == n:
                    return pos + i + 1
        return stop

    def _restart(self, out: list[Line]) -> None:
        """The file shrank (truncated): deliver the pending tail, then read again from 0."""
        self.flush(out)
        self.truncations += 1
        self._pos = 0
        if self._fd is not None:  # always: it is read while open
            os.lseek(self._fd, 0, os.SEEK_SET)

    def _read(self, out: list[Line], size: int) -> None:
        """Read up to size (the file's size as just seen), at most max_read_bytes. Asking for no more than is
        there matters: os.read(fd, n) allocates n bytes first, and a 256 KiB allocation per file per poll
        costs more than the lines it returns."""
        want = min(size - self._pos, self._max_read)
        if want <= 0 or self._fd is None:  # (never None: it is read while open)
            return
        try:
            data = os.read(self._fd, want)
        except OSError as exc:
            self.error = f"cannot read {self.path}: {exc.strerror}"
            return
        if data:
            self._split(data, time.time(), out)
        self._behind = len(data) == want and size > self._pos

    def _size(self) -> int:
        if self._fd is None:  # never: the size is asked while open
            return self._pos
        try:
            return os.fstat(self._fd).st_size
        except OSError as exc:
            self.error = f"cannot stat {self.path}: {exc.strerror}"
            return self._pos

    def _split(self, data: bytes, now: float, out: list[Line]) -> None:
        """Turn pending + data into Lines; keep the unterminated tail (cut when over max_line_bytes)."""
        buf = self._pending + data if self._pending else data
        start = self._pos - len(self._pending)
        self._pos += len(data)
        end = buf.rfind(b"\n")
        if end >= 0:
            self._bar = False
            if not self._split_ascii(buf[:end], start, now, out):
                self._split_any(buf[:end], start, now, out)
            start += end + 1
            buf = buf[end + 1:]
        self._pending = self._pieces(buf, start, now, out, last_cut=True) if len(buf) > self._cap else buf

    def _split_ascii(self, whole: bytes, start: int, now: float, out: list[Line]) -> bool:
        """The common case, ASCII lines within the cap, with the per-line work in C; False if not that case."""
        if not whole.isascii():
            return False
        texts = whole.decode("ascii").split("\n")
        if max(map(len, texts)) > self._cap:
            return False
        starts = itertools.accumulate(map((1).__add__, map(len, texts)), initial=start)
        if b"\r" in whole:
            texts = [t[:-1] if t[-1:] == "\r" else t for t in texts]
        seq, self.seq = self.seq, self.seq + len(texts)
        out.extend(map(Line, itertools.repeat(self.source), texts, itertools.count(seq), starts,
                       itertools.repeat(now)))
        return True

    def _split_any(self, whole: bytes, start: int, now: float, out: list[Line]) -> None:
        """Any bytes: decode line by line (errors replaced), cutting lines over the cap into pieces."""
        source, seq, cap, append = self.source, self.seq, self._cap, out.append
        for raw in whole.split(b"\n"):
            n = len(raw) + 1
            if raw[-1:] == b"\r":
                raw = raw[:-1]
            if len(raw) <= cap:
                append(Line(source, raw.decode("utf-8", "replace"), seq, start, now))
                seq += 1
            else:
                self.seq = seq
                self._pieces(raw, start, now, out, last_cut=False)
                seq = self.seq
            start += n
        self.seq = seq

    def _pieces(self, buf: bytes, start: int, now: float, out: list[Line], *, last_cut: bool) -> bytes:
        """Cut buf into pieces of at most max_line_bytes; return the rest (<= cap) when last_cut is True."""
        while len(buf) > self._cap:
            c = _cut_point(buf, self._cap)
            self._bar = last_cut and buf[c - 1:c] == b"\r"
            out.append(Line(self.source, buf[:c].decode("utf-8", "replace"), self.seq, start, now, True))
            self.seq += 1
            start += c
            buf = buf[c:]
        if last_cut:
            return buf
        out.append(Line(self.source, buf.decode("utf-8", "replace"), self.seq, start, now))
        self.seq += 1
        return b""


def ident_and_size(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:  # not there yet: it will be read from its start when it appears
        return None
    return st.st_dev, st.st_ino, st.st_size
