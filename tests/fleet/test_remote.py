"""cockpit.remote against real processes: a local subprocess, and a real OpenSSH server on loopback."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from fleet.conftest import CHANGED_KEY, JUMPED, NODES, REFUSED, SILENT, UNKNOWN_KEY
from helpers import wait_for

from cockpit.remote import (
    AuthFailed,
    CommandFailed,
    HostKeyChanged,
    HostKeyUnknown,
    LocalRemote,
    RemoteError,
    RemotePool,
    SSHRemote,
    Timeout,
    Unreachable,
    detached_script,
)


def run(coro):
    return asyncio.run(coro)


def gone(pid: int) -> bool:
    """No such process, or only a zombie waiting for its (init) parent to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


# -- local -----------------------------------------------------------------------------------------------------

def test_local_run_list_and_shell():
    async def go():
        r = LocalRemote()
        a = await r.run(["printf", "%s|", "a b", "c"])
        b = await r.run("echo out; echo err >&2; exit 3")
        return a, b
    a, b = run(go())
    assert (a.exit_status, a.stdout) == (0, "a b|c|")
    assert (b.exit_status, b.stdout, b.stderr) == (3, "out\n", "err\n")


def test_local_run_timeout_kills_the_command(tmp_path):
    pid_file = tmp_path / "pid"

    async def go():
        return await LocalRemote().run(f"echo $$ > {pid_file}; exec sleep 30", timeout=0.3)
    t0 = time.monotonic()
    with pytest.raises(Timeout):
        run(go())
    assert time.monotonic() - t0 < 30  # cut short, not waited out
    pid = int(pid_file.read_text())
    wait_for(lambda: gone(pid), 10, "the timed-out command to be killed")


def test_local_missing_program_is_exit_127():
    r = run(LocalRemote().run(["/nonexistent/program"]))
    assert r.exit_status == 127 and "No such file" in r.stderr


def test_local_stream_lines_stdin_and_failure():
    async def go():
        s = await LocalRemote().stream("read x; echo got $x; echo two; echo oops >&2; exit 4")
        s.write("hello\n")
        lines = []
        with pytest.raises(CommandFailed) as info:
            async for line in s:
                lines.append(line)
        return lines, info.value
    lines, err = run(go())
    assert lines == ["got hello", "two"]
    assert err.result.exit_status == 4 and "oops" in str(err)


def test_detached_script_is_plain_shell():
    text = detached_script(["python3", "train.py", "--lr", "0.1 0.2"], "/tmp/r/log", cwd="/w d", env={"A": "x y"})
    assert "cd '/w d' || exit 97" in text
    assert "A='x y' setsid sh -c 'exec python3 train.py --lr '\"'\"'0.1 0.2'\"'\"''" in text
    assert text.endswith("echo $!")


def test_local_start_detached_and_signal(tmp_path):
    async def go():
        r = LocalRemote()
        return await r.start_detached(["sh", "-c", "echo started; exec sleep 30"], str(tmp_path / "logs" / "a.log"),
                                      cwd=str(tmp_path), env={"COCKPIT_X": "1"})
    pid = run(go())
    wait_for(lambda: (tmp_path / "logs" / "a.log").read_text() == "started\n", 10, "the command to start")
    pgid, sid = os.getpgid(pid), os.getsid(pid)
    sent = run(LocalRemote().signal(pid, signal.SIGTERM))
    again = run(LocalRemote().signal(99999999))
    assert pgid == pid == sid  # its own session and process group: signalling the group reaches all of it
    assert sent and not again
    wait_for(lambda: gone(pid), 10, "the signalled command to end")
    assert (tmp_path / "logs" / "a.log").read_text() == "started\n"


# -- ssh -------------------------------------------------------------------------------------------------------

def test_ssh_runs_as_the_test_user_honouring_ssh_config(lab):
    async def go():
        r = SSHRemote(NODES[0], lab.options())
        a = await r.run("id -un; echo $0", 10)
        b = await r.run(["printf", "%s|", "a b", "$HOME", "it's"], 10)
        c = await r.run("exit 7", 10)
        await r.close()
        return a, b, c
    a, b, c = run(go())
    assert a.stdout.split() == ["cockpit-test", "sh"]  # User from the config; a plain /bin/sh
    assert b.stdout == "a b|$HOME|it's|"  # a list is quoted for the remote shell
    assert c.exit_status == 7


def test_ssh_config_proxyjump(lab):
    async def go():
        r = SSHRemote(JUMPED, lab.options())
        try:
            return await r.run("echo $SSH_CONNECTION", 10)
        finally:
            await r.close()
    # The session's server side is 127.0.1.3, reached by a tunnel through 127.0.1.2 (so not from 127.0.1.x).
    assert run(go()).stdout.split()[2] == NODES[2]


def test_ssh_connection_is_persistent_and_shared(lab):
    async def go():
        r = SSHRemote(NODES[1], lab.options())
        await r.run("true", 10)
        first = r._conn
        results = await asyncio.gather(*(r.run(f"echo {i}", 10) for i in range(20)))
        await r.run("true", 10)
        same = r._conn is first
        await r.close()
        return results, same
    results, same = run(go())
    assert [x.stdout for x in results] == [f"{i}\n" for i in range(20)]
    assert same  # 22 commands, one connection (what it saves: tests/bench/bench_fleet.py measures)


