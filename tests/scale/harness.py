"""Runs of stand-in ranks (tests/scale/standin.py) through cockpit's real launch path, and what a test or the
scale bench does to them: tell ranks to hang, straggle, die or end, ask cockpit about the run.

A run is made as `cockpit run` makes it (tests/scale/product.py: prepare, then the detached supervisor), with
the job's script the stand-in under ``runner: spawn``: one process per node, ``procs_per_node`` ranks each.

- ``launch_local(..., nodes=1)``: a real local run, one node (cockpit caps a node at 1,024 ranks).
- ``launch_local(..., nodes=M)``: M simulated hosts on this machine. The local launcher renders one node, so
  the harness widens the run before the supervisor starts (``widen``): node 0's rendered script is copied for
  every host with its COCKPIT_HOST, NODE_RANK, NNODES and WORLD_SIZE lines changed, and status.json gets the
  M hosts and the world size. The supervisor then starts one script, and so one stand-in, per host, watches
  their files and signals their pids as it does a local run's; what a 512-node ssh run has on top (an SSH
  connection and a node agent per node, file copies for nodes without the shared filesystem) is not there.
- ``launch_ssh``: a real ssh run over the network-namespace nodes of tests/scale/sshlab.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from scale import product

REPO = Path(__file__).resolve().parents[2]
STANDIN = Path(__file__).with_name("standin.py")
MAX_PER_NODE = 1024  # cockpit.spec's cap on procs_per_node


def until(predicate, timeout: float, what: str, every: float = 0.1):
    """``predicate()``'s first truthy value; TimeoutError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


def cockpit_env(runs: Path, home: Path, **extra: str) -> dict[str, str]:
    """What a cockpit command of the harness runs with: this checkout, these runs, nothing of the caller's
    cockpit settings."""
    env = {k: os.environ[k] for k in ("PATH", "HOME", "USER", "LOGNAME", "TMPDIR") if k in os.environ}
    env.update(LANG="C.UTF-8", PYTHONPATH=str(REPO), COCKPIT_RUNS_DIR=str(runs), NO_COLOR="1",
               XDG_CONFIG_HOME=str(home / "config"), XDG_STATE_HOME=str(home / "state"))
    env.update(extra)
    return env


@dataclass
class Sim:
    """A run of stand-in ranks, and what is told to them."""

    home: Path  # the harness's own directory: runs/, the job, the control file
    run_dir: Path
    ranks: int
    hosts: list[str]
    supervisor: int
    env: dict[str, str]
    told: dict = field(default_factory=dict)
    step_s: float = 1.0  # standin.py's --step-s (its default)

    @property
    def runs(self) -> Path:
        return self.run_dir.parent

    @property
    def control(self) -> Path:
        return self.home / "control.json"

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    def host_of(self, rank: int) -> str:
        return self.hosts[rank * len(self.hosts) // self.ranks]

    def tell(self, **values) -> None:
        """Change what the ranks do (standin.py's control file, written whole, atomically)."""
        self.told.update(values)
        tmp = self.control.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.told))
        os.replace(tmp, self.control)

    def start_clock(self, timeout: float = 600) -> None:
        """Once every rank is up (its pid file written), start the clock the stand-ins step by, at the next
        whole step: the rendezvous init_process_group is for real ranks."""
        logs = self.run_dir / "logs"
        until(lambda: sum(name.endswith(".pid") for name in os.listdir(logs)) >= self.ranks, timeout,
              f"all {self.ranks} ranks of {self.run_id} to start", every=0.2)
        self.tell(origin=(int(time.time() / self.step_s) + 1) * self.step_s)

    def clock(self) -> int:
        """The steps due by now on the stand-ins' clock."""
        return int((time.time() - self.told["origin"]) // self.step_s) + 1

    def hang(self, *ranks: int) -> None:
        """``ranks`` stop in their own code two steps from now, every other rank in that step's all_reduce
        (two: every process reads this before the step is due, so all stop at the same one)."""
        self.tell(hangs=[*self.told.get("hangs", []), {"ranks": list(ranks), "from": self.clock() + 2, "until": None}])

    def straggle(self, *ranks: int) -> None:
        self.tell(straggle=list(ranks))

    def resume(self) -> None:
        """Lift the hang (two steps from now, for all at once) and the straggling."""
        lifted = self.clock() + 2
        hangs = [{**e, "until": lifted if e["until"] is None else e["until"]} for e in self.told.get("hangs", [])]
        self.tell(hangs=hangs, straggle=[])

    def die(self, rank: int, status: int = 1) -> None:
        self.tell(die={**self.told.get("die", {}), str(rank): status})

    def end(self) -> None:
        self.tell(end=True)

    def status(self) -> dict:
        """status.json as the JSON edge has it (written atomically by the supervisor)."""
        return json.loads((self.run_dir / "status.json").read_text())

    def cockpit(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=REPO,
                              env=self.env, timeout=timeout)

    def popen(self, *args: str, **kwargs) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "cockpit", *args], cwd=REPO, env=self.env, **kwargs)

    def watched(self) -> dict | None:
        """status.json once the run is running and the watchdog has looked at every rank."""
        s = self.status()
        return s if s["state"] == "running" and len(s.get("progress") or {}) == self.ranks else None

    def wait_up(self, timeout: float = 120) -> dict:
        return until(self.watched, timeout, f"all {self.ranks} ranks of {self.run_id} to be watched")

    def wait_stepping(self, timeout: float = 120) -> dict:
        """status.json once the watchdog saw every rank past its first step: out of init_process_group, where a
        loaded machine can hold a stand-in well after the run is watched."""
        def stepped() -> dict | None:
            s = self.watched()
            return s if s and all((p.get("step") or 0) >= 1 for p in s["progress"].values()) else None
        return until(stepped, timeout, f"all {self.ranks} ranks of {self.run_id} to make a step")

    def finding(self, kind: str) -> dict | None:
        return next((f for f in self.status().get("findings", ()) if f["kind"] == kind), None)

    def wait_final(self, timeout: float = 120) -> dict:
        return until(lambda: (s := self.status())["state"] in ("succeeded", "failed", "stopped") and s,
                     timeout, f"{self.run_id} to end")

    def close(self, grace: float = 2.0) -> None:
        """Stop the run if it still goes, and make sure no stand-in is left."""
        if self.status()["state"] not in ("succeeded", "failed", "stopped"):
            self.cockpit("stop", self.run_id, "--grace", str(grace), timeout=120)
        for pid in run_pids(self.run_id):
            os.kill(pid, signal.SIGKILL)


