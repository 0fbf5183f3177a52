"""`cockpit gpus` and `cockpit doctor` (cockpit.cli_fleet), driven through their argparse registration exactly as
cockpit.cli wires them, against this machine and the loopback SSH nodes."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest
from fleet.conftest import NODES, REFUSED
from helpers import REPO

from cockpit import cli_fleet, nvml
from cockpit.cli import UsageError

HARNESS = """
import argparse, json, sys
from cockpit.cli_fleet import add_fleet_commands
parser = argparse.ArgumentParser(prog="cockpit")
add_fleet_commands(parser.add_subparsers(dest="command"))
args = parser.parse_args(sys.argv[1:])
code = args.func(args)
print("LOADED=" + json.dumps([m for m in ("asyncssh", "pynvml", "torch", "textual") if m in sys.modules]),
      file=sys.stderr)
sys.exit(code)
"""


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="cockpit")
    cli_fleet.add_fleet_commands(parser.add_subparsers(dest="command"))
    return parser.parse_args(list(argv))


def ssh_args(lab, *argv: str) -> list[str]:
    return [*argv, "--ssh-config", str(lab.world.ssh_config), "--python", lab.python, "--timeout", "5"]


def harness(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", HARNESS, *argv], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout)


def test_local_gpus_uses_no_ssh_and_loads_no_asyncssh():
    r = harness("gpus", "--json")
    assert r.returncode == 1, r.stderr  # no driver here: nothing to show is a failure, and the JSON says why
    assert r.stderr.startswith("cockpit: no NVIDIA driver on this machine, so no GPUs to show (hint: ")
    (node,) = json.loads(r.stdout)["nodes"]
    assert node["host"] == "localhost" and node["state"] == "no_driver"
    assert json.loads(r.stderr.rsplit("LOADED=", 1)[1]) == []  # the probe ran in a subprocess


def test_gpus_json_over_ssh_reports_errors(lab, capsys):
    args = parse(*ssh_args(lab, "gpus", "--nodes", "127.0.1.[1-3],127.0.1.20", "--json"))
    assert args.func(args) == 1  # no node has GPUs (no driver on the loopback nodes, one unreachable)
    nodes = json.loads(capsys.readouterr().out)["nodes"]
    assert [(n["host"], n["state"]) for n in nodes] == [*((h, "no_driver") for h in NODES[:3]),
                                                        (REFUSED, "unreachable")]
    assert nodes[3]["reason"] == "connection refused on port " + str(lab.main.port)
    assert set(nodes[0]) >= {"host", "state", "reason", "gpus", "hostname", "interfaces", "versions"}


def test_gpus_table_over_ssh(lab, capsys):
    args = parse(*ssh_args(lab, "gpus", "--nodes", "127.0.1.1,127.0.1.20"))
    assert args.func(args) == 1
    captured = capsys.readouterr()
    assert captured.err == ("cockpit: no node reported its GPUs (1 no driver, 1 unreachable) (hint: each node's "
                            "line says why; check that ssh HOST works, or give --timeout, --python, --user)\n")
    out = captured.out.splitlines()
    assert out[0].startswith("127.0.1.1") and "no driver: no NVIDIA driver on this node" in out[0]
    assert out[1].startswith("127.0.1.20: unreachable: connection refused") and "hint:" in out[1]


def test_gpus_for_a_job(lab, tmp_path, capsys):
    job = tmp_path / "job.yaml"
    job.write_text("name: t\nscript: train.py\nlauncher: ssh\nnodes: [127.0.1.4, 127.0.1.5]\n")
    args = parse(*ssh_args(lab, "gpus", "--job", str(job), "--json"))
    assert args.func(args) == 1  # both answer, neither has a driver
    assert [n["host"] for n in json.loads(capsys.readouterr().out)["nodes"]] == ["127.0.1.4", "127.0.1.5"]


def test_bad_node_list_is_a_usage_error():
    with pytest.raises(UsageError, match="not a hostlist"):
        cli_fleet.cmd_gpus(parse("gpus", "--nodes", "n[1-"))


def test_gpus_watch_json_streams_one_object_per_refresh(lab):
    argv = ssh_args(lab, "gpus", "--nodes", "127.0.1.[6-7]", "--json", "--watch", "0.3")
    proc = subprocess.Popen([sys.executable, "-c", HARNESS, *argv], cwd=REPO, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        frames = [json.loads(proc.stdout.readline()) for _ in range(3)]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert all([n["state"] for n in f["nodes"]] == ["no_driver"] * 2 for f in frames)
    assert frames[0]["time"] < frames[1]["time"] < frames[2]["time"]


def test_doctor_over_ssh(lab, capsys):
    args = parse(*ssh_args(lab, "doctor", "--nodes", "127.0.1.[1-2]"))
    assert args.func(args) == 0  # reachable, same (zero) GPU count; no driver is only a warning
    out = capsys.readouterr().out
    assert "ok    reachable: 2/2 nodes" in out and "warn  NVIDIA driver" in out
    args = parse(*ssh_args(lab, "doctor", "--nodes", "127.0.1.1,127.0.1.20", "--json"))
    assert args.func(args) == 1
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["reachable"]["level"] == "FAIL" and "127.0.1.20: unreachable" in checks["reachable"]["detail"]


# -- pure parts: the table and the checks, on recorded GPU readings ---------------------------------------------

def node_from_fixture(host: str, name: str, **extra) -> dict:
    rec = json.loads((REPO / "tests" / "fixtures" / "nvml" / f"{name}.json").read_text())
    report = nvml.read(nvml.RecordedSource(rec), env={}).to_dict()
    versions = {"python": "3.11.7", "torch": "2.5.1", "torch_cuda": "12.1", "nccl": "2.21.5"}
    interfaces = [{"name": "lo", "up": True, "loopback": True, "ipv4": ["127.0.0.1/8"]},
                  {"name": "ib0", "up": True, "loopback": False, "ipv4": ["10.1.0.5/16"]}]
    return {"host": host, "hint": None, "updated": 0.0, "hostname": host, "interfaces": interfaces,
            "versions": versions, "ports": {"29500": True}, **report, **extra}


def test_table_lists_gpus_in_order_with_processes():
    text = cli_fleet.render_table([node_from_fixture("gpu01", "dual-rtx-a5000"),
                                   {"host": "gpu02", "state": "timeout", "reason": "no answer within 20 s",
                                    "hint": None, "gpus": []}])
    lines = text.splitlines()
    assert lines[0] == "gpu01: ok, driver 590.44.01, CUDA 13.1, 2 GPUs"
    assert lines[2].split()[:5] == ["0", "NVIDIA", "RTX", "A5000", "0%"]
    assert "22437 / 24564 MiB" in lines[2] and "13C" in lines[2] and "6 / 230 W" in lines[2]
    assert "pid 100477" in lines[3] and "22430 MiB" in lines[3] and "llama-server" in lines[3]
    assert lines[4].split()[0] == "1"
    assert any(line.startswith("  warning: CUDA_DEVICE_ORDER") for line in lines)
    assert lines[-1] == "gpu02: timeout: no answer within 20 s"


def test_table_shows_unknown_fields_as_dashes():
    text = cli_fleet.render_table([node_from_fixture("a100", "a100-sxm4-80gb-mig")])
    assert text.splitlines()[2].split()[3] == "-"  # MIG: utilization not supported


def test_checks_flag_a_gpu_count_mismatch_and_version_drift():
    a = node_from_fixture("gpu01", "dual-rtx-a5000")
    b = node_from_fixture("gpu02", "h100-80gb-hbm3-load")
    b["versions"] = {**b["versions"], "torch": "2.4.0"}
    checks = {c["name"]: c for c in cli_fleet.run_checks([a, b])}
    assert checks["GPU count"]["level"] == "FAIL" and "gpu01: 2, gpu02: 1" in checks["GPU count"]["detail"]
    assert checks["torch version"]["level"] == "FAIL"
    assert checks["driver version"]["level"] == "warn"
    assert checks["network interface"]["detail"].startswith("ib0 on every node")
    assert checks["GPUs idle"]["level"] == "warn"
    assert checks["GPU order"]["level"] == "warn"


def test_checks_pass_for_a_uniform_fleet():
    nodes = [node_from_fixture(f"gpu0{i}", "dual-rtx-a5000", warnings=[]) for i in (1, 2)]
    for n in nodes:
        for g in n["gpus"]:
            g["processes"] = []
    assert {c["level"] for c in cli_fleet.run_checks(nodes)} == {"ok"}


def test_checks_say_unknown_not_ok_when_no_node_answered():
    down = [{"host": h, "state": "unreachable", "reason": "connection refused on port 22", "hint": None, "gpus": []}
            for h in ("gpu01", "gpu02")]
    checks = cli_fleet.run_checks(down)
    assert checks[0]["name"] == "reachable" and checks[0]["level"] == "FAIL"
    assert {c["level"] for c in checks[1:]} == {"warn"}
    assert all(c["detail"] == "unknown (no node answered)" for c in checks[1:])
    assert {"GPU count", "python version", "GPUs idle"} <= {c["name"] for c in checks}
    assert cli_fleet.no_gpus_reason(down).startswith("no node reported its GPUs (2 unreachable) (hint: ")


def test_checks_say_unknown_when_no_node_reported_a_version():
    node = node_from_fixture("gpu01", "dual-rtx-a5000", warnings=[])
    node["versions"] = {}
    checks = {c["name"]: c for c in cli_fleet.run_checks([node])}
    assert checks["python version"] == {"name": "python version", "level": "warn",
                                        "detail": "unknown (no node reported it)"}


def test_gpus_cluster_without_a_cluster_file_or_slurm_says_what_to_do(tmp_path):
    """A real `cockpit gpus --cluster` with no cluster file and an sinfo that cannot find its controller."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text("#!/bin/sh\necho 'sinfo: error: fetch_config: DNS SRV lookup failed' >&2\n"
                                   "echo 'sinfo: fatal: Could not establish a configuration source' >&2\nexit 1\n")
    (bin_dir / "sinfo").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    r = subprocess.run([sys.executable, "-m", "cockpit", "gpus", "--cluster"], capture_output=True, text=True,
                       cwd=REPO, env=env, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr == ("cockpit: cannot ask Slurm for its nodes (Slurm is not configured here?): sinfo: fatal: "
                        f"Could not establish a configuration source (hint: list the nodes in {tmp_path}/cfg/cockpit/"
                        "cluster.yaml, e.g. hosts: [gpu[01-04]], or pass --nodes)\n")
