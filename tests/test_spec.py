"""Job spec validation: the seeds' rules and today's, each with its positioned message."""

from __future__ import annotations

import pytest
from helpers import JOBS

from cockpit.spec.formats import hostlist_count
from cockpit.spec.model import JobSpec, SpecError, load_spec, parse_spec

BASE = "name: t\nscript: train.py\n"


def errors(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "job.yaml")
    return info.value.lines()


def one_error(text: str) -> str:
    lines = errors(text)
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("job", JOBS, ids=[j.stem for j in JOBS])
def test_example_jobs_are_valid(job):
    assert isinstance(load_spec(job), JobSpec)


def test_defaults_for_cpu():
    spec = parse_spec(BASE)
    assert (spec.launcher, spec.backend, spec.precision, spec.dist_backend) == ("local", "ddp", "fp32", "gloo")
    assert spec.nprocs == 2 and spec.world_size == 2 and not spec.uses_gpus


def test_auto_backend_picks_nccl_with_gpus_and_one_process_per_gpu():
    spec = parse_spec(BASE + "gpus: [1, 3]\n")
    assert spec.dist_backend == "nccl" and spec.nprocs == 2 and spec.gpu_ids == (1, 3)
    assert parse_spec(BASE + "gpus: 3\n").gpu_ids == (0, 1, 2)
    assert parse_spec(BASE + "gpus: all\n").nprocs is None  # one per GPU, counted on the node


def test_multinode_requires_ddp():
    line = one_error(BASE + "launcher: ssh\nnodes: [a, b]\nbackend: dp\n")
    assert line.startswith("job.yaml:5:1: backend: dp (DataParallel) runs in one process on one node")
    assert "hint: use backend: ddp" in line


def test_dp_is_one_process():
    assert parse_spec(BASE + "backend: dp\n").nprocs == 1
    assert "dp runs exactly one process" in one_error(BASE + "backend: dp\nprocs_per_node: 2\n")


def test_nccl_needs_gpus():
    assert "nccl needs GPUs" in one_error(BASE + "pg_backend: nccl\n")


@pytest.mark.parametrize("backend", ["ddp", "dp", "fsdp"])
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_every_precision_runs_with_every_backend_on_cpu_and_gpus(backend, precision):
    """fp16 runs on the CPU (torch >= 2.3, GradScaler('cpu')); dp autocasts inside each replica (contract.py)."""
    for gpus in ("", "gpus: 1\n"):
        spec = parse_spec(BASE + f"backend: {backend}\nprecision: {precision}\n" + gpus)
        assert (spec.backend, spec.precision) == (backend, precision)


def test_fsdp_launches_like_ddp_one_process_per_gpu_on_several_nodes():
    spec = parse_spec(BASE + "backend: fsdp\nlauncher: ssh\nnodes: [a, b]\ngpus: 4\n")
    assert (spec.nprocs, spec.world_size, spec.dist_backend) == (4, 8, "nccl")
    assert parse_spec(BASE + "backend: fsdp\n").nprocs == 2  # 2 on CPU, gloo
    assert "several nodes" in one_error(BASE + "backend: dp\nlauncher: ssh\nnodes: [a, b]\n")


def test_gpu_ids_unique_and_non_negative():
    lines = errors(BASE + "gpus: [0, 0, -1]\n")
    assert lines == ["job.yaml:3:11: gpus[1]: GPU 0 is listed twice (hint: list each GPU once)",
                     "job.yaml:3:14: gpus[2]: -1 is not a GPU id (hint: ids are nvidia-smi indices: 0, 1, ... "
                     "up to 1023)"]


def test_procs_per_node_at_most_gpus():
    assert "3 processes per node but only 2 GPUs" in one_error(BASE + "gpus: [0, 1]\nprocs_per_node: 3\n")


