"""Events of many files and ranks -> findings with hints: engine (summaries + rules), rules (cross-rank), cause
and first (the root cause before its consequences), nccl, advice, model (the values), teardown and peerloss
(consequences that are not causes), report (read the files, render text or --json)."""
