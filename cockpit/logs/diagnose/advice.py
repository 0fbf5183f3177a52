"""What to do about each failure kind: severity, a title and a concrete hint, one table.

Used by ``rules`` for kinds without a dedicated cross-rank rule; the wording is shown to users
as is, so keep each hint to what to check or change, with the variable or command that does it.
"""

from __future__ import annotations

from cockpit.logs.diagnose.model import CHOOSE, Fix, Severity

GLOO_PEER_LOST = "gloo_peer_lost"
"""Not a kind: KIND_ADVICE's key for gloo errors that only say a peer went away (their finding's code stays
``gloo_error``)."""

# kind -> (severity, title, hint)
KIND_ADVICE: dict[str, tuple[Severity, str, str]] = {
    "nccl_system_error": ("error", "NCCL system error: a system or network call failed",
                          "Rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET to see the failing call; check "
                          "NCCL_SOCKET_IFNAME, firewalls between nodes, and /dev/shm size in containers "
                          "(docker --shm-size / --ipc=host)."),
    "nccl_internal_error": ("error", "NCCL internal error",
                            "Usually a topology or version problem: run the same NCCL, driver and container on "
                            "every node; the NCCL WARN line just before it names the check that failed."),
    "nccl_invalid_usage": ("error", "NCCL invalid usage",
                           "Most often two ranks on one GPU ('Duplicate GPU detected'): call "
                           "torch.cuda.set_device(LOCAL_RANK) before init_process_group (or pass device_id=) "
                           "and check CUDA_VISIBLE_DEVICES per rank."),
    "nccl_cuda_error": ("error", "CUDA error inside NCCL",
                        "A CUDA call in NCCL failed, often out of memory during communicator setup: leave GPU "
                        "memory headroom, look for other processes with nvidia-smi and for Xid errors in dmesg."),
    "nccl_remote_error": ("error", "NCCL remote error: a peer closed the connection",
                          "This rank is usually a victim: fix the rank that failed first (see the first-failure "
                          "finding). If no rank failed, check the network between the nodes (NCCL_SOCKET_IFNAME, "
                          "NCCL_IB_HCA, MTU, firewalls)."),
    "network_connect_error": ("error", "Network connection between ranks failed",
                              "Check that every node reaches the others on the interface NCCL picked "
                              "(NCCL_SOCKET_IFNAME), that firewalls allow the ports, and for IB errors the "
                              "HCA and port state (ibstat) and NCCL_IB_HCA."),
    "cuda_oom": ("error", "CUDA out of memory",
                 "Lower the per-GPU batch size, use activation checkpointing or mixed precision, set "
                 "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation, and make sure each "
                 "rank uses its own GPU (torch.cuda.set_device(LOCAL_RANK))."),
    "rendezvous_error": ("error", "Rendezvous / TCPStore connection failed",
                         "Check that MASTER_ADDR:MASTER_PORT (or --rdzv-endpoint) is the rank-0 node and "
                         "reachable from every node, that the port is open, and that all nodes start within "
                         "the rendezvous timeout."),
    "gloo_error": ("error", "Gloo error: gloo could not set up its connections",
                   "Gloo could not connect its mesh: set GLOO_SOCKET_IFNAME to an interface every node shares and "
                   "open the ports between the nodes."),
    GLOO_PEER_LOST: ("error", "Gloo error: a peer closed or reset the connection",
                     "A consequence: the process at the other end ended first (a crash, an early exit, a kill). "
                     "Fix the rank that failed first (see the first-failure finding); no network setting brings "
                     "a peer back."),
    "ddp_unused_parameters": ("error", "DDP: some parameters received no gradient",
                              "Pass find_unused_parameters=True to DistributedDataParallel, or make every "
                              "forward output contribute to the loss; TORCH_DISTRIBUTED_DEBUG=INFO names the "
                              "parameters (DETAIL crashes DDP's constructor on some torch builds)."),
    "collective_mismatch": ("error", "Ranks called collectives that do not match (a different op or size)",
                            "The cause is in the code: a rank-dependent branch around a collective (an extra "
                            "all_reduce for logging on one rank, a rank that stops early, a tensor of another "
                            "shape). In a run cockpit launched, `cockpit diagnose RUN` names each rank's "
                            "collective and line; with NCCL, the Flight Recorder (TORCH_NCCL_TRACE_BUFFER_SIZE) "
                            "lists every rank's sequence numbers, ops and sizes."),
    "slurm_time_limit": ("error", "Slurm job hit its time limit",
                         "Raise --time, or checkpoint regularly and requeue before the limit (sbatch "
                         "--signal=USR1@120 with a requeue handler)."),
    "slurm_cancelled": ("error", "Slurm job or step was cancelled",
                        "Someone or something cancelled it (scancel, preemption, a node failure): "
                        "`sacct -j JOBID -o JobID,State,Reason,NodeList` says which."),
    "slurm_task_exit": ("error", "Slurm task exited with an error",
                        "The first task to exit is usually the failing rank: read that task's own output."),
    "worker_failed": ("error", "The launcher stopped the job after a worker failed",
                      "torchelastic's messages are consequences: the root-cause rank's own traceback, above "
                      "the failure table, says why it exited."),
    "shm_exhausted": ("error", "/dev/shm is full or too small",
                      "NCCL (and DataLoader workers) keep buffers in /dev/shm: give the container more "
                      "(docker run --shm-size=16g or --ipc=host; Kubernetes: an emptyDir with medium: Memory on "
                      "/dev/shm), clear stale /dev/shm/nccl-* files, or set NCCL_SHM_DISABLE=1 (slower) where "
                      "the size cannot change."),
    "ib_error": ("error", "InfiniBand / RoCE error",
                 "Check the HCA and its port on the named hosts (ibstat: State Active, the right link layer); "
                 "restrict NCCL to working HCAs with NCCL_IB_HCA=mlx5_0,mlx5_1; on RoCE set NCCL_IB_GID_INDEX "
                 "to the RoCE v2 GID (show_gids; usually 3). Completion errors 12 (retry exceeded) and vendor "
                 "err 129/81 mean a peer or a link went away: look at the peer's log and the fabric."),
    "gpu_xid": ("error", "GPU Xid error (NVIDIA driver)",
                "The driver reported a GPU fault on this node (nvidia-smi -q, dmesg | grep Xid): Xid 79 (fallen "
                "off the bus) and 48/94/95 (ECC) need the node drained; Xid 13/31/43 are usually the "
                "application. Exclude the node (sbatch --exclude=NODE) and report it to the admins."),
    "gpu_ecc": ("error", "Uncorrectable GPU memory (ECC) error",
                "The GPU's memory is faulty or needs a reset: exclude the node (sbatch --exclude=NODE), report "
                "it (nvidia-smi -q -d ECC,ROW_REMAPPER), and resume from the last checkpoint."),
    "slurm_oom_kill": ("error", "Slurm killed a task for exceeding its memory (cgroup OOM)",
                       "Host memory, not GPU memory: request more (sbatch --mem=... or --mem-per-gpu=...), use "
                       "fewer DataLoader workers / smaller prefetch, or load datasets lazily."),
    "slurm_node_fail": ("error", "A node of the job failed",
                        "Not the job's fault: resubmit without the node (sbatch --exclude=NODE), or let Slurm "
                        "requeue it (sbatch --requeue) and resume from a checkpoint."),
    "slurm_preempted": ("warning", "Slurm preempted the job",
                        "A higher-priority job took the nodes: submit with --requeue and checkpoint often (sbatch "
                        "--signal=USR1@120 with a handler), or use a partition/QOS that is not preemptible."),
    "teardown_abort": ("warning", "A rank aborted at exit after its work",
                       "libstdc++'s 'terminate called without an active exception' with no traceback before it: "
                       "a process group torn down at interpreter exit. Call dist.destroy_process_group() "
                       "before the script ends (then os._exit(0) for gloo)."),
    "gpu_lost": ("error", "A GPU was lost (fallen off the bus or unreachable, no Xid line)",
                 "The node's GPU is gone until a reset or reboot (nvidia-smi -q; dmesg | grep NVRM): drain or exclude "
                 "the node (sbatch --exclude=NODE), report it to the admins, resume from the last checkpoint."),
    "host_oom": ("error", "Host memory exhausted (OOM killer or the CPU allocator)",
                 "Host RAM, not GPU memory: fewer DataLoader workers or a smaller prefetch_factor, load data "
                 "lazily (memory-mapped), fewer ranks per node, or more memory for the job (sbatch --mem)."),
    "store_timeout": ("error", "A c10d store read timed out waiting for a key",
                      "A consequence: the rank that should have written the key (rank 0's NCCL id, a barrier "
                      "peer) never did; it crashed, hangs, or started late. Read that rank's log; raise the "
                      "timeout (init_process_group(timeout=)) only for a slow start."),
    "net_plugin_fallback": ("error", "The OFI/EFA network plugin failed: NCCL fell back to TCP sockets",
                            "No crash, but collectives run many times slower: make the plugin load (aws-ofi-nccl "
                            "on LD_LIBRARY_PATH or NCCL_NET_PLUGIN, libfabric with the efa provider: "
                            "fi_info -p efa), and check that the instance has EFA devices."),
    "no_gpu": ("error", "The script asks for a GPU (CUDA or NCCL) and torch sees none",
               "A script written for GPUs, run where there is no GPU (a CPU job: gpus: none or 0) or with a CPU "
               "build of torch. Run it on GPU nodes (gpus: N in the job file, torch built with CUDA), or make it "
               "follow the job: init_process_group(os.environ[\"COCKPIT_PG_BACKEND\"]) (gloo on a CPU run; "
               "pg_backend: gloo in the job file pins it) and device \"cuda\" only where "
               "torch.cuda.is_available()."),
    "stop_requested": ("info", "A stop was requested (signal to the launcher, Ctrl-C or scancel)",
                       "Not a failure of the job itself: the workers' SIGTERM exits follow from it. If nobody "
                       "asked for it, look for scancel, a time limit or preemption in the scheduler's records."),
}