def test_ssh_needs_a_host_and_local_is_local():
    assert "needs at least one host" in one_error(BASE + "launcher: ssh\n")
    assert "runs on this machine only" in one_error(BASE + "nodes: [other]\n")
    assert "listed twice" in one_error(BASE + "launcher: ssh\nnodes: [a, a]\n")


def test_unknown_keys_get_did_you_mean():
    assert one_error(BASE + "precison: bf16\n") == (
        "job.yaml:3:1: precison: unknown key 'precison' (hint: did you mean 'precision'?)")
    assert "did you mean 'partition'" in one_error(BASE + "slurm:\n  partiton: gpu\n")


def test_bad_choice_gets_did_you_mean():
    assert "did you mean 'nccl'" in one_error(BASE + "pg_backend: ncl\n")


def test_several_errors_are_all_reported_in_file_order():
    text = "name: t\nscript: a.py\nmodule: b\npg_backend: nccl\nmaster_port: 80\nenv: {RANK: 1}\n"
    lines = errors(text)
    assert [line.split(": ")[0] for line in lines] == ["job.yaml:2:1", "job.yaml:4:1", "job.yaml:5:1",
                                                       "job.yaml:6:7"]


def test_script_or_module_exactly_one():
    assert "exactly one of script: or module:" in one_error("name: t\n")
    assert parse_spec("name: t\nmodule: pkg.train\n").module == "pkg.train"


def test_env_owned_variables_and_names():
    assert "pick GPUs with gpus:" in one_error(BASE + "env: {CUDA_VISIBLE_DEVICES: '0'}\n")
    assert "not a valid environment variable name" in one_error(BASE + "env: {1X: a}\n")
    spec = parse_spec(BASE + "env: {NCCL_DEBUG: INFO, NCCL_IB_DISABLE: 1}\n")
    assert spec.env_dict == {"NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": "1"}


def test_slurm_fields():
    spec = parse_spec(BASE + "launcher: slurm\nnodes: 2\ngpus: 4\nslurm: {time: 1:30, mem: 64G, requeue: true}\n")
    assert spec.num_nodes == 2 and spec.gpus_per_node == 4 and spec.gpu_ids is None
    assert spec.slurm.time == "1:30"  # not YAML 1.1's base-60 number 90
    assert spec.slurm.requeue and spec.slurm.signal_seconds == 120
    assert "assigned by the scheduler" in one_error(BASE + "launcher: slurm\ngpus: [0, 1]\n")
    assert "not a request Slurm understands" in one_error(BASE + "launcher: slurm\ngpus: all\n")
    assert "not a Slurm time limit" in one_error(BASE + "slurm: {time: soon}\n")
    assert "not an sbatch long option" in one_error(BASE + "slurm: {extra: [-N2]}\n")


def test_slurm_hostlist_counts_nodes():
    spec = parse_spec(BASE + 'launcher: slurm\nnodes: "gpu[01-04]"\n')
    assert spec.num_nodes == 4 and spec.nodelist == "gpu[01-04]"
    assert "not a hostlist" in one_error(BASE + 'launcher: slurm\nnodes: "gpu[01-"\n')


@pytest.mark.parametrize(("text", "count"), [("n[01-04,07],login1", 6), ("a,b", 2), ("n[1-2]x[1-3]", 6),
                                             ("gpu01", 1), ("n[", None), ("n[3-1]", None)])
def test_hostlist_count(text, count):
    assert hostlist_count(text) == count


def test_sweep_multiplies_runs():
    spec = parse_spec(BASE + "args: [--epochs, 2]\nsweep:\n  grid:\n    lr: [0.1, 0.01]\n    --layers: [2, 4, 8]\n")
    trials = spec.sweep.trials()
    assert len(trials) == 6
    assert trials[0] == ("--lr", "0.1", "--layers", "2") and trials[-1] == ("--lr", "0.01", "--layers", "8")
    assert "would pass it twice" in one_error(BASE + "args: [--lr, 1]\nsweep: {grid: {lr: [1, 2]}}\n")
    assert "needs a grid" in one_error(BASE + "sweep: {max_parallel: 2}\n")


