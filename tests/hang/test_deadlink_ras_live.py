"""deadlink (issue 31): NCCL's RAS asked live (cockpit.node.rasask) against a replay server that speaks the RAS
client protocol and answers with the recorded reports (tests/hang/rasreplay.py, tests/fixtures/deadlink/ras):
JSON (NCCL >= 2.28.7), the text fallback (older NCCL refuses SET FORMAT), a refused connection (no RAS: quiet),
a server that stalls (bounded time), an oversized answer (bounded memory); then the record through the node
record's parser (cockpit.hang.transport_raw) and a real local gather (cockpit.hang.gather.local_link)."""

from __future__ import annotations

import os
import socket
import time

from hang.rasreplay import RasReplay
from helpers import REPO

from cockpit.hang.gather import local_link, run_ras_address
from cockpit.hang.linkwords import link_lines
from cockpit.hang.rasread import ras_address
from cockpit.hang.transport_raw import node_transport
from cockpit.node.rasask import RAS_DEFAULT_ADDR, ras_ask, ras_target

RAS = REPO / "tests" / "fixtures" / "deadlink" / "ras"
H100_TXT = (RAS / "h100-2.28.9-1rank-healthy.txt").read_text()
H100_JSON = (RAS / "h100-2.28.9-1rank-healthy.json").read_text()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_deadlink_ras_ask_json_from_a_recorded_h100_report():
    with RasReplay(H100_TXT, H100_JSON) as server:
        got = ras_ask(server.addr)
    assert (got["state"], got["format"], got["text"], got["truncated"], got["note"]) == (
        "answered", "json", H100_JSON, False, None)
    assert server.commands == ["CLIENT PROTOCOL 2", "TIMEOUT 2", "SET FORMAT json", "VERBOSE STATUS"]
    node = node_transport({"host": "gpu0", "ras": got}, "test")
    assert node.ras is not None and node.ras.report is not None
    assert (node.ras.state, node.ras.fmt, node.ras.report.version, node.ras.report.ok) == ("answered", "json",
                                                                                           "2.28.9", True)


def test_deadlink_ras_ask_falls_back_to_text_where_set_format_is_refused():
    """NCCL < 2.28.7 answers SET FORMAT with "ERROR: Unknown command" and keeps the connection: text follows."""
    with RasReplay(H100_TXT, None) as server:
        got = ras_ask(server.addr)
    assert (got["state"], got["format"], got["text"]) == ("answered", "text", H100_TXT)
    node = node_transport({"host": "gpu0", "ras": got}, "test")
    assert node.ras is not None and node.ras.report is not None and node.ras.report.comm_states == (
        ("group 0", "RUNNING OK"),)


def test_deadlink_ras_ask_refused_is_no_ras_quietly():
    got = ras_ask(f"127.0.0.1:{_free_port()}")
    assert got["state"] == "none" and got["text"] is None and "nothing listens" in got["note"]
    node = node_transport({"host": "gpu0", "ras": got}, "test")
    assert node.ras is not None and (node.ras.state, node.ras.report) == ("none", None)


def test_deadlink_ras_ask_a_stalled_server_is_bounded_in_time():
    with RasReplay(H100_TXT, H100_JSON, mode="stall") as server:
        began = time.monotonic()
        got = ras_ask(server.addr, total_s=0.5)
        took = time.monotonic() - began
    assert got["state"] == "error" and got["note"] == "RAS did not finish its answer in time"
    assert took < 5.0, took  # 0.5 s asked; the margin is for a loaded machine, not a speed target
    assert server.commands[0] == "CLIENT PROTOCOL 2"


