"""A real, private Slurm cluster on this machine for the tests: munged, slurmctld and two slurmd ("n1", "n2")
with four fake GPUs each, every daemon started directly with its own pid file and stopped by pid.

Measured with Debian bookworm's slurm-wlm 22.05.8: about 6 s from nothing to idle nodes. Nothing here needs
systemd; every path (state, spool, logs, munge key and socket) lives under ``root``, and clients find the
cluster through SLURM_CONF (``Cluster.env``). The two nodes share this host, so:

- each slurmd is started as ``slurmd -N nX`` on its own port, with NodeAddr=127.0.0.1;
- the node names are added to /etc/hosts (one marked line, removed on stop): a job's MASTER_ADDR is the
  first node's name and c10d must resolve it;
- ``hostname`` is the same on both nodes; jobs tell them apart with SLURMD_NODENAME.

Fake GPUs: GRES ``gpu:a100:4`` per node backed by symlinks to /dev/null with AutoDetect=off, so
``--gres=gpu:N`` schedules (and sets CUDA_VISIBLE_DEVICES); torch here is CPU-only, so test jobs use none.
There is no slurmdbd: sacct answers "accounting storage is disabled", and jobcomp/filetxt records every
finished job in ``jobcomp.txt``.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from helpers import cockpit_env

NODES = ("n1", "n2")
PARTITION = "gpu"  # the example jobs' partition, so their scripts pass --test-only unchanged
GPU_TYPE = "a100"  # likewise their gres_type
CPUS = 64  # declared (config_overrides): the example slurm job asks 4 tasks x 8 cpus per node
MEMORY_MB = 131072  # declared: the example asks --mem=64G
HOSTS_FILE = Path("/etc/hosts")


class ClusterError(RuntimeError):
    """The cluster did not come up; the message says which daemon and where its log is."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_conf(root: Path, ctld_port: int, node_ports: dict[str, int], host: str, munge_socket: Path,
               first_job_id: int) -> str:
    nodes = "\n".join(
        f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} CPUs={CPUS} "
        f"RealMemory={MEMORY_MB} Gres=gpu:{GPU_TYPE}:4 State=UNKNOWN" for name, port in node_ports.items())
    return f"""\
ClusterName=cockpittest
FirstJobId={first_job_id}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/slurmd.%n
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MailProg=/bin/true
ReturnToService=2
SchedulerParameters=sched_interval=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc={root}/jobcomp.txt
{nodes}
PartitionName={PARTITION} Nodes={",".join(node_ports)} Default=YES MaxTime=INFINITE State=UP
"""