def test_yaml_problems_have_positions():
    assert errors("name: t\nscript: [a\n")[0].startswith("job.yaml:3:1: YAML syntax error")
    assert one_error("name: t\nname: u\nscript: a\n") == "job.yaml:2:1: name: duplicate key (hint: keep one of them)"
    assert "the job file is empty" in one_error("")
    assert "expected a mapping" in one_error("- a\n- b\n")


def test_unsafe_yaml_tags_are_refused():
    assert "cannot read this value" in one_error(BASE + "args: !!python/object/apply:os.system [true]\n") or \
        "is not allowed" in one_error(BASE + "args: !!python/object/apply:os.system [true]\n")
    assert "cannot read this value" in one_error(BASE + "seed: !!python/name:os.system\n")


def test_spec_is_frozen():
    spec = parse_spec(BASE)
    with pytest.raises(AttributeError):
        spec.name = "other"


def test_node_env_overrides_env_per_ssh_node_and_is_checked_like_env():
    ssh = BASE + "launcher: ssh\nnodes: [n1, n3]\nenv: {GLOO_SOCKET_IFNAME: eth0, NCCL_DEBUG: INFO}\n"
    spec = parse_spec(ssh + "node_env:\n  n3: {GLOO_SOCKET_IFNAME: ens5}\n")
    assert spec.env_for("n1") == {"GLOO_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "INFO"}
    assert spec.env_for("n3") == {"GLOO_SOCKET_IFNAME": "ens5", "NCCL_DEBUG": "INFO"}
    assert one_error(ssh + "node_env:\n  n9: {A: b}\n") == (
        "job.yaml:7:3: node_env.n9: 'n9' is not one of the job's nodes (hint: nodes: [n1, n3])")
    assert "node_env.n3.RANK: RANK is set by cockpit for every rank" in one_error(ssh + "node_env:\n  n3: {RANK: 1}\n")
    assert one_error(BASE + "node_env: {localhost: {A: b}}\n").startswith(
        "job.yaml:3:1: node_env: per-node env needs the nodes named up front; launcher local does not")


def test_the_launching_shells_comm_variables_reach_ssh_nodes_and_the_job_wins():
    from cockpit.launch import with_shell_env

    ssh = parse_spec(BASE + "launcher: ssh\nnodes: [n1, n2]\nenv: {NCCL_SOCKET_IFNAME: eth0}\n")
    shell = {"NCCL_DEBUG": "INFO", "GLOO_SOCKET_IFNAME": "eth1", "NCCL_SOCKET_IFNAME": "ib0", "HOME": "/root",
             "TORCH_NCCL_BLOCKING_WAIT": "1", "SECRET_TOKEN": "x", "NCCL_ALGO\n": "Ring"}  # no name ends in a newline
    assert with_shell_env(ssh, shell).env_for("n2") == {
        "GLOO_SOCKET_IFNAME": "eth1", "NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0",
        "TORCH_NCCL_BLOCKING_WAIT": "1"}
    local = parse_spec(BASE)
    assert with_shell_env(local, shell) is local  # a local run inherits the shell; sbatch exports it


def test_stall_and_start_thresholds_absent_adapt_and_given_are_checked():
    spec = parse_spec(BASE)
    assert spec.stall_after is None and spec.start_after is None  # cockpit.hang.progress works them out
    spec = parse_spec(BASE + "stall_after: 0\nstart_after: 90\n")
    assert (spec.stall_after, spec.start_after) == (0, 90)
    assert one_error(BASE + "start_after: -5\n").startswith("job.yaml:3:")
    assert "must be at least 0" in one_error(BASE + "start_after: -5\n")
    assert "expected a whole number" in one_error(BASE + "stall_after: soon\n")