def run_pids(run_id: str) -> list[int]:
    """This machine's processes whose environment carries the run's id (what cockpit.launch.procs looks for)."""
    needle = f"COCKPIT_RUN_ID={run_id}".encode()
    found = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and needle in Path(f"/proc/{name}/environ").read_bytes().split(b"\0"):
                found.append(int(name))
        except OSError:
            continue
    return found


def job_text(name: str, per_node: int, control: Path | None, *, stall_after: int, args: tuple[str, ...] = (),
             extra: tuple[str, ...] = ("launcher: local",)) -> str:
    """The job: ``per_node`` stand-in ranks a node; with a ``control`` file they wait for its clock (Node)."""
    words = [*(["--control", str(control)] if control else []), *args]
    return "\n".join([f"name: {name}", f"script: {STANDIN}", f"args: {json.dumps(words)}", *extra, "gpus: none",
                      "runner: spawn", f"procs_per_node: {per_node}", f"stall_after: {stall_after}", ""])


def _per_node(ranks: int, nodes: int) -> int:
    per, rest = divmod(ranks, nodes)
    if rest or not 1 <= per <= MAX_PER_NODE:
        raise ValueError(f"{ranks} ranks on {nodes} nodes: give a multiple of the nodes, at most "
                         f"{MAX_PER_NODE} per node (hint: --nodes {max(1, -(-ranks // MAX_PER_NODE))} or more)")
    return per


def launch_local(ranks: int, nodes: int = 1, *, home: Path | None = None, stall_after: int = 600,
                 args: tuple[str, ...] = (), grace: float = 10.0) -> Sim:
    """``ranks`` stand-in ranks on ``nodes`` hosts of this machine (module docstring), started and watched."""
    per = _per_node(ranks, nodes)
    home = home or Path(tempfile.mkdtemp(prefix="cockpit-scale-"))
    job = home / "scale.yaml"
    job.write_text(job_text("scale", per, home / "control.json", stall_after=stall_after, args=args))
    (home / "control.json").write_text("{}")
    env = cockpit_env(home / "runs", home)
    run_dir = product.prepare(job, home / "runs")
    hosts = widen(run_dir, nodes, ranks) if nodes > 1 else [_host_of_script(run_dir)]
    sim = Sim(home, run_dir, ranks, hosts, product.start(run_dir, grace), env)
    sim.start_clock()
    return sim


def _host_of_script(run_dir: Path) -> str:
    text = product.node_script(run_dir, 0).read_text()
    return re.search(r"^export COCKPIT_HOST=(\S+)$", text, re.M).group(1)


def host_names(nodes: int) -> list[str]:
    width = len(str(nodes - 1))
    return [f"n{k:0{width}d}" for k in range(nodes)]


def widen(run_dir: Path, nodes: int, ranks: int) -> list[str]:
    """Make a prepared one-node local run a run of ``nodes`` simulated hosts (module docstring)."""
    base = product.node_script(run_dir, 0).read_text()
    hosts = host_names(nodes)
    for k, host in enumerate(hosts):
        text = base
        for name, value in (("COCKPIT_HOST", host), ("NODE_RANK", k), ("NNODES", nodes), ("WORLD_SIZE", ranks)):
            text, n = re.subn(rf"^export {name}=.*$", f"export {name}={value}", text, flags=re.M)
            if n != 1:
                raise RuntimeError(f"{product.node_script(run_dir, 0)}: expected one `export {name}=` line, "
                                   f"found {n} (hint: the spawn node script changed; update harness.widen)")
        product.write_private(product.node_script(run_dir, k), text)
    product.set_hosts(run_dir, hosts, ranks)
    return hosts


def remove(sim: Sim) -> None:
    """Stop the run and remove the harness's directory."""
    try:
        sim.close()
    finally:
        shutil.rmtree(sim.home, ignore_errors=True)
