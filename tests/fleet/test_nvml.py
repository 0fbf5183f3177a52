"""cockpit.nvml against recorded readings (tests/fixtures/nvml/, sources in each file and in README.md), and
against the real pynvml of this machine, which has no NVIDIA driver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict

import pytest
from helpers import REPO

from cockpit import gpu, nvml, nvml_replay

FIXTURES = REPO / "tests" / "fixtures" / "nvml"


def recording(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def read(rec: dict, env: dict | None = None) -> nvml.GpuReport:
    return nvml.read(nvml_replay.RecordedSource(rec), env={} if env is None else env)


def test_every_fixture_says_where_it_came_from():
    for path in FIXTURES.glob("*.json"):
        rec = json.loads(path.read_text())
        assert rec["source"], path
        assert rec["recorded_by_us"] or "NOT RECORDED BY US" in rec["note"], path


def test_recordings_with_a_report_still_read_the_same():
    for path in FIXTURES.glob("*.json"):
        rec = json.loads(path.read_text())
        if "report" in rec:
            assert json.loads(json.dumps(read(rec, rec.get("env", {})).to_dict())) == rec["report"], path


def test_the_record_script_records_this_machine(tmp_path):
    out = tmp_path / "here.json"
    r = subprocess.run([sys.executable, str(REPO / "tests" / "gpu" / "record_nvml.py"), str(out), "--note", "t"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "no_driver" in r.stdout  # no GPU here: recorded, and said so
    rec = json.loads(out.read_text())
    assert rec["recorded_by_us"] and rec["calls"]["nvmlInit()"]["nvml_error"] == 12
    assert json.loads(json.dumps(read(rec).to_dict())) == rec["report"]


def test_h100_under_load_every_field():
    r = read(recording("h100-80gb-hbm3-load"))
    assert (r.state, r.reason, r.source) == ("ok", None, "nvml")
    assert (r.driver_version, r.cuda_version, r.nvml_version) == ("590.48.01", "13.1", "590.48")
    (g,) = r.gpus
    assert json.loads(json.dumps(asdict(g))) == {
        "index": 0, "uuid": "GPU-00000000-0000-0000-0000-000000000000", "name": "NVIDIA H100 80GB HBM3",
        "pci_bus_id": "00000000:00:09.0", "memory_used_mib": 19818, "memory_total_mib": 81559,
        "utilization_gpu": 100, "utilization_memory": 11, "temperature_c": 59, "power_draw_w": 629.45,
        "power_limit_w": 700.0,
        "processes": [{"pid": 11327, "used_memory_mib": 2566, "user": None, "command": "/root/tools/memhog"},
                      {"pid": 11328, "used_memory_mib": 1542, "user": None, "command": "/root/tools/memhog"},
                      {"pid": 11345, "used_memory_mib": 15690, "user": None, "command": "./gpu_burn"}]}
    assert r.warnings == ()  # one GPU: the order cannot be wrong


def test_mig_gpu_unsupported_utilization_is_none_not_an_exception():
    r = read(recording("a100-sxm4-80gb-mig"))
    (g,) = r.gpus
    assert g.utilization_gpu is None and g.utilization_memory is None
    assert (g.name, g.pci_bus_id, g.memory_used_mib, g.memory_total_mib) == \
        ("NVIDIA A100-SXM4-80GB", "00000000:01:00.0", 50, 81920)
    assert (g.temperature_c, g.power_draw_w, g.power_limit_w, g.processes) == (27, 67.03, 500.0, ())
    assert r.nvml_version is None  # not in the recording: unknown, not an error


def test_any_failing_call_leaves_only_that_field_unknown():
    rec = recording("h100-80gb-hbm3-load")
    for key in list(rec["calls"]):
        if key.startswith("nvmlDevice") and "(0" in key:
            broken = {**rec, "calls": {**rec["calls"], key: {"nvml_error": 15, "message": "GPU is lost"}}}
            r = read(broken)
            assert r.state == "ok" and len(r.gpus) == 1, key


def test_two_gpus_in_bus_order_with_their_processes():
    r = read(recording("dual-rtx-a5000"))
    assert [(g.index, g.pci_bus_id, g.memory_used_mib) for g in r.gpus] == [
        (0, "00000000:81:00.0", 22437), (1, "00000000:C1:00.0", 17253)]
    assert [(p.pid, p.used_memory_mib) for g in r.gpus for p in g.processes] == [(100477, 22430), (100477, 17246)]
    assert [g.power_draw_w for g in r.gpus] == [6.41, 13.6]


def swap_devices(rec: dict, a: int, b: int) -> dict:
    """The same GPUs, enumerated by NVML in another order (as CUDA's fastest-first order may)."""
    def rename(key: str) -> str:
        for old, new in ((f"({a}", "(@"), (f"({b}", f"({a}"), ("(@", f"({b}")):
            key = key.replace(old, new)
        return key
    return {**rec, "calls": {rename(k): v for k, v in rec["calls"].items()}}


def test_gpus_are_sorted_by_pci_bus_id_whatever_the_enumeration_order():
    r = read(swap_devices(recording("dual-rtx-a5000"), 0, 1))
    assert [g.pci_bus_id for g in r.gpus] == ["00000000:81:00.0", "00000000:C1:00.0"]
    assert [g.index for g in r.gpus] == [0, 1]
    assert r.gpus[0].uuid.endswith("89ab")


def test_bus_id_order_is_numeric_and_spelling_independent():
    gpus = [nvml.Gpu(i, None, None, b, None, None, None, None, None, None, None)
            for i, b in enumerate(["0000:C1:00.0", None, "00000000:1a:00.0", "00000001:05:00.0", "00000000:81:00.0"])]
    ordered = gpu.sort_by_bus_id(gpus)
    assert [g.pci_bus_id for g in ordered] == ["00000000:1a:00.0", "00000000:81:00.0", "0000:C1:00.0",
                                               "00000001:05:00.0", None]
    assert [g.index for g in ordered] == [0, 1, 2, 3, 4]
    assert gpu.normal_bus_id("0000:c1:00.0") == "00000000:C1:00.0"


def test_cuda_device_order_warning():
    rec = recording("dual-rtx-a5000")
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in read(rec, env={}).warnings[0]
    assert read(rec, env={"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}).warnings
    assert read(rec, env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}).warnings == ()


def test_memory_falls_back_to_the_v1_struct_on_old_drivers():
    rec = recording("h100-80gb-hbm3-load")
    calls = dict(rec["calls"])
    calls["nvmlDeviceGetMemoryInfo_v2(0)"] = {"nvml_error": 13, "message": "Function Not Found"}
    calls["nvmlDeviceGetMemoryInfo(0)"] = {"total": 81559 * 2**20, "free": 61263 * 2**20, "used": 20296 * 2**20}
    (g,) = read({**rec, "calls": calls}).gpus
    assert (g.memory_used_mib, g.memory_total_mib) == (20296, 81559)


def test_no_driver_is_a_state_not_an_error():
    r = read(recording("no-driver"))
    assert r.state == "no_driver" and "no NVIDIA driver on this node" in r.reason and r.gpus == ()


def test_driver_errors_other_than_missing_are_driver_error():
    r = read({"calls": {"nvmlInit()": {"nvml_error": 18, "message": "RM has detected an NVML/RM version mismatch."}}})
    assert r.state == "driver_error" and "version mismatch" in r.reason
    r = read({"calls": {"nvmlInit()": None, "nvmlDeviceGetCount()": {"nvml_error": 999}}})
    assert r.state == "driver_error"


def test_zero_gpus_with_a_driver_is_ok_and_says_so():
    r = read({"calls": {"nvmlInit()": None, "nvmlDeviceGetCount()": 0, "nvmlSystemGetDriverVersion()": "550.1"}})
    assert (r.state, r.gpus, r.driver_version) == ("ok", (), "550.1") and "no GPU" in r.reason


def test_real_pynvml_here_reports_no_driver():
    r = nvml.read()  # this machine: pynvml installed, no libnvidia-ml
    assert r.state == "no_driver" and "NVML Shared Library Not Found" in r.reason


def test_recorder_records_what_it_replays():
    original = recording("dual-rtx-a5000")
    rec = nvml_replay.Recorder(nvml_replay.RecordedSource(original))
    first = nvml.read(rec, env={})
    again = nvml.read(nvml_replay.RecordedSource({"calls": rec.calls, "processes": rec.processes}), env={})
    assert first == again
    assert set(rec.calls) <= set(original["calls"]) | {"nvmlSystemGetNVMLVersion()"}


def test_recorder_records_a_failed_init():
    rec = nvml_replay.Recorder(nvml.LiveSource())
    assert nvml.read(rec).state == "no_driver"
    assert rec.calls == {"nvmlInit()": {"nvml_error": 12, "message": "NVML Shared Library Not Found"}}


def test_process_info_from_proc():
    user, command = nvml.process_info(os.getpid())
    assert user == "root" or user  # whoever runs the tests
    assert "pytest" in command or "python" in command
    assert nvml.process_info(2**22 + 12345) == (None, None)


@pytest.mark.parametrize("value,expected", [(b"NVIDIA A100", "NVIDIA A100"), ([1, b"x"], [1, "x"]), (7, 7)])
def test_plain_values(value, expected):
    assert nvml._plain(value) == expected


# A pynvml with the real module's call shapes (device functions take a handle, not an index; the v2 memory struct
# is asked for with version=) that answers from a recording: LiveSource's own dispatch, run on real readings.
RECORDED_PYNVML = '''
import json, os
_calls = json.load(open(os.environ["RECORDING"]))["calls"]
nvmlMemory_v2 = "v2"
class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(f"NVML error {value}")
        self.value = value
class _Handle:
    def __init__(self, index):
        self.index = index
def _answer(key):
    if key not in _calls:
        raise NVMLError(13)  # NVML_ERROR_FUNCTION_NOT_FOUND
    value = _calls[key]
    if isinstance(value, dict) and "nvml_error" in value:
        raise NVMLError(value["nvml_error"])
    return value
def nvmlInit():
    return _answer("nvmlInit()")
def nvmlShutdown():
    return None
def nvmlDeviceGetHandleByIndex(index):
    if not isinstance(index, int):
        raise TypeError(f"an index, not {index!r}")
    return _Handle(index)
def nvmlDeviceGetMemoryInfo(handle, version=None):
    assert version == nvmlMemory_v2, version
    return _answer(f"nvmlDeviceGetMemoryInfo_v2({handle.index})")
def __getattr__(fn):
    def call(*args):
        if fn.startswith("nvmlDevice") and fn != "nvmlDeviceGetCount":
            handle, *rest = args
            if not isinstance(handle, _Handle):
                raise TypeError(f"{fn} wants a device handle first, got {handle!r}")
            args = (handle.index, *rest)
        return _answer(f"{fn}({','.join(str(a) for a in args)})")
    return call
'''


@pytest.mark.parametrize("name", ["dual-rtx-a5000", "h100-80gb-hbm3-load", "a100-sxm4-80gb-mig",
                                  "h100-80gb-hbm3-recorded-busy", "h200-recorded-busy"])
def test_the_live_source_reads_a_recording_through_pynvml_call_shapes(tmp_path, name):
    (tmp_path / "pynvml.py").write_text(RECORDED_PYNVML)
    code = ("import json; from dataclasses import asdict; from cockpit import nvml; "
            "print(json.dumps(asdict(nvml.read(nvml.LiveSource(), env={}))))")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}", "RECORDING": str(FIXTURES / f"{name}.json")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    live = json.loads(done.stdout)
    replayed = json.loads(json.dumps(asdict(read(recording(name)))))
    assert live["state"] == "ok" and live["gpus"], live
    for g_live, g_rec in zip(live["gpus"], replayed["gpus"], strict=True):
        g_live.pop("processes", None), g_rec.pop("processes", None)  # users and commands: from this machine's /proc
        assert g_live == g_rec
