"""Slurm's facts through an injected runner: hostlist (pure expansion), states (one table of
Slurm states -> ours), runner (how a Slurm command runs, SlurmError), query (squeue/sacct/scontrol
calls and their parsers), tracker (many jobs followed with backoff), scancel (cancel or signal jobs).
"""
