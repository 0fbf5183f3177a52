"""Slurm's facts through an injected runner: hostlist (pure expansion), states (one table of
Slurm states -> ours), sinfo (nodes per partition: the one parser of sinfo's answer), runner (how a Slurm
command runs, SlurmError), query (squeue/sacct/scontrol calls and their parsers), tracker (many jobs followed
with backoff), scancel (cancel or signal jobs).
"""
