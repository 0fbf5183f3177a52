"""The rank hook's companion for ``runner: spawn``: the script runs once per node and starts its ranks itself
with torch.multiprocessing.spawn (or start_processes). Installed as ``<run>/hook/cockpit_rankspawn.py`` beside
the hook (cockpit.node.rankhook, the rank's sitecustomize), which imports it only for such a job. Stdlib only.

The hook works in two roles there. In the script's own process (the spawner) it only watches the spawned
processes, and writes the exit record of one that died of a signal as soon as torch's join saw it. In each
process the spawner started, it gives the spawned function's rank (node rank x spawns + spawn index) its own
log, pid and exit record, prints the function's exception into that log (torch's ``_wrap`` only sends it to
the spawner), and then does for that rank all the rank hook does. The spawn index reaches the child only as
an argument of torch's ``_wrap(fn, i, ...)``, so the hook wraps that one function, in the child only: the
spawner pickles torch's own ``_wrap`` by name, and the child's unpickler finds the wrapped one.
"""

import os
import sys


class Spawn:
    """The spawner's side (watch the joins) and each spawned process's side (become a rank)."""

    def __init__(self, run_dir: str, host: str, spawns: int, hook_class, write):
        self.logs, self.host, self.spawns = f"{run_dir}/logs", host, spawns
        self.hook_class, self.write = hook_class, write  # the rank hook's, passed in: this file imports no sibling
        self.node_rank = int(os.environ.get("NODE_RANK") or os.environ.get("SLURM_NODEID") or "0")

    def base(self, index: int) -> str:
        return f"{self.logs}/rank-{self.node_rank * self.spawns + index}.{self.host}"

    def after_torch(self, spawner: bool):
        """What to do once torch is imported: the spawner watches joins, a child wraps ``_wrap``."""
        def patch(torch) -> None:
            module = sys.modules.get("torch.multiprocessing.spawn")  # `import torch` imports it
            if module is None:
                sys.stderr.write("cockpit hook: torch.multiprocessing.spawn not loaded; spawned ranks unnamed\n")
                return
            if spawner:
                module.ProcessContext.join = self._watching(module.ProcessContext.join)
            else:
                # torch is not followed by mypy here, and this file imports nothing but os and sys (not typing)
                module._wrap = self._as_rank(module._wrap, torch)  # type: ignore[attr-defined]
        return patch

    def _watching(self, join):
        import functools
        import time

        spawn = self

        @functools.wraps(join)
        def watched_join(context, *args, **kwargs):
            try:
                return join(context, *args, **kwargs)
            finally:  # a process that died of a signal wrote no record: write it as soon as join saw it
                now = time.time()
                for index, process in enumerate(context.processes):
                    code = process.exitcode
                    if code is not None and not os.path.exists(spawn.base(index) + ".exit"):
                        spawn.write(spawn.base(index) + ".exit", f"{code if code >= 0 else 128 - code} {now:.6f}\n")
        return watched_join

    def _as_rank(self, wrap, torch):
        import functools

        spawn = self

        @functools.wraps(wrap)
        def as_rank(fn, index, *rest):
            base = spawn.base(index)
            fd = os.open(base + ".log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
            spawn.write(base + ".pid", f"{os.getpid()}\n")
            hook = spawn.hook_class(base)
            hook.install(record_exit=True)
            hook.patch_torch(torch)
            try:
                wrap(_printing_errors(fn), index, *rest)
            except SystemExit as exc:  # torch's _wrap exits 1 after sending the error to the spawner
                hook.status = exc.code if isinstance(exc.code, int) else 1
                raise
            hook.status = 0
        return as_rank


def _printing_errors(fn):
    """torch's _wrap sends a rank's exception to the spawner and prints nothing: print it into the rank's own
    log too, where the diagnosis looks for the root cause."""
    def rank_fn(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except BaseException:
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
            raise
    return rank_fn