@dataclass
class Cluster:
    root: Path
    conf: Path = field(init=False)
    pids: dict[str, int] = field(default_factory=dict)
    hosts_mark: str = field(default_factory=lambda: f"# cockpit-test-slurm {secrets.token_hex(4)}")
    hosts_added: bool = False

    def __post_init__(self) -> None:
        self.conf = self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment for client commands (and for cockpit): SLURM_CONF points at this cluster."""
        return cockpit_env(SLURM_CONF=str(self.conf))

    def run(self, *argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        r = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=timeout)
        if check and r.returncode != 0:
            raise ClusterError(f"{' '.join(argv)} exited {r.returncode}: {r.stderr.strip()}")
        return r

    # -- start ------------------------------------------------------------------------------------------
    def start(self, timeout: float = 60) -> Cluster:
        for sub in ("state", "spool", "log", "run", "munge", "dev"):  # munge: see _munge
            (self.root / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
        self._munge()
        host = socket.gethostname().split(".")[0]
        ports = {name: free_port() for name in NODES}
        # Job ids start somewhere random: cockpit derives MASTER_PORT from the job id, and two test sessions
        # on one machine would otherwise both run job 1 on the same port.
        first_job_id = 1000 + secrets.randbelow(18000)
        self.conf.write_text(slurm_conf(self.root, free_port(), ports, host, self.root / "munge/socket",
                                        first_job_id))
        for i in range(4):
            dev = self.root / "dev" / f"nvidia{i}"
            if not dev.is_symlink():
                dev.symlink_to("/dev/null")
        (self.root / "gres.conf").write_text(
            f"AutoDetect=off\nNodeName={','.join(NODES)} Name=gpu Type={GPU_TYPE} "
            f"File={self.root}/dev/nvidia[0-3]\n")
        self._add_hosts()
        self._daemon("slurmctld", ["slurmctld", "-f", str(self.conf)], self.root / "run/slurmctld.pid")
        for name in NODES:
            self._daemon(f"slurmd.{name}", ["slurmd", "-f", str(self.conf), "-N", name],
                         self.root / f"run/slurmd.{name}.pid")
        self.wait_idle(timeout)
        return self

    def _munge(self) -> None:
        key = self.root / "munge/munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o600)
        m = self.root / "munge"
        m.chmod(0o755)  # munged insists that everyone may reach its socket's directory
        self._daemon("munged", ["munged", f"--socket={m}/socket", f"--key-file={key}", f"--pid-file={m}/munged.pid",
                                f"--log-file={m}/munged.log", f"--seed-file={m}/munged.seed"], m / "munged.pid")

    def _daemon(self, name: str, argv: list[str], pid_file: Path) -> None:
        """Start a daemon that forks into the background, and remember its pid from its pid file."""
        r = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=30)
        if r.returncode != 0:
            raise ClusterError(f"{name} did not start ({' '.join(argv)} exited {r.returncode}): "
                               f"{(r.stderr or r.stdout).strip()}; see {self.root}/log")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                self.pids[name] = int(pid_file.read_text().split()[0])
                return
            except (OSError, ValueError, IndexError):
                time.sleep(0.05)
        raise ClusterError(f"{name} wrote no pid file {pid_file}; see {self.root}/log")

    def wait_idle(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            r = self.run("sinfo", "--noheader", "--Node", "--format=%N %t", check=False)
            last = (r.stdout + r.stderr).strip()
            states = dict(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)
            if r.returncode == 0 and all(states.get(n) == "idle" for n in NODES):
                return
            time.sleep(0.2)
        raise ClusterError(f"nodes not idle after {timeout} s; sinfo says: {last}; see {self.root}/log")

    def restart_slurmd(self, name: str, timeout: float = 60) -> None:
        """Start node ``name``'s slurmd again (a test stopped it) and wait until both nodes are idle: Slurm
        returns a DOWN node to service once its slurmd answers (ReturnToService=2)."""
        self._daemon(f"slurmd.{name}", ["slurmd", "-f", str(self.conf), "-N", name],
                     self.root / f"run/slurmd.{name}.pid")
        self.wait_idle(timeout)

    def _add_hosts(self) -> None:
        text = HOSTS_FILE.read_text()
        line = f"127.0.0.1 {' '.join(NODES)} {self.hosts_mark}\n"
        HOSTS_FILE.write_text(text + ("" if text.endswith("\n") or not text else "\n") + line)
        self.hosts_added = True

    # -- stop -------------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Cancel every job, stop every daemon by pid (TERM, then KILL), remove the /etc/hosts line."""
        if "slurmctld" in self.pids:
            self.run("scancel", "--full", "--user=root", check=False)
        slurm = [self.pids.pop(n) for n in list(self.pids) if n != "munged"]
        _stop_pids(slurm)  # together: each takes seconds to shut down
        _stop_pids([self.pids.pop("munged")] if "munged" in self.pids else [])  # last: the others use it
        if self.hosts_added:
            lines = HOSTS_FILE.read_text().splitlines(keepends=True)
            HOSTS_FILE.write_text("".join(ln for ln in lines if self.hosts_mark not in ln))
            self.hosts_added = False

    # -- helpers for tests ------------------------------------------------------------------------------
    def queue(self) -> list[str]:
        """Job ids in the queue (pending, running, completing)."""
        r = self.run("squeue", "--noheader", "--format=%i")
        return r.stdout.split()

    def hurry(self, job_id: str, *changes: str) -> None:
        """A requeued job waits about 120 s before it may start again; let it start now (with ``changes``
        such as "TimeLimit=10" made at the same time)."""
        self.run("scontrol", "update", f"JobId={job_id}", "StartTime=now", *changes)


def _stop_pids(pids: list[int], grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL for what is left after ``grace``. The daemons are not our children (they
    detach), so "gone" is what kill(pid, 0) says."""
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        _signal(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return  # already gone
