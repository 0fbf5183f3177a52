"""What runs ON a node (stdlib, plus pynvml through cockpit.nvml for the probe): probe (GPUs,
interfaces, versions as one JSON object), gpus (NVML, else nvidia-smi's CSV), agent (the ssh launcher's
node agent, shipped as source), rankhook (the sitecustomize every rank loads: stacks, beats, collective
timings).
"""
