"""What runs ON a node (stdlib, plus pynvml through cockpit.nvml for the probe): probe (GPUs,
interfaces, versions as one JSON object), gpus (NVML, else nvidia-smi's CSV), ifaces (the one
interface reader, used by the probe and inlined into the agent), agent (the ssh launcher's node agent,
shipped as source), rankhook (the sitecustomize every rank loads: stacks, beats, collective timings),
rasask (NCCL's RAS service asked over its client protocol, inlined into the agent and shipped beside the hook).
"""
