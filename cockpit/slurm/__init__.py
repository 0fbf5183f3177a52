"""Slurm's facts through an injected runner: hostlist (pure expansion), states (one table of
Slurm states -> ours), query (squeue/sacct/scontrol/sinfo calls), scancel (cancel or signal jobs).
"""
