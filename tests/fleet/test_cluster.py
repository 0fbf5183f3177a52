"""The cluster file (cockpit.fleet.cluster): read into a Cluster, and every mistake in it named by
`path:line:col: field: what (hint: ...)` through the real `cockpit gpus --cluster FILE` / `cockpit doctor`,
exit status 2, no traceback."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from helpers import REPO, cockpit_env

from cockpit.fleet import cluster


def cockpit(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *argv], capture_output=True, text=True, cwd=REPO,
                          env=cockpit_env(**(env or {})), timeout=60)


def test_cluster_file(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text("hosts: ['gpu[01-03]', login1]\npartition: a100\npython: /opt/py/bin/python3\n"
                    "ssh: {user: alice, port: 2222, identity: ~/.ssh/k, connect_timeout: 4, keepalive: 2}\n")
    c = cluster.load_cluster(path)
    assert c.hosts == ("gpu01", "gpu02", "gpu03", "login1")
    assert (c.partition, c.python, c.path) == ("a100", "/opt/py/bin/python3", str(path))
    assert (c.ssh.user, c.ssh.port, c.ssh.identity, c.ssh.connect_timeout, c.ssh.keepalive_interval) == \
        ("alice", 2222, ("~/.ssh/k",), 4.0, 2.0)
    path.write_text("hosts: [a]\nssh: {usr: alice}\n")
    with pytest.raises(cluster.NodesError, match=r"cluster.yaml:2:7: ssh.usr: unknown ssh setting"):
        cluster.load_cluster(path)
    path.write_text("hosts: a\n")
    with pytest.raises(cluster.NodesError, match=r"cluster.yaml:1:1: hosts: must be a list"):
        cluster.load_cluster(path)


def test_default_cluster_file_is_optional(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert cluster.load_cluster() is None
    (tmp_path / "cockpit").mkdir()
    (tmp_path / "cockpit" / "cluster.yaml").write_text("hosts: [n1]\n")
    assert cluster.load_cluster().hosts == ("n1",)


BAD = {
    "ssh-key": ("hosts: [a]\nssh:\n  usr: alice\n",
                ["{f}:3:3: ssh.usr: unknown ssh setting (hint: known: user, port, identity, config, known_hosts, "
                 "connect_timeout, keepalive, trust_new_hosts)"]),
    "port": ("hosts: [a]\nssh:\n  user: alice\n  port: \"x\"\n",
             ["{f}:4:3: ssh.port: must be a port number, not the text 'x' (hint: e.g. port: 22)"]),
    "hosts": ("python: python3\nhosts: gpu01\n",
              ["{f}:2:1: hosts: must be a list, not the text 'gpu01' (hint: write it in brackets: "
               "hosts: [login1, gpu[01-16]])"]),
    "syntax": ("hosts: [a\nssh: {}\n",
               ["{f}:2:{col}: YAML syntax error: {yaml} (hint: check indentation and quoting on this line)"]),
    "several": ("hosts: [n1, \"n[3-1]\"]\nssh: {port: 0, trust_new_hosts: 1}\npartion: gpu\n",
                ["{f}:1:13: hosts[1]: [3-1]: range 3-1 runs backwards (hint: a range is written gpu[01-16] or "
                 "gpu[1,3,5-8])",
                 "{f}:2:7: ssh.port: port 0 is out of range (hint: a TCP port is 1 to 65535, ssh's is 22)",
                 "{f}:2:16: ssh.trust_new_hosts: must be true or false, not a number (hint: e.g. trust_new_hosts: "
                 "false)",
                 "{f}:3:1: partion: unknown setting (hint: known: hosts, ssh, python, partition)"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_gpus_names_where_the_cluster_file_is_wrong(tmp_path, case):
    text, lines = BAD[case]
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    r = cockpit("gpus", "--cluster", str(path), "--timeout", "2")
    assert (r.returncode, r.stdout) == (2, "")
    assert "Traceback" not in r.stderr
    # cockpit's own words around the YAML library's (its problem text and column vary with the version and
    # with libyaml, e.g. PyYAML 6.0.3 says "did not find expected ',' or ']'" at column 4)
    expected = "cockpit: " + "\n".join(lines).format(f=path, yaml="@YAML@", col="@COL@") + "\n"
    pattern = re.escape(expected).replace("@YAML@", r"[^\n]+").replace("@COL@", r"\d+")
    assert re.fullmatch(pattern, r.stderr), r.stderr


def test_billion_laughs_is_refused_where_it_starts(tmp_path):
    rows = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    rows += [f"{n}: &{n} [{', '.join(['*' + p] * 10)}]" for p, n in zip("abcdefg", "bcdefgh", strict=True)]
    path = tmp_path / "cluster.yaml"
    path.write_text("\n".join(rows) + "\n")
    r = cockpit("gpus", "--cluster", str(path))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"cockpit: {path}:5:8: e[0]: more than 20000 values once its YAML aliases are "
                               "expanded (hint: a cluster file is a few dozen settings")


def test_oversized_cluster_file_is_refused_unread(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text("# " + "x" * (2 << 20) + "\n")
    r = cockpit("gpus", "--cluster", str(path))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"cockpit: {path}: {path.stat().st_size} bytes is too large for a cluster file")


def test_doctor_names_where_the_default_cluster_file_is_wrong(tmp_path):
    """`cockpit doctor JOB.yaml` of an ssh job reads the default cluster file before any node is asked."""
    (tmp_path / "cfg" / "cockpit").mkdir(parents=True)
    (tmp_path / "cfg" / "cockpit" / "cluster.yaml").write_text("ssh:\n  port: yes\n")
    job = tmp_path / "job.yaml"
    job.write_text("name: t\nscript: train.py\nlauncher: ssh\nnodes: [n1]\n")
    r = cockpit("doctor", str(job), env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr == (f"cockpit: {tmp_path}/cfg/cockpit/cluster.yaml:2:3: ssh.port: must be a port number, "
                        "not true/false (hint: e.g. port: 22)\n")
