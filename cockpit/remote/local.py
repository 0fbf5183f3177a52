"""This machine, by subprocess: a LocalRemote runs commands in a new session, so a timeout or ``close`` kills
the command's whole process group. No SSH, no asyncssh."""

from __future__ import annotations

import asyncio
import os
import signal as signals

from cockpit.remote.base import CommandFailed, Remote, Result, Stream, Timeout, command_line


class LocalRemote(Remote):
    """This machine, by subprocess. No SSH, no asyncssh."""

    def __init__(self, host: str = "localhost"):
        self.host = host

    async def _spawn(self, cmd: list[str] | str, stdin: int | None) -> asyncio.subprocess.Process:
        pipe = asyncio.subprocess.PIPE
        if isinstance(cmd, str):
            return await asyncio.create_subprocess_shell(cmd, stdin=stdin, stdout=pipe, stderr=pipe,
                                                         start_new_session=True)
        return await asyncio.create_subprocess_exec(*cmd, stdin=stdin, stdout=pipe, stderr=pipe,
                                                    start_new_session=True)

    async def run(self, cmd: list[str] | str, timeout: float | None = None, input: str | None = None) -> Result:
        try:
            proc = await self._spawn(cmd, asyncio.subprocess.DEVNULL if input is None else asyncio.subprocess.PIPE)
        except OSError as exc:
            return Result(127, "", f"{command_line(cmd)}: {exc.strerror}\n")
        try:
            out, err = await asyncio.wait_for(proc.communicate(None if input is None else input.encode()), timeout)
        except asyncio.TimeoutError:
            _kill_group(proc)
            await proc.wait()
            raise Timeout(self.host, f"no answer within {timeout:g} s from {command_line(cmd)}") from None
        code = proc.returncode  # set: communicate() waited for the exit
        status = code if code is not None and code >= 0 else None
        return Result(status, out.decode(errors="replace"), err.decode(errors="replace"))

    async def stream(self, cmd: list[str] | str) -> Stream:
        return _LocalStream(self.host, await self._spawn(cmd, asyncio.subprocess.PIPE))


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signals.SIGKILL)
    except ProcessLookupError:
        return  # already gone


class _LocalStream(Stream):
    def __init__(self, host: str, proc: asyncio.subprocess.Process):
        if proc.stdout is None or proc.stderr is None:  # never: _spawn pipes both
            raise ValueError(f"{host}: a stream reads the command's stdout and stderr through pipes")
        self.host, self.proc = host, proc
        self._out, self._err = proc.stdout, proc.stderr

    async def __anext__(self) -> str:
        line = await self._out.readline()
        if line:
            return line.decode(errors="replace").rstrip("\n")
        err = await self._err.read()
        status = await self.proc.wait()
        if status != 0:
            raise CommandFailed(self.host, Result(status if status >= 0 else None, "", err.decode(errors="replace")))
        raise StopAsyncIteration

    def write(self, text: str) -> None:
        if self.proc.stdin is not None:  # always: stream() spawns with stdin=PIPE
            self.proc.stdin.write(text.encode())

    async def close(self) -> None:
        if self.proc.returncode is None:
            _kill_group(self.proc)
            await self.proc.wait()
