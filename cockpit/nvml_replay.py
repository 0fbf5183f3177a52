"""NVML readings as JSON fixtures: ``RecordedSource`` replays one (tests/fixtures/nvml/), so every code path
that reads GPUs is tested on what real pynvml returned on real GPUs, on machines that have none; ``Recorder``
wraps a live source and keeps every call's outcome in the format the replay reads (tests/gpu/record_nvml.py).
A fixture maps "fn(arg,...)" to a plain value or {"nvml_error": code}; pids to (user, command)."""

from __future__ import annotations

from cockpit.nvml import NvmlError, Source

NOT_RECORDED = -1  # RecordedSource: the fixture has no value for this call (treated as unsupported)


class RecordedSource(Source):
    """Replays a recording: ``calls`` maps "fn(arg,...)" to a value or {"nvml_error": code}."""

    def __init__(self, recording: dict):
        self.calls = recording.get("calls", {})
        self.processes = recording.get("processes", {})

    def open(self) -> RecordedSource:
        self.call("nvmlInit")
        return self

    def call(self, fn: str, *args: int) -> object:
        key = call_key(fn, args)
        if key not in self.calls:
            raise NvmlError(NOT_RECORDED, f"{key} is not in the recording")
        value = self.calls[key]
        if isinstance(value, dict) and "nvml_error" in value:
            raise NvmlError(value["nvml_error"], value.get("message", ""))
        return value

    def process(self, pid: int) -> tuple[str | None, str | None]:
        info = self.processes.get(str(pid), {})
        return info.get("user"), info.get("command")


class Recorder(Source):
    """Wraps a source and keeps every call's outcome, in the format RecordedSource replays."""

    def __init__(self, inner: Source):
        self.inner = inner
        self.calls: dict[str, object] = {}
        self.processes: dict[str, dict] = {}

    def open(self) -> Recorder:
        try:
            self.inner.open()
        except NvmlError as exc:
            self.calls[call_key("nvmlInit", ())] = {"nvml_error": exc.code, "message": str(exc)}
            raise
        self.calls[call_key("nvmlInit", ())] = None
        return self

    def close(self) -> None:
        self.inner.close()

    def call(self, fn: str, *args: int) -> object:
        try:
            value = self.inner.call(fn, *args)
        except NvmlError as exc:
            self.calls[call_key(fn, args)] = {"nvml_error": exc.code, "message": str(exc)}
            raise
        self.calls[call_key(fn, args)] = value
        return value

    def process(self, pid: int) -> tuple[str | None, str | None]:
        user, command = self.inner.process(pid)
        self.processes[str(pid)] = {"user": user, "command": command}
        return user, command


def call_key(fn: str, args: tuple) -> str:
    return f"{fn}({','.join(str(a) for a in args)})"