def test_unknown_host_key_is_refused_with_how_to_trust_it(lab):
    with pytest.raises(HostKeyUnknown) as info:
        run(SSHRemote(UNKNOWN_KEY, lab.options()).run("true", 10))
    text = str(info.value)
    assert "unknown host key" in text and "ssh-keyscan -p" in text and "--trust-new-hosts" in text
    assert info.value.state == "host_key_unknown"


def test_changed_host_key_is_refused_loudly_even_with_trust_new_hosts(lab):
    for trust in (False, True):
        with pytest.raises(HostKeyChanged) as info:
            run(SSHRemote(CHANGED_KEY, lab.options(trust_new_hosts=trust)).run("true", 10))
        assert "HOST KEY CHANGED" in str(info.value) and "ssh-keygen -R" in str(info.value)


def test_trust_new_hosts_records_the_key_then_verifies_it(lab, fresh_known_hosts):
    options = lab.options(known_hosts=str(fresh_known_hosts), trust_new_hosts=True)
    r = run(SSHRemote(UNKNOWN_KEY, options).run("echo in", 10))
    assert r.stdout == "in\n"
    recorded = fresh_known_hosts.read_text()
    assert recorded.startswith(f"[{UNKNOWN_KEY}]:{lab.main.port} ssh-ed25519 ")
    assert recorded.split()[2] == lab.main.host_key_line.split()[1]
    # Without the option, the recorded key now verifies the host.
    r = run(SSHRemote(UNKNOWN_KEY, lab.options(known_hosts=str(fresh_known_hosts))).run("echo again", 10))
    assert r.stdout == "again\n"


def test_bad_client_key_is_auth_failed(lab):
    options = lab.options(identity=(str(lab.world.bad_key),), agent=False)
    with pytest.raises(AuthFailed) as info:
        run(SSHRemote(NODES[0], options).run("true", 10))
    assert "authentication failed" in str(info.value) and "authorized_keys" in str(info.value)


def test_a_missing_key_file_is_a_clear_error(lab):
    options = lab.options(identity=(str(lab.world.root / "no-such-key"),))
    with pytest.raises(RemoteError) as info:
        run(SSHRemote(NODES[0], options).run("true", 10))
    assert "cannot use the SSH settings" in str(info.value) and "IdentityFile" in info.value.hint


def test_refused_connection_is_unreachable(lab):
    t0 = time.monotonic()
    with pytest.raises(Unreachable) as info:
        run(SSHRemote(REFUSED, lab.options(connect_timeout=30.0)).run("true", 60))
    assert "connection refused" in str(info.value)
    assert time.monotonic() - t0 < 30  # said at once, not after waiting out the connect timeout


def test_a_server_that_never_speaks_times_out_on_time(lab):
    t0 = time.monotonic()
    with pytest.raises(Timeout) as info:
        run(SSHRemote(SILENT, lab.options(connect_timeout=1.0)).run("true", 10))
    assert "no SSH answer within 1 s (connect timeout)" in str(info.value)
    took = time.monotonic() - t0
    assert 0.9 < took < 10, took  # the connect timeout ended it, not the command's 10 s


def test_ssh_command_timeout(lab):
    async def go():
        r = SSHRemote(NODES[2], lab.options())
        try:
            await r.run("sleep 20", 0.5)
        finally:
            await r.close()
    t0 = time.monotonic()
    with pytest.raises(Timeout):
        run(go())
    assert time.monotonic() - t0 < 20  # cut short, not waited out


def test_ssh_stream_with_stdin_and_exit_status(lab):
    async def go():
        r = SSHRemote(NODES[3], lab.options())
        s = await r.stream("read a; echo got $a; read b; echo got $b; echo bye >&2; exit 5")
        s.write("one\n")
        s.write("two\n")
        lines = []
        with pytest.raises(CommandFailed) as info:
            async for line in s:
                lines.append(line)
        await r.close()
        return lines, info.value
    lines, err = run(go())
    assert lines == ["got one", "got two"]
    assert err.result.exit_status == 5 and "bye" in str(err)


def test_ssh_start_detached_survives_the_connection_and_signal_reaches_it(lab):
    log = f"{lab.world.scratch}/detached/{os.getpid()}.log"

    async def go():
        r = SSHRemote(NODES[4], lab.options())
        pid = await r.start_detached("echo $COCKPIT_RUN_ID; exec sleep 30", log, cwd="/tmp",
                                     env={"COCKPIT_RUN_ID": "run-1"})
        await r.close()  # the job must outlive the connection that started it
        r2 = SSHRemote(NODES[4], lab.options())
        alive = (await r2.run(["ps", "-o", "pid=,pgid=,sid=", "-p", str(pid)], 10)).stdout.split()
        sent = await r2.signal(pid, signal.SIGKILL)
        await r2.close()
        return pid, alive, sent
    pid, alive, sent = run(go())
    assert alive == [str(pid)] * 3
    assert sent
    wait_for(lambda: gone(pid), 10, "the killed job to end")
    with open(log) as f:
        assert f.read() == "run-1\n"


def test_pool_shares_one_remote_per_host_and_keeps_localhost_local(lab):
    pool = RemotePool(lab.options())
    assert pool.get(NODES[0]) is pool.get(NODES[0])
    assert isinstance(pool.get("localhost"), LocalRemote)
    run(pool.close())