# kind -> the configuration change that addresses it, where one does (rules fills in hosts).
KIND_FIX: dict[str, Fix] = {
    "shm_exhausted": Fix(container=(("shm-size", "16g"),),
                         note="or --ipc=host; where the container cannot change, NCCL_SHM_DISABLE=1 (slower)"),
    "cuda_oom": Fix(env=(("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),),
                    note="against fragmentation; if memory is truly short, a smaller per-GPU batch"),
    "ib_error": Fix(env=(("NCCL_IB_HCA", CHOOSE),),
                    note="the HCAs whose ports are Active on every node (ibstat), e.g. mlx5_0,mlx5_1"),
    "slurm_oom_kill": Fix(slurm=(("mem", CHOOSE),), note="more host memory per node, e.g. --mem=0 for all of it"),
    "slurm_preempted": Fix(slurm=(("requeue", ""),), note="resume from the last checkpoint when requeued"),
    "gloo_error": Fix(env=(("GLOO_SOCKET_IFNAME", CHOOSE),), note="an interface every node shares (ip -br a)"),
}
GID_FIX = Fix(env=(("NCCL_IB_GID_INDEX", "3"),),
              note="RoCE v2 GID of the port (show_gids); 3 on most RoCE setups")
EXCLUDE_KINDS = frozenset({"gpu_xid", "gpu_ecc", "slurm_node_fail", "gpu_lost"})
"""Kinds whose fix is to leave the host out: ``sbatch --exclude=<hosts the lines name>``."""
