"""Reading log files in bounded memory, whatever they hold: 2 GiB, a 512 MB line without a newline, 100 MB of
progress-bar frames joined by carriage returns.

Three shapes, each holding at most a block plus a cap in memory:

- ``capped_blocks``: the bytes in blocks, with every line longer than the cap cut to its head and its tail
  around a marker saying how much was left out (what the diagnosis parses: a line's first and last words
  are where an error says what it is; its line numbers stay right, since no newline is added or lost);
- ``printable``: what `cockpit logs` prints of a file, a block at a time, a line longer than a piece in pieces
  (all of the log, streamed, as `cat` would, and near its pace);
- ``tail``: the last lines, read from the end of the file (`cockpit logs -n`, the summary's last lines).

Files are opened regular-only (cockpit.fs.safeio): a FIFO or a device is an OSError here, never a hang.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from cockpit.fs.safeio import blocks, open_regular

LINE_CAP = 64 << 10  # a line longer than this is cut (diagnosis, tails) or comes in pieces (logs)
PIECE = 1 << 20  # `cockpit logs`: the longest piece of an over-long line printed as one line
PRINT_BLOCK = 1 << 18  # measured: 1 MiB blocks (and the copies made of them) cost page faults; 256 KiB does not


def marker(left_out: int) -> bytes:
    return f" [… {left_out} bytes of this line left out …] ".encode()


def capped_blocks(chunks: Iterable[bytes], cap: int = LINE_CAP) -> Iterator[bytes]:
    """``chunks`` (consecutive blocks of a file) with every line of more than ``cap`` bytes cut to its first
    and last ``cap // 2`` bytes around a marker (newlines all kept: line numbers stay right)."""
    half = cap // 2
    cut = _Cutter(half)
    for chunk in chunks:
        if not cut.active and _lines_within(chunk, half):  # the common case: a few memchr calls a chunk
            first = chunk.find(b"\n")
            if cut.run + (first if first >= 0 else len(chunk)) <= half:
                end = chunk.rfind(b"\n")
                cut.run = cut.run + len(chunk) if end < 0 else len(chunk) - end - 1
                yield chunk
                continue
        # every line within half the cap (one that may outgrow it goes the slow way), measured line by line
        lengths = list(map(len, chunk.split(b"\n")))
        if not cut.active and cut.run + lengths[0] <= half and max(lengths) <= half:
            cut.run = cut.run + lengths[0] if len(lengths) == 1 else lengths[-1]
            yield chunk
        else:
            yield cut.feed(chunk)
    if last := cut.finish():
        yield last


