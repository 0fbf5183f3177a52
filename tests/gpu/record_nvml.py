"""Record what real pynvml returns on this GPU machine, in the format of tests/fixtures/nvml/*.json.

    python tests/gpu/record_nvml.py tests/fixtures/nvml/<gpu-model>-<state>.json [--note "8x H100, idle"]

Every NVML call cockpit.nvml makes goes through cockpit.nvml_replay.Recorder, which keeps its result (or its NVML
error code): replaying the file with RecordedSource gives cockpit exactly what this machine gave. The file
also keeps cockpit's report, so tests/fleet/test_nvml.py checks that a replay still reads the same. It holds
this machine's GPU UUIDs, process ids, users and command lines: look at it before you commit it.
Not collected by pytest (tests/gpu is in norecursedirs).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout without installing

from cockpit import nvml, nvml_replay  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="where to write the recording (JSON)")
    parser.add_argument("--note", default="", help="what was running, anything a reader should know")
    args = parser.parse_args()
    recorder = nvml_replay.Recorder(nvml.LiveSource())
    env = {"CUDA_DEVICE_ORDER": os.environ.get("CUDA_DEVICE_ORDER")}
    report = nvml.read(recorder, env={k: v for k, v in env.items() if v is not None})
    try:
        binding = importlib.metadata.version("nvidia-ml-py")
    except importlib.metadata.PackageNotFoundError:
        binding = "unknown"
    when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    recording = {
        "recorded_by_us": True,
        "source": f"recorded by tests/gpu/record_nvml.py on {socket.gethostname()} ({platform.platform()}) at "
                  f"{when}, nvidia-ml-py {binding}",
        "note": args.note,
        "env": {k: v for k, v in env.items() if v is not None},
        "calls": recorder.calls,
        "processes": recorder.processes,
        "report": report.to_dict(),
    }
    args.out.write_text(json.dumps(recording, indent=1) + "\n")
    print(f"{args.out}: {report.state}, {len(report.gpus)} GPU(s), {len(recorder.calls)} calls recorded")
    return 0 if report.state == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
