"""The one checks engine: facts in, typed checks out (checks.Check); used by `doctor`, `run` and
the TUI. checks (ssh jobs over their nodes' reports), local, slurm, fleet (no job), and
ifadvice (which interface NCCL/gloo should use). Pure: the facts are gathered by callers.
"""