def _lines_within(chunk: bytes, most: int) -> bool:
    """True only if no line (run without \\n) of ``chunk`` is longer than ``most`` bytes; False: maybe one is.
    Such a run would hold a whole aligned window of ``(most + 1) // 2`` bytes without a newline, so a newline
    in every window rules it out: one memchr a window instead of a bytes object a line (``split``)."""
    step = max(1, (most + 1) // 2)
    return all(chunk.find(b"\n", at, at + step) >= 0 for at in range(0, len(chunk), step))


class _Cutter:
    """The slow path of capped_blocks: one line at a time through a chunk that holds an over-long line."""

    def __init__(self, half: int):
        self.half, self.run, self.skipped, self.tail = half, 0, 0, b""

    @property
    def active(self) -> bool:
        return self.skipped > 0

    def feed(self, chunk: bytes) -> bytes:
        out, pos = [], 0
        while pos < len(chunk):
            nl = chunk.find(b"\n", pos)
            end = len(chunk) if nl < 0 else nl
            body = chunk[pos:end]
            if self.run < self.half:
                take = body[:self.half - self.run]
                out.append(take)
                self.run += len(take)
                body = body[len(take):]
            if body:
                self.skipped += len(body)
                self.tail = (self.tail + body[-self.half:])[-self.half:]
                self.run += len(body)
            if nl < 0:
                break
            out.append(self.finish() + b"\n")
            pos = nl + 1
        return b"".join(out)

    def finish(self) -> bytes:
        """The end of the current line: its tail after the marker, if any of it was left out."""
        done = marker(self.skipped - len(self.tail)) + self.tail if self.skipped > len(self.tail) else self.tail
        self.run, self.skipped, self.tail = 0, 0, b""
        return done


def printable(path: str | os.PathLike[str], prefix: str = "", *, block: int = PRINT_BLOCK, piece: int = PIECE,
              follow: bool = False) -> Iterator[bytes]:
    """What `cockpit logs` prints of a file, as UTF-8 bytes a block at a time: its lines (split as str.splitlines
    splits: \\n, \\r\\n, \\r and the rest), each after ``prefix`` and ending in \\n; a line longer than ``piece``
    bytes comes as pieces, each a line of its own; undecodable bytes replaced. Memory: a block and a piece.
    The common block (ASCII, no \\r) is copied as it is, at `cat`'s pace."""
    head = prefix.encode()
    parts: list[bytes] = []  # the line without \n so far, joined only when it ends or outgrows a piece
    size = 0
    with open_regular(path, follow=follow) as f:
        for chunk in blocks(f, block):
            cut = chunk.rfind(b"\n") + 1
            if cut:
                yield _lines_out(b"".join((*parts, chunk[:cut])), head)  # whole lines: no \r\n or character cut
                parts, size = [], 0
            parts.append(chunk[cut:] if cut else chunk)
            size += len(parts[-1])
            if size > piece and all(map(_clean, parts)):  # a line without \n (a NUL run): its blocks as pieces
                for part in parts:
                    yield head + part + b"\n" if head else part + b"\n"
                parts, size = [], 0
            elif size > piece:  # progress bars (\r), other text: cut where a frame ends
                carry = b"".join(parts)
                while len(carry) > piece:
                    at = _piece_end(carry, piece)
                    yield _lines_out(carry[:at], head)
                    carry = carry[at:]
                parts, size = [carry], len(carry)
    if size:
        yield _lines_out(b"".join(parts), head)


_OTHER_BREAKS = (b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e")  # ASCII that splitlines also breaks at


def _clean(data: bytes) -> bool:
    """ASCII without a line break but \\n: printed as it is (memchr per character: faster than one regex)."""
    return data.isascii() and not any(c in data for c in _OTHER_BREAKS)


def _lines_out(data: bytes, head: bytes) -> bytes:
    """``data`` (whole lines, or a piece) as printed: each line after ``head``, ending in \\n."""
    if _clean(data):
        if not head and data.endswith(b"\n"):
            return data  # the common block: no copy
        body = data[:-1] if data.endswith(b"\n") else data
        return head + body.replace(b"\n", b"\n" + head) + b"\n" if head else body + b"\n"
    lines = data.decode("utf-8", "replace").splitlines()
    return "".join(f"{head.decode()}{line}\n" for line in lines).encode() if lines else b""


def _piece_end(data: bytes, piece: int) -> int:
    """Where to cut a piece of at most ``piece`` bytes from ``data``: after its last \\r (a progress bar's frame
    ends there; not inside a \\r\\n), else at a UTF-8 character boundary."""
    at = data.rfind(b"\r", 0, piece - 1)
    if at >= 0:
        return at + 1
    at = piece
    while at > piece - 3 and data[at] & 0xC0 == 0x80:
        at -= 1
    return at


def tail(path: str | os.PathLike[str], n: int, *, cap: int = LINE_CAP, follow: bool = False) -> list[str]:
    """The last ``n`` lines of a file (split as str.splitlines splits), read backwards from its end: at most
    (n + 1) x ``cap`` bytes, however long the file or its lines. A line longer than ``cap`` keeps its end,
    after "…"."""
    if n <= 0:
        return []
    budget, step = (n + 1) * cap, 64 << 10
    with open_regular(path, follow=follow) as f:
        end = f.seek(0, os.SEEK_END)
        pos, chunks, breaks = end, [], 0
        while pos > 0 and breaks <= n and end - pos < budget:
            size = min(step, pos, budget - (end - pos))
            pos -= size
            f.seek(pos)
            chunk = f.read(size)
            chunks.append(chunk)
            breaks += chunk.count(b"\n") + chunk.count(b"\r") - chunk.count(b"\r\n")
    lines = b"".join(reversed(chunks)).decode("utf-8", "replace").splitlines()
    if pos > 0 and lines:  # the first line started before what was read
        lines[0] = "…" + lines[0]
        if len(lines) > n:
            lines = lines[1:]
    return [line if len(line) <= cap else "…" + line[-cap:] for line in lines[-n:]]
