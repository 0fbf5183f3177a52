"""What to do about each failure kind: severity, a title and a concrete hint, one table.

Used by ``diagnose_findings`` for kinds without a dedicated cross-rank rule; the wording is shown to users
as is, so keep each hint to what to check or change, with the variable or command that does it.
"""

from __future__ import annotations

# kind -> (severity, title, hint)
KIND_ADVICE: dict[str, tuple[str, str, str]] = {
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
    "gloo_error": ("error", "Gloo error",
                   "If another rank failed first (see the first-failure finding), this rank only lost its peer: "
                   "fix that one. Otherwise Gloo could not connect its mesh: set GLOO_SOCKET_IFNAME to an "
                   "interface every node shares and open the ports between the nodes."),
    "ddp_unused_parameters": ("error", "DDP: some parameters received no gradient",
                              "Pass find_unused_parameters=True to DistributedDataParallel, or make every "
                              "forward output contribute to the loss; TORCH_DISTRIBUTED_DEBUG=DETAIL names the "
                              "parameters."),
    "collective_mismatch": ("error", "Ranks called different collectives",
                            "Look for rank-dependent control flow around the named collective (a rank that "
                            "skips a step, different tensor shapes); TORCH_DISTRIBUTED_DEBUG=DETAIL shows each "
                            "rank's call."),
    "slurm_time_limit": ("error", "Slurm job hit its time limit",
                         "Raise --time, or checkpoint regularly and requeue before the limit (sbatch "
                         "--signal=USR1@120 with a requeue handler)."),
    "slurm_cancelled": ("error", "Slurm job or step was cancelled",
                        "Someone or something cancelled it (scancel, preemption, a node failure): "
                        "`sacct -j JOBID -o JobID,State,Reason,NodeList` says which."),
    "slurm_task_exit": ("warning", "Slurm task exited with an error",
                        "The first task to exit is usually the failing rank: read that task's own output."),
    "worker_failed": ("warning", "The launcher stopped the job after a worker failed",
                      "torchelastic's messages are consequences: the root-cause rank's own traceback, above "
                      "the failure table, says why it exited."),
}
