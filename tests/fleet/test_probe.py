"""cockpit.node.probe and cockpit.node.gpus: the JSON the probe prints, --watch streaming and poking, and the
nvidia-smi fallback parsed on real nvidia-smi output (tests/fixtures/nvidia-smi/, sources in its README.md)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time

import pytest
from helpers import REPO

from cockpit.node import gpus, ifaces, probe

SMI = REPO / "tests" / "fixtures" / "nvidia-smi"


def run_probe(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit.node.probe", *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO, **kw)


def test_one_shot_report():
    r = run_probe("--port", "29500", "--port", "1")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 1
    rep = json.loads(lines[0])
    assert rep["probe"] == probe.PROBE_VERSION and rep["hostname"] == socket.gethostname()
    assert rep["state"] == "no_driver" and rep["gpus"] == []
    assert any(i["name"] == "lo" and "127.0.0.1/8" in i["ipv4"] for i in rep["interfaces"])
    assert rep["versions"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert set(rep["ports"]) == {"29500", "1"}


def test_the_probe_never_imports_torch():
    wrapper = ("import atexit, runpy, sys\n"
               "atexit.register(lambda: print('TORCH', 'torch' in sys.modules, file=sys.stderr))\n"
               "sys.argv = ['probe']\nrunpy.run_module('cockpit.node.probe', run_name='__main__')\n")
    r = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert "TORCH False" in r.stderr


def test_watch_streams_and_answers_a_poke_at_once():
    proc = subprocess.Popen([sys.executable, "-m", "cockpit.node.probe", "--watch", "30"], cwd=REPO, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        first = json.loads(proc.stdout.readline())
        t0 = time.monotonic()
        proc.stdin.write("\n")
        proc.stdin.flush()
        second = json.loads(proc.stdout.readline())
        assert time.monotonic() - t0 < 15  # at once, not at the 30 s interval
        assert second["time"] > first["time"]
        assert "interfaces" in first and "versions" in first
        assert "interfaces" not in second and "versions" not in second  # unchanged: left out
        assert second["state"] == first["state"] and "ports" in second
    finally:
        proc.kill()
        proc.wait()


def test_watch_interval_and_exit_when_stdout_closes():
    launched = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "cockpit.node.probe", "--watch", "0.2"], cwd=REPO, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    times = [json.loads(proc.stdout.readline())["time"] for _ in range(6)]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    # The probe keeps a fixed clock (line k is due k x 0.2 s after its start; a late line does not delay the
    # next), so one gap may be short after a late line (0.11 s under load): no line comes before it is due,
    # and none is stuck.
    assert all(t >= launched + k * 0.2 for k, t in enumerate(times)), (launched, times)
    assert len(gaps) == 5 and all(0 < g < 10 for g in gaps), gaps
    proc.stdout.close()  # the reader went: the next write fails and the probe exits
    assert proc.wait(timeout=5) == 0


def test_watch_ends_at_once_when_stdin_closes_whatever_the_interval():
    proc = subprocess.Popen([sys.executable, "-m", "cockpit.node.probe", "--watch", "3600"], cwd=REPO, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    json.loads(proc.stdout.readline())
    t0 = time.monotonic()
    proc.stdin.close()  # what a closed SSH channel looks like to the command
    assert proc.wait(timeout=60) == 0
    assert time.monotonic() - t0 < 60  # not the 3600 s interval


def test_port_free():
    with socket.socket() as s:
        s.bind(("", 0))
        s.listen()
        busy = s.getsockname()[1]
        assert probe.port_free(busy) is False
    assert probe.port_free(busy) is True


def test_versions_read_torch_without_importing_it(tmp_path, monkeypatch):
    pkg = tmp_path / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise RuntimeError('the probe must not import torch')\n")
    (pkg / "version.py").write_text("from typing import Optional\n__version__ = '2.5.1+cu121'\n"
                                    "cuda: Optional[str] = '12.1'\ngit_version = 'abc'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    v = probe.versions()
    assert (v["torch"], v["torch_cuda"]) == ("2.5.1+cu121", "12.1")


def test_interfaces_fallback_without_iproute2():
    names = {i["name"]: i for i in ifaces.sysfs_interfaces()}
    assert names["lo"]["loopback"] and names["lo"]["ipv4"] == ["127.0.0.1"]
    assert {i["name"] for i in ifaces.interfaces()} == set(names)


# -- nvidia-smi ------------------------------------------------------------------------------------------------

def test_real_query_gpu_csv_with_header_and_units():
    """The real `nvidia-smi --query-gpu=<all fields> --format=csv` of an H100 under load: columns by name."""
    text, apps = (SMI / "h100-load-query-gpu.csv").read_text(), (SMI / "h100-load-query-compute-apps.csv").read_text()
    r = gpus.report_from_smi(0, text, apps)
    assert (r.state, r.source, r.driver_version) == ("ok", "nvidia-smi", "590.48.01")
    (g,) = r.gpus
    assert (g.index, g.name, g.pci_bus_id, g.uuid) == (0, "NVIDIA H100 80GB HBM3", "00000000:00:09.0",
                                                        "GPU-00000000-0000-0000-0000-000000000000")
    assert (g.memory_used_mib, g.memory_total_mib, g.utilization_gpu, g.utilization_memory) == (19818, 81559, 100, 11)
    assert (g.temperature_c, g.power_draw_w, g.power_limit_w) == (59, 631.95, 700.0)
    assert [(p.pid, p.used_memory_mib, p.command) for p in g.processes] == [
        (11327, 2566, "/root/tools/memhog"), (11328, 1542, "/root/tools/memhog"), (11345, 15690, "./gpu_burn")]


def test_real_empty_compute_apps():
    text = (SMI / "h100-load-query-gpu.csv").read_text()
    r = gpus.report_from_smi(0, text, (SMI / "h100-idle-query-compute-apps.csv").read_text())
    assert r.gpus[0].processes == ()


def test_noheader_nounits_form_cockpit_asks_for():
    # The same H100 reading, as `--format=csv,noheader,nounits` prints the columns cockpit queries (derived from
    # the real row above: nounits drops " MiB", " %", " W"; "[N/A]" stays).
    line = "0, 00000000:00:09.0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA H100 80GB HBM3, 19818, 81559, " \
           "100, 11, 59, 631.95, 700.00, 590.48.01\n1, 00000000:0A:00.0, GPU-1, NVIDIA H100 80GB HBM3, 0, 81559, " \
           "[N/A], [N/A], [N/A], [N/A], [N/A], 590.48.01\n"
    r = gpus.report_from_smi(0, line, "00000000:0A:00.0, 4242, python, [N/A]\n")
    assert [g.pci_bus_id for g in r.gpus] == ["00000000:00:09.0", "00000000:0A:00.0"]
    assert r.gpus[1].utilization_gpu is None and r.gpus[1].power_draw_w is None
    assert [(p.pid, p.used_memory_mib) for p in r.gpus[1].processes] == [(4242, None)]


@pytest.mark.parametrize("name,status,state", [("no-driver.txt", 9, "no_driver"),
                                               ("version-mismatch.txt", 18, "driver_error")])
def test_real_nvidia_smi_failures(name, status, state):
    text = (SMI / name).read_text()
    r = gpus.report_from_smi(status, text)
    assert r.state == state and text.strip()[:40] in r.reason


def test_fallback_script_for_real_on_a_node_without_nvidia_smi():
    out = subprocess.run(["sh", "-c", probe.fallback_script()], capture_output=True, text=True, timeout=30).stdout
    rep = probe.parse_fallback(out)
    assert rep["hostname"] == socket.gethostname()
    assert rep["state"] == "no_driver" and "not found" in rep["reason"]
    assert rep["interfaces"] is None and rep["source"] == "nvidia-smi"


def test_fallback_script_watch_form_repeats_the_block():
    """The watch form prints one block after another: three blocks, each a whole report, while it still runs
    (a form that printed once and exited ends the output early: the test fails, it does not spin)."""
    script = probe.fallback_script(watch=0.1)
    proc = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True)
    blocks, lines = [], []
    timer = threading.Timer(30, proc.kill)  # a stuck script: the read below ends, and the asserts say so
    timer.start()
    try:
        while len(blocks) < 3:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.strip() == "@@end":
                blocks.append("".join(lines))
                lines = []
        still_running = proc.poll() is None
    finally:
        timer.cancel()
        proc.kill()
        proc.wait()
    assert len(blocks) == 3, f"the watch form ended after {len(blocks)} block(s)"
    assert still_running
    for block in blocks:
        assert probe.parse_fallback(block)["hostname"] == socket.gethostname()


def sysfs_from_recording(root, name: str):
    """/sys/class/net rebuilt from a recorded layout (tests/fixtures/sysnet/): links into devices/, with
    device / bridge / brport where the real one had them."""
    net = root / "class" / "net"
    net.mkdir(parents=True)
    for line in (REPO / "tests" / "fixtures" / "sysnet" / name).read_text().splitlines():
        ifname, target, *flags = line.split()
        real = root / target.replace("../../", "")
        real.mkdir(parents=True)
        for flag in flags:
            key, value = flag.split("=")
            if value == "1":
                (real / key).mkdir()
        (net / ifname).symlink_to(real)
    return net


def test_virtual_interfaces_are_told_by_sysfs_not_by_name(tmp_path):
    """A NIC has a device under /sys/class/net/X; a bridge (cpmn1854), its veth ports, ifb and lo do not."""
    net = sysfs_from_recording(tmp_path, "host-bridge-over-eth0.txt")
    assert ifaces.is_virtual("eth0", net) is False
    assert [ifaces.is_virtual(n, net) for n in ("cpmn1854", "cpmn1854v0", "ifb0", "lo")] == [True] * 4
    assert ifaces.is_virtual("ib0", net) is None  # not listed: unknown, not a guess


def test_the_probe_says_which_interfaces_are_virtual():
    found = {i["name"]: i for i in ifaces.interfaces()}
    assert found["lo"]["virtual"] is True
    assert all(isinstance(i["virtual"], bool) for i in found.values())
