"""Fleet nodes for the pure tests: the recorded NVML fixtures (tests/fixtures/nvml/) as a node reports them,
through the `cockpit gpus --json` shape."""

from __future__ import annotations

import json

from helpers import REPO

from cockpit import nvml, nvml_replay
from cockpit.fleet.records import NodeReport


def node_from_fixture(host: str, name: str, **extra) -> NodeReport:
    rec = json.loads((REPO / "tests" / "fixtures" / "nvml" / f"{name}.json").read_text())
    report = nvml.read(nvml_replay.RecordedSource(rec), env={}).to_dict()
    versions = {"python": "3.11.7", "torch": "2.5.1", "torch_cuda": "12.1", "nccl": "2.21.5"}
    interfaces = [{"name": "lo", "up": True, "loopback": True, "ipv4": ["127.0.0.1/8"]},
                  {"name": "ib0", "up": True, "loopback": False, "ipv4": ["10.1.0.5/16"]}]
    return NodeReport.from_dict({"host": host, "hint": None, "updated": 0.0, "hostname": host,
                                 "interfaces": interfaces, "versions": versions, "ports": {"29500": True},
                                 **report, **extra})
