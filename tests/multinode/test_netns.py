"""The namespace lab's own hygiene: what a killed test run left behind is removed, and a new cluster never
takes a subnet that is in use here."""

from __future__ import annotations

import os
import subprocess

from multinode import netns


def _dead_tag() -> str:
    return next(str(t) for t in range(999999, 900000, -1) if not netns._alive(str(t)))


def ip(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *argv], capture_output=True, text=True)


def test_a_dead_runs_namespaces_and_links_are_removed_and_a_used_subnet_is_skipped():
    tag = _dead_tag()
    third = 20 + os.getpid() % 200
    try:
        assert ip("netns", "add", f"cpmn{tag}-node1").returncode == 0
        assert ip("link", "add", f"cpmn{tag}", "type", "bridge").returncode == 0
        assert ip("addr", "add", f"10.233.{third}.1/24", "dev", f"cpmn{tag}").returncode == 0
        assert netns._free_third(third) != third  # as a stale bridge, or another live run, holds it
        removed = netns.remove_stale()
        assert f"cpmn{tag}-node1" in removed and f"cpmn{tag}" in removed
        assert f"cpmn{tag}" not in ip("netns", "list").stdout + ip("-o", "link").stdout
        assert netns._free_third(third) == third or f"10.233.{third}." in ip("-4", "-o", "addr").stdout
    finally:
        ip("netns", "del", f"cpmn{tag}-node1")
        ip("link", "del", f"cpmn{tag}")


def test_a_live_runs_objects_are_left_alone():
    tag = str(os.getpid())[-6:]
    name = f"cpmn{tag}-keep"
    try:
        assert ip("netns", "add", name).returncode == 0
        assert name not in netns.remove_stale()
        assert name in ip("netns", "list").stdout
    finally:
        ip("netns", "del", name)
