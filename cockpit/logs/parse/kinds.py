"""The event kinds: the fixed failure vocabulary of `cockpit diagnose` and the informational kinds.

Each constant is the string that appears in ``Event.kind`` and in ``--json`` output.
"""

from __future__ import annotations

# Failure kinds: the fixed vocabulary of `cockpit diagnose`. A clean log has none.
COLLECTIVE_TIMEOUT = "collective_timeout"
NCCL_SYSTEM_ERROR = "nccl_system_error"
NCCL_INTERNAL_ERROR = "nccl_internal_error"
NCCL_INVALID_USAGE = "nccl_invalid_usage"
NCCL_CUDA_ERROR = "nccl_cuda_error"
NCCL_REMOTE_ERROR = "nccl_remote_error"
NETWORK_CONNECT_ERROR = "network_connect_error"
CUDA_OOM = "cuda_oom"
RENDEZVOUS_ERROR = "rendezvous_error"
PORT_IN_USE = "port_in_use"
GLOO_ERROR = "gloo_error"
DDP_UNUSED_PARAMETERS = "ddp_unused_parameters"
COLLECTIVE_MISMATCH = "collective_mismatch"
WORKER_FAILED = "worker_failed"
SLURM_TIME_LIMIT = "slurm_time_limit"
SLURM_CANCELLED = "slurm_cancelled"
SLURM_TASK_EXIT = "slurm_task_exit"
# diagnose-2: the host, the fabric, the scheduler, and two that are no crash of the work itself.
SHM_EXHAUSTED = "shm_exhausted"  # /dev/shm full or too small (NCCL's segment, DataLoader's, a bus error)
NCCL_VERSION_MISMATCH = "nccl_version_mismatch"  # NCCL's own message, or two versions in one log
IB_ERROR = "ib_error"  # InfiniBand / RoCE: completion errors, ibv_* calls, GID, ports
GPU_XID = "gpu_xid"  # fields: xid. An "NVRM: Xid" line (pasted from dmesg)
GPU_ECC = "gpu_ecc"  # uncorrectable ECC (Xid 48/63/64/94/95, or CUDA's "uncorrectable ECC error")
SLURM_OOM_KILL = "slurm_oom_kill"  # the step's cgroup killed a task for memory
SLURM_NODE_FAIL = "slurm_node_fail"
SLURM_PREEMPTED = "slurm_preempted"
TEARDOWN_ABORT = "teardown_abort"  # libstdc++'s abort at exit, with no traceback before it
STOP_REQUESTED = "stop_requested"  # a stop someone asked for (a signal to the launcher, Ctrl-C): no failure
# trust (issue 26): four families the parser missed, named from their producers' own wording.
GPU_LOST = "gpu_lost"  # a GPU gone from the bus or unusable, with no Xid line (NVRM, nvidia-smi, NVML)
STORE_TIMEOUT = "store_timeout"  # a c10d store get/wait that timed out (a waiter: the key's writer never came)
NET_PLUGIN_FALLBACK = "net_plugin_fallback"  # an OFI/EFA net plugin failed, then NCCL used sockets: slow, no error
HOST_OOM = "host_oom"  # host memory exhausted: the kernel's OOM killer, the CPU allocator, MemoryError
# habits (issue 33): a script written for GPUs run where torch sees none (a CPU job, a CPU build of torch).
NO_GPU = "no_gpu"  # CUDA or NCCL asked for with no GPU: "doesn't have NCCL built in", "No CUDA GPUs are available"
FAILURE_KINDS = (
    COLLECTIVE_TIMEOUT, NCCL_SYSTEM_ERROR, NCCL_INTERNAL_ERROR, NCCL_INVALID_USAGE, NCCL_CUDA_ERROR,
    NCCL_REMOTE_ERROR, NETWORK_CONNECT_ERROR, CUDA_OOM, RENDEZVOUS_ERROR, PORT_IN_USE, GLOO_ERROR,
    DDP_UNUSED_PARAMETERS, COLLECTIVE_MISMATCH, WORKER_FAILED, SLURM_TIME_LIMIT, SLURM_CANCELLED,
    SLURM_TASK_EXIT, SHM_EXHAUSTED, NCCL_VERSION_MISMATCH, IB_ERROR, GPU_XID, GPU_ECC, SLURM_OOM_KILL,
    SLURM_NODE_FAIL, SLURM_PREEMPTED, TEARDOWN_ABORT, STOP_REQUESTED, GPU_LOST, STORE_TIMEOUT, NET_PLUGIN_FALLBACK,
    HOST_OOM, NO_GPU,
)

# Informational kinds: facts about the job, not failures.
NCCL_VERSION = "nccl_version"  # fields: version ("2.18.3")
NCCL_NETWORK = "nccl_network"  # fields: network ("IB" | "Socket" | "OFI" | raw plugin name), interfaces
NCCL_BOOTSTRAP = "nccl_bootstrap"  # fields: interface, interfaces, address
NCCL_SOCKET_IFNAME = "nccl_socket_ifname"  # fields: interface (the variable's value, e.g. "^lo,docker0")
NCCL_CHANNEL = "nccl_channel"  # fields: transport ("P2P/IPC/read", "NET/IB/GDRDMA"), network; rank
NCCL_INIT_START = "nccl_init_start"  # fields: rank, nranks, cuda_dev, bus_id
NCCL_INIT_COMPLETE = "nccl_init_complete"  # fields: rank, nranks, cuda_dev, bus_id
NCCL_WARN = "nccl_warn"  # an NCCL WARN line that names no failure kind
WATCHDOG_DETECTED = "watchdog_detected"  # fields: seq ("detected by watchdog at work: N")
ELASTIC_ROOT_CAUSE = "elastic_root_cause"  # the record torchelastic names as first failure; rank, host
PYTHON_EXCEPTION = "python_exception"  # a traceback's last line ("RuntimeError: ...") that names no kind
PROCESS_DIED = "process_died"  # a shell's or faulthandler's report of a process killed by a signal ("Killed")
LAUNCH_FAILED = "launch_failed"  # a Slurm step or task that never started (srun, slurmstepd's execve)
NET_PLUGIN_FAILED = "net_plugin_failed"  # an OFI/EFA net plugin's own failure (a fallback where sockets follow)
INFO_KINDS = (
    NCCL_VERSION, NCCL_NETWORK, NCCL_BOOTSTRAP, NCCL_SOCKET_IFNAME, NCCL_CHANNEL, NCCL_INIT_START,
    NCCL_INIT_COMPLETE, NCCL_WARN, WATCHDOG_DETECTED, ELASTIC_ROOT_CAUSE, PYTHON_EXCEPTION, NET_PLUGIN_FAILED,
    PROCESS_DIED, LAUNCH_FAILED,
)

Hit = tuple[str, dict[str, object]]
