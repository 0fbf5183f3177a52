"""`cockpit gpus` and `cockpit doctor` (cockpit.cli.gpus, cockpit.cli.doctor), driven through their argparse
registration (cockpit.cli.fleet) exactly as cockpit.cli.main wires them, against this machine and the loopback
SSH nodes."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import pytest
from fleet.conftest import NODES, REFUSED
from fleet.nodedata import node_from_fixture
from helpers import REPO, cockpit_env

from cockpit.cli import fleet as cli_fleet
from cockpit.cli import gpus as cli_gpus
from cockpit.cli.main import UsageError
from cockpit.fleet.records import NodeReport

HARNESS = """
import argparse, json, sys
from cockpit.cli.fleet import add_fleet_commands
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
    # seconds per node that a real login and probe meet on a loaded 2-core machine (5 did not)
    return [*argv, "--ssh-config", str(lab.world.ssh_config), "--python", lab.python, "--timeout", "30"]


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
        cli_gpus.cmd_gpus(parse("gpus", "--nodes", "n[1-"))


def test_gpus_watch_json_streams_one_object_per_refresh(lab):
    argv = ssh_args(lab, "gpus", "--nodes", "127.0.1.[6-7]", "--json", "--watch", "0.3")
    proc = subprocess.Popen([sys.executable, "-c", HARNESS, *argv], cwd=REPO, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    def frame() -> list[str]:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        frames.append(json.loads(line))
        return [n["state"] for n in frames[-1]["nodes"]]

    frames: list[dict] = []
    try:
        # The watch prints its first frame after at most 5 s, whether every node answered by then or not (under
        # load, a node may still be connecting): wait for both to report, then for two more frames.
        deadline = time.monotonic() + 60
        while (states := frame()) != ["no_driver"] * 2:
            assert set(states) <= {"connecting", "no_driver"} and time.monotonic() < deadline, frames
        assert frame() == frame() == ["no_driver"] * 2, frames
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    times = [f["time"] for f in frames]
    assert times == sorted(times) and len(set(times)) == len(times), times


def test_doctor_over_ssh(lab, capsys):
    args = parse(*ssh_args(lab, "doctor", "--nodes", "127.0.1.[1-2]"))
    assert args.func(args) == 0  # reachable, same (zero) GPU count; no driver is only a warning
    out = capsys.readouterr().out
    assert "ok    reachable: 2/2 nodes" in out and "warn  NVIDIA driver" in out
    args = parse(*ssh_args(lab, "doctor", "--nodes", "127.0.1.1,127.0.1.20", "--json"))
    assert args.func(args) == 1
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["reachable"]["level"] == "FAIL" and "127.0.1.20: unreachable" in checks["reachable"]["detail"]


# -- pure parts: the table, on recorded GPU readings ---------------------------------------------

def test_table_lists_gpus_in_order_with_processes():
    text = cli_gpus.render_table([node_from_fixture("gpu01", "dual-rtx-a5000"),
                                   NodeReport("gpu02", "timeout", "no answer within 20 s")])
    lines = text.splitlines()
    assert lines[0] == "gpu01: ok, driver 590.44.01, CUDA 13.1, 2 GPUs"
    assert lines[2].split()[:5] == ["0", "NVIDIA", "RTX", "A5000", "0%"]
    assert "22437 / 24564 MiB" in lines[2] and "13C" in lines[2] and "6 / 230 W" in lines[2]
    assert "pid 100477" in lines[3] and "22430 MiB" in lines[3] and "llama-server" in lines[3]
    assert lines[4].split()[0] == "1"
    assert any(line.startswith("  warning: CUDA_DEVICE_ORDER") for line in lines)
    assert lines[-1] == "gpu02: timeout: no answer within 20 s"


def test_table_shows_unknown_fields_as_dashes():
    text = cli_gpus.render_table([node_from_fixture("a100", "a100-sxm4-80gb-mig")])
    assert text.splitlines()[2].split()[3] == "-"  # MIG: utilization not supported


def test_gpus_cluster_without_a_cluster_file_or_slurm_says_what_to_do(tmp_path):
    """A real `cockpit gpus --cluster` with no cluster file and an sinfo that cannot find its controller."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text("#!/bin/sh\necho 'sinfo: error: fetch_config: DNS SRV lookup failed' >&2\n"
                                   "echo 'sinfo: fatal: Could not establish a configuration source' >&2\nexit 1\n")
    (bin_dir / "sinfo").chmod(0o755)
    env = cockpit_env(PATH=f"{bin_dir}:{os.environ['PATH']}", XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    r = subprocess.run([sys.executable, "-m", "cockpit", "gpus", "--cluster"], capture_output=True, text=True,
                       cwd=REPO, env=env, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr == ("cockpit: cannot ask Slurm for its nodes (Slurm is not configured here?): sinfo: fatal: "
                        f"Could not establish a configuration source (hint: list the nodes in {tmp_path}/cfg/cockpit/"
                        "cluster.yaml, e.g. hosts: [gpu[01-04]], or pass --nodes)\n")