def test_deadlink_ras_ask_keeps_what_came_before_a_stall():
    with RasReplay(H100_TXT, H100_JSON, mode="partial") as server:
        got = ras_ask(server.addr, total_s=0.5)
    assert got["state"] == "error" and got["text"] == H100_JSON[:len(H100_JSON) // 2]
    node = node_transport({"host": "gpu0", "ras": got}, "test")
    assert node.ras is not None and node.ras.state == "error" and node.ras.report is None  # cut JSON: not read


def test_deadlink_ras_ask_an_oversized_answer_is_bounded_in_memory():
    cap = 256 << 10
    with RasReplay(H100_TXT, H100_JSON, mode="flood", flood_bytes=64 << 20) as server:
        got = ras_ask(server.addr, cap=cap)
    assert got["truncated"] and len(got["text"]) == cap and got["note"] == f"answer cut at {cap} bytes"
    assert server.sent < 64 << 20  # the client stopped reading: not the whole 64 MiB went over
    node = node_transport({"host": "gpu0", "ras": got}, "test")
    assert node.ras is not None and node.ras.state == "error" and node.ras.report is None


def test_deadlink_ras_ask_something_else_listening_is_said():
    with RasReplay(H100_TXT, H100_JSON, mode="http") as server:
        got = ras_ask(server.addr)
    assert got["state"] == "error" and got["note"] == "not NCCL's RAS service: no SERVER PROTOCOL line"


def test_deadlink_ras_address_from_the_job():
    """nccl jobs only; the job's NCCL_RAS_ADDR (the shell's last export wins), else NCCL's default."""
    assert ras_address("export COCKPIT_PG_BACKEND=nccl\n") == RAS_DEFAULT_ADDR == "localhost:28028"
    assert ras_address("export COCKPIT_PG_BACKEND=nccl\nexport NCCL_RAS_ADDR='10.0.0.1:29000'\n"
                       "export NCCL_RAS_ADDR=127.0.0.1:28045\n") == "127.0.0.1:28045"
    assert ras_address("export COCKPIT_PG_BACKEND=gloo\nexport NCCL_RAS_ADDR=127.0.0.1:28045\n") is None
    assert ras_address("export COCKPIT_PG_BACKEND=nccl\nexport NCCL_RAS_ENABLE=0\n") is None
    assert ras_target({"COCKPIT_PG_BACKEND": "nccl"}) == RAS_DEFAULT_ADDR
    assert ras_target({"COCKPIT_PG_BACKEND": "nccl", "NCCL_RAS_ADDR": "127.0.0.1:1"}) == "127.0.0.1:1"
    assert ras_target({"COCKPIT_PG_BACKEND": "gloo"}) is None
    assert ras_target({"COCKPIT_PG_BACKEND": "nccl", "NCCL_RAS_ENABLE": "0"}) is None


def _run_dir(tmp_path, script: str):
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands" / "node-0.sh").write_text(script)
    return tmp_path


def test_deadlink_ras_local_gather_asks_the_jobs_ras_address(tmp_path):
    """The local gather (a local run's stacks): this process stands for the rank; its node script sets
    NCCL_RAS_ADDR to the replay server's address, which answers as NCCL would."""
    with RasReplay(H100_TXT, H100_JSON) as server:
        run_dir = _run_dir(tmp_path, f"export COCKPIT_PG_BACKEND=nccl\nexport NCCL_RAS_ADDR={server.addr}\n")
        assert run_ras_address(run_dir) == server.addr
        g = local_link(run_dir, {0: os.getpid()}, {0: "gpu0"}, ras=True)
    [node] = g.nodes
    assert node.ras is not None and node.ras.report is not None and node.ras.state == "answered"
    rows = [line for line in link_lines(g) if line.startswith("ras ")]
    assert len(rows) == 1 and rows[0].startswith("ras gpu0: NCCL 2.28.9 (json, ") and rows[0].endswith(
        " ms): RUNNING OK (1 communicator)"), rows


def test_deadlink_ras_local_gather_of_a_gloo_job_does_not_ask(tmp_path):
    with RasReplay(H100_TXT, H100_JSON) as server:
        run_dir = _run_dir(tmp_path, f"export COCKPIT_PG_BACKEND=gloo\nexport NCCL_RAS_ADDR={server.addr}\n")
        g = local_link(run_dir, {0: os.getpid()}, {0: "gpu0"}, ras=True)
        assert server.commands == [] and g.nodes[0].ras is None
    assert not [line for line in link_lines(g) if line.startswith("ras ")]


def test_deadlink_ras_local_gather_without_ras_listening_says_none(tmp_path):
    addr = f"127.0.0.1:{_free_port()}"
    g = local_link(_run_dir(tmp_path, f"export COCKPIT_PG_BACKEND=nccl\nexport NCCL_RAS_ADDR={addr}\n"),
                   {0: os.getpid()}, {0: "gpu0"}, ras=True)
    assert g.errors == () and g.nodes[0].answered and g.nodes[0].ras is not None
    assert [line for line in link_lines(g) if line.startswith("ras ")] == [
        f"ras gpu0: none at {addr}: nothing listens (no NCCL process on the node, or RAS off)"]


def test_deadlink_ras_ask_by_name_as_nccls_default_is_written():
    """NCCL's default is "localhost:28028", bound as the resolver gives it: asked by name, every address tried."""
    with RasReplay(H100_TXT, H100_JSON) as server:
        got = ras_ask(f"localhost:{server.port}")
    assert (got["state"], got["format"]) == ("answered", "json")
    bad = ras_ask("no-port-here")
    assert bad["state"] == "error" and "is not host:port" in bad["note"]
