"""cockpit's rank-side hook. Installed as ``<run>/hook/sitecustomize.py``; the rank wrapper puts that folder
first on the rank's PYTHONPATH, so it runs at interpreter start in the rank's own Python, whatever script
the rank runs. Stdlib only; nothing here imports torch.

What it does, and what it costs until asked (one daemon thread that wakes once a second):

- SIGURG (ignored by default, so a stray one harms no process) makes faulthandler write every thread's
  Python stack to ``logs/rank-R.HOST.stacks``. faulthandler's handler is C: it works while the main thread
  is blocked inside a collective, and even while some thread holds the GIL forever. A fatal signal (SIGABRT
  from a C++ abort such as gloo's collective-mismatch check, SIGSEGV, SIGBUS, SIGFPE, SIGILL) appends the
  same dump there, after "Fatal Python error": where the rank was when it died (unless the script or
  PYTHONFAULTHANDLER enabled faulthandler already: then Python's own dump goes where they said).
- Once torch is imported, the torch.distributed collectives (and backward under DDP, where DDP's
  all-reduces happen) are timed: how often and how long this rank waited in them, and which one it is in
  right now. Every second a line goes to ``logs/rank-R.HOST.beat``: the straggler and stall evidence. A
  beat that stops coming means the process is stopped or frozen. It also carries the rank's resident memory,
  the node's memory and the node's count of OOM kills (/proc/self/statm, /proc/meminfo, /proc/vmstat: two
  small reads a second): whether the kernel's OOM killer ended a rank, and whose memory filled the node
  (cockpit.launch.memblame).
- A dump request (``logs/dump.req`` holding a number) makes it write torch's Flight Recorder trace
  (``logs/rank-R.HOST.fr.json``): which collectives this rank enqueued and completed, by sequence number.
  gloo does not dump on a timeout by itself; NCCL's watchdog is told to (TORCH_NCCL_DUMP_ON_TIMEOUT). It
  also asks the processes the rank forked (DataLoader workers) for their stacks, through the companion file
  cockpit_rankworkers.py (cockpit.node.rankworkers), into ``logs/rank-R.HOST.workers``.
  Under Slurm (no agent of cockpit's on the node) it also writes the rank's own TCP sockets, the node's
  interfaces and IB ports into ``logs/rank-R.HOST.links`` (cockpit_ranklinks.py: cockpit.node.ranklinks,
  imported at the first request), and answers ``logs/links.req`` (the slow-link watch's request: the links
  only) the same way; until asked, that is one failed open() a second, and only under Slurm.
- ``init_process_group`` is timed too, but not counted: the beat says a rank waits in it for the others, and
  a count above 0 still means the rank completed a collective of its own (it has started).
- At exit, after the script's own atexit handlers and before the interpreter starts finalizing, it waits
  (10 ms, at most 1 s) until torch's worker threads are idle. A gloo work object destroyed on its worker
  thread needs the GIL for one Python decref; once finalization has begun, taking the GIL ends that thread
  with a forced unwind through a noexcept destructor: "terminate called without an active exception",
  SIGABRT, after the rank's work was done (1 run in 4 of a plain DDP script on torch 2.13 + gloo here).

A job with ``runner: spawn`` (a script that starts its ranks with torch.multiprocessing.spawn) gets the same
for each spawned rank, through the companion file cockpit_rankspawn.py (cockpit.node.rankspawn).

It chains to the sitecustomize it hides, never replaces a handler the user installed (the user's own
signal.signal(SIGURG) wins), stays out of processes the rank forks or spawns (only the wrapper's own child
is hooked; a forked child only keeps a stack dump on SIGURG, into a file in its own memory), writes only into
the run directory, and is off with COCKPIT_HOOK=0.
"""

import os
import sys

BEAT_SECONDS = 1.0
# torch's Flight Recorder keeps this many collectives per process. What cockpit reads from it is the last one
# enqueued and completed (counters kept whatever the size) and the name of the last collective (the newest
# entry); 64 leaves room for a step's DDP buckets and pipeline send/recv after it. torch's default, 2,000,
# made each dump take ~100 ms (918 KiB of JSON) against 0.5 ms (30 KiB), and held ~13 MB more per rank; the
# cost per collective recorded (a few us) does not depend on the size (issue 29, bench_train.py --fr-cost).
FR_ENTRIES = "64"
BEAT_ROLL_BYTES = 256 * 1024  # the beat file starts over past this: readers need only its last line
COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce_scatter",
               "reduce_scatter_tensor", "broadcast", "broadcast_object_list", "reduce", "gather", "scatter",
               "all_to_all", "all_to_all_single", "barrier", "monitored_barrier", "send", "recv")


def _chain() -> None:
    """Run the sitecustomize this file hides (the next one on sys.path), as Python would have."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - as site.py does: report and go on
        sys.stderr.write(f"Error in sitecustomize (chained by cockpit's hook): {exc!r}\n")


def _proc_kib(path: str, key: str):
    """The number after ``key`` in a /proc table (meminfo's KiB, vmstat's counts); None where there is none."""
    try:
        with open(path, "rb") as f:
            for line in f:
                if line.startswith(key.encode()):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _mem_limit_kib():
    """The node's memory in KiB, or its cgroup's limit where lower (a Slurm job's --mem, a container): what
    the kernel's OOM killer acts on. The lowest limit on the cgroup's path, cgroup v2 or v1's memory controller."""
    best = _proc_kib("/proc/meminfo", "MemTotal:")
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return best
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[2].startswith("/"):
            continue
        if parts[0] == "0" and parts[1] == "":
            base, name = "/sys/fs/cgroup", "memory.max"
        elif "memory" in parts[1].split(","):
            base, name = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
        else:
            continue
        steps = [s for s in parts[2].split("/") if s]
        for i in range(len(steps), -1, -1):  # a job's limit sits on an ancestor of its step's cgroup
            try:
                with open(os.path.join(base, *steps[:i], name), encoding="utf-8") as f:
                    limit = int(f.read().strip()) // 1024
            except (OSError, ValueError):  # "max": no limit here
                continue
            if best is None or limit < best:
                best = limit
    return best


def _rss_kib():
    """This process's resident memory in KiB (/proc/self/statm: pages); None where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, ValueError, IndexError):
        return None


class _Hook:
    def __init__(self, base: str):
        self.base = base  # <run>/logs/rank-R.HOST
        self.logs = os.path.dirname(base)
        self.pid = os.getpid()
        self.sync_seconds = 0.0
        self.sync_calls = 0
        self.ddp = False  # backward waits for DDP's gradient all-reduces once a DDP model exists
        self.current: str | None = None
        self.since = 0.0
        self.handled: str | None = None  # the last dump request answered
        # under Slurm, a links-only request (logs/links.req: the slow-link watch) is looked for too
        self.links_asked = os.path.join(self.logs, "links.req") if os.environ.get("SLURM_JOB_ID") else None
        self.links_handled: str | None = None
        self.fr = False
        self.compiling = lambda: False
        self.last: str | None = None  # the last collective completed (uneven inputs: who left the loop)
        self.workers = None  # cockpit_rankworkers, where it is installed beside this file
        self.replaced = False  # the script replaced the SIGURG handler
        self.fatal = False  # faulthandler's fatal-signal dump goes to the stacks file (enabled by the hook)
        self.status: int | None = None  # a spawned rank's own exit status, once its function returned
        self.mem_total = _mem_limit_kib()  # the memory the rank may use, KiB (None: not Linux)

    def _record_exit(self) -> None:
        import time

        if self.status is not None:
            _write(self.base + ".exit", f"{self.status} {time.time():.6f}\n")

    # -- at start ----------------------------------------------------------------------------------------------
    def install(self, record_exit: bool = False) -> None:
        """``record_exit``: a spawned rank has no wrapper; it writes its own exit record (``self.status``)."""
        import atexit
        import contextlib
        import faulthandler
        import signal
        import threading
        import time

        self.stacks = open(self.base + ".stacks", "a")  # noqa: SIM115 - kept open for faulthandler
        faulthandler.register(signal.SIGURG, file=self.stacks, all_threads=True, chain=False)
        self.fatal = not faulthandler.is_enabled()
        if self.fatal:
            faulthandler.enable(file=self.stacks, all_threads=True)
        try:
            import cockpit_rankworkers  # the hook's companion file, beside this one in <run>/hook/

            self.workers = cockpit_rankworkers
        except ImportError:
            self.workers = None  # a hook folder written by an older cockpit: no worker stacks
        os.register_at_fork(after_in_child=self._forked)
        if record_exit:
            atexit.register(self._record_exit)
        atexit.register(_settle_torch_threads)  # registered early: runs after the script's own handlers
        prefix = f"{self.logs}/frdump.{os.path.basename(self.base)[5:]}.rank_"
        for name, value in (("TORCH_NCCL_DUMP_ON_TIMEOUT", "1"), ("TORCH_FR_DUMP_TEMP_FILE", prefix)):
            os.environ.setdefault(name, value)
        if "TORCH_NCCL_TRACE_BUFFER_SIZE" not in os.environ:
            os.environ.setdefault("TORCH_FR_BUFFER_SIZE", FR_ENTRIES)
        if "torch" not in sys.modules:
            sys.meta_path.insert(0, _TorchFinder(self.patch_torch))
        # the first beat before the script's first line: a rank that has output but no beat has no hook (a beat
        # that cannot be written now is retried by the beat thread every second)
        with contextlib.suppress(OSError):
            self._beat(time.time())
        threading.Thread(target=self._beat_loop, name="cockpit-hook", daemon=True).start()

    def _forked(self) -> None:
        """A forked child (a DataLoader worker) is not the rank: no stacks into the rank's file; its own go to
        a file in its memory, which the rank reads when asked (cockpit_rankworkers)."""
        import faulthandler
        import signal

        faulthandler.unregister(signal.SIGURG)
        if self.fatal:
            faulthandler.disable()
        if self.workers is not None and signal.getsignal(signal.SIGURG) in (signal.SIG_DFL, signal.SIG_IGN, None):
            self.workers.in_child()

    # -- torch -------------------------------------------------------------------------------------------------
    def patch_torch(self, torch) -> None:
        dist = getattr(torch, "distributed", None)
        if dist is None or not dist.is_available():
            return
        for name in COLLECTIVES:
            fn = getattr(dist, name, None)
            if callable(fn):
                setattr(dist, name, self._timed(name, fn))
        init_pg = getattr(dist, "init_process_group", None)
        if callable(init_pg):
            dist.init_process_group = self._timed("init_process_group", init_pg, counted=False)
        import functools

        backward = torch.autograd.backward
        synced = self._timed("backward", backward)
        hook = self

        @functools.wraps(backward)
        def timed_backward(*args, **kwargs):
            try:
                return (synced if hook.ddp else backward)(*args, **kwargs)
            except BaseException as exc:
                _out_of_sight(exc)
                raise

        torch.autograd.backward = timed_backward
        ddp = torch.nn.parallel.DistributedDataParallel
        init = ddp.__init__

        @functools.wraps(init)  # libraries read DDP's signature to filter their keyword arguments
        def ddp_init(model, *args, **kwargs):
            try:
                init(model, *args, **kwargs)
            except BaseException as exc:
                _out_of_sight(exc)
                raise
            hook.ddp = True

        ddp.__init__ = ddp_init
        compiler = getattr(torch, "compiler", None)
        self.compiling = getattr(compiler, "is_compiling", None) or (lambda: False)
        self.fr = True

    def _timed(self, name: str, fn, counted: bool = True):
        import functools
        import time

        hook = self

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            # nested, returning before the wait, or traced by torch.compile (which must see torch's own call)
            if hook.current is not None or kwargs.get("async_op") or hook.compiling():
                try:
                    return fn(*args, **kwargs)
                except BaseException as exc:
                    _out_of_sight(exc)
                    raise
            hook.current, hook.since = name, time.time()
            try:
                return fn(*args, **kwargs)
            except BaseException as exc:
                _out_of_sight(exc)
                raise
            finally:
                if counted:
                    hook.sync_seconds += time.time() - hook.since
                    hook.sync_calls += 1
                    hook.last = name
                hook.current = None

        return timed

    # -- the beat ----------------------------------------------------------------------------------------------
    def _beat_loop(self) -> None:
        import time

        while True:
            time.sleep(BEAT_SECONDS)
            try:
                answered = self._answer_request()
                if self.links_asked is not None and (self._links_request() or answered):
                    self._links()
                self._beat(time.time())
            except Exception:  # noqa: BLE001, S110 - a full disk, a removed run directory: never disturb
                pass  # training and never print into the rank's log; the next beat retries

    def _beat(self, now: float) -> None:
        import json

        current, since = self.current, self.since
        record = {"t": round(now, 3), "pid": self.pid, "sync": round(self.sync_seconds, 4), "n": self.sync_calls,
                  "in": current, "since": round(since, 3) if current else None, "ddp": self.ddp, "last": self.last,
                  "req": self.handled, "urg": "replaced" if self.replaced else "hook", "rss": _rss_kib(),
                  "memt": self.mem_total, "oomk": _proc_kib("/proc/vmstat", "oom_kill ")}
        path = self.base + ".beat"
        try:
            roll = os.path.getsize(path) > BEAT_ROLL_BYTES
        except OSError:
            roll = False
        with open(path, "w" if roll else "a") as f:
            f.write(json.dumps(record, separators=(",", ":")) + "\n")

    def _answer_request(self) -> bool:
        """Answer a new dump request; whether there was one."""
        try:
            with open(os.path.join(self.logs, "dump.req")) as f:
                request = f.read().strip()
        except OSError:
            return False
        if not request or request == self.handled:
            return False
        self.handled = request
        self._stacks_if_replaced()
        text = self._flight_recorder()
        if text is not None:
            tmp = f"{self.base}.fr.json.tmp"
            with open(tmp, "wb" if isinstance(text, bytes) else "w") as f:
                f.write(text)
            os.replace(tmp, self.base + ".fr.json")
        if self.workers is not None:
            self.workers.dump_children(self.pid, request, self.base + ".workers")
        return True

    def _links_request(self) -> bool:
        """A new links-only request (logs/links.req); whether there was one."""
        try:
            with open(self.links_asked or "") as f:
                request = f.read().strip()
        except OSError:
            return False
        if not request or request == self.links_handled:
            return False
        self.links_handled = request
        return True

    def _links(self) -> None:
        """Under Slurm (no agent of cockpit's on the node: the rank reads its own sockets), this rank's transport
        evidence into ``logs/rank-R.HOST.links``, once for both requests it has answered (the dump's and the
        links-only one, which may come together: a stall while the slow-link watch gathers), before the beat
        that says so. cockpit_ranklinks is imported now: until asked it costs nothing. A read that fails is said
        in the file."""
        try:
            import cockpit_ranklinks  # the hook's companion file, beside this one in <run>/hook/
        except ImportError:
            return  # a hook folder written by an older cockpit: no links
        cockpit_ranklinks.write_links(self.base, self.pid, self.handled, self.links_handled)

    def _stacks_if_replaced(self) -> None:
        """The script installed its own SIGURG handler (signal.signal replaces faulthandler's): the request's
        SIGURG went to it, so dump from this thread instead (it needs the GIL, which a rank blocked in a
        collective or a sleep releases), and say so."""
        import faulthandler
        import signal

        handler = signal.getsignal(signal.SIGURG)
        if handler in (signal.SIG_DFL, signal.SIG_IGN, None):
            self.replaced = False
            return
        self.replaced = True
        self.stacks.write("(cockpit: the script handles SIGURG itself; these stacks come from cockpit's thread)\n")
        self.stacks.flush()
        faulthandler.dump_traceback(file=self.stacks, all_threads=True)

    def _flight_recorder(self) -> str | None:
        c10d = sys.modules.get("torch._C._distributed_c10d")
        dump = getattr(c10d, "_dump_fr_trace_json", None)
        if dump is None:
            return None
        try:
            return dump(includeCollectives=True, onlyActive=False)
        except TypeError:
            return dump()
        except Exception as exc:  # noqa: BLE001 - torch says why in its own words; keep them as the evidence
            import json

            return json.dumps({"error": f"{type(exc).__name__}: {exc}"})


def _out_of_sight(exc: BaseException) -> None:
    """Drop the hook's own frame from the head of ``exc``'s traceback, in a wrapper's ``except`` clause (where the
    head is that wrapper), before a bare ``raise``: the user's traceback, excepthooks and loggers then show their
    code calling torch's, as without cockpit, and nothing else about the exception changes. Python 3.11+ re-raises
    with the traceback as set here; 3.10 re-raises the one it saved, so there the frame stays."""
    tb = exc.__traceback__
    if tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        exc.__traceback__ = tb.tb_next


SETTLE_MAX_SECONDS = 1.0
SETTLE_POLL_SECONDS = 0.005
_TORCH_THREADS = ("pt_", "gloo")  # torch's worker threads name themselves so (pt_gloo_runloop, pt_nccl_...)


def _settle_torch_threads() -> None:
    """Let torch's worker threads finish what they hold (see the module docstring): sleep, which releases the
    GIL to any of them waiting for it, until none is running twice in a row."""
    if "torch.distributed" not in sys.modules:
        return
    import threading
    import time

    me = str(threading.get_native_id())
    deadline = time.monotonic() + SETTLE_MAX_SECONDS
    quiet = 0
    while quiet < 2 and time.monotonic() < deadline:
        time.sleep(SETTLE_POLL_SECONDS)
        quiet = 0 if _torch_thread_running(me) else quiet + 1


def _torch_thread_running(me: str) -> bool:
    """Is one of torch's threads running or runnable (/proc state R or D)? False where /proc is missing."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return False
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended meanwhile
        name, state = stat[stat.find("(") + 1:stat.rfind(")")], stat[stat.rfind(")") + 2:][:1]
        if tid != me and name.startswith(_TORCH_THREADS) and state in ("R", "D"):
            return True
    return False


class _TorchFinder:
    """Lets `import torch` finish, then calls ``after(torch)`` (which times its collectives). Finds nothing."""

    def __init__(self, after):
        self.after = after

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        import importlib.machinery

        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module, after = spec.loader.exec_module, self.after

        def exec_and_patch(module):
            try:
                exec_module(module)
            except BaseException as exc:  # `import torch` failed: the user's traceback, without this frame
                _out_of_sight(exc)
                raise
            try:
                after(module)
            except Exception as exc:  # noqa: BLE001 - a torch we do not know: train without the timing
                sys.stderr.write(f"cockpit hook: collectives not timed ({type(exc).__name__}: {exc})\n")

        # this one module's loader instance runs the patch after it; the loader's class is untouched
        spec.loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _start() -> None:
    run_dir, host = os.environ.get("COCKPIT_RUN_DIR"), os.environ.get("COCKPIT_HOST")
    if os.environ.get("COCKPIT_HOOK") == "0" or not run_dir or not host:
        return
    spawns = os.environ.get("COCKPIT_SPAWNS")
    if spawns:
        spawner = os.environ.get("COCKPIT_SPAWNER_PID")
        if spawner is None:  # the script itself: its children are the ranks
            os.environ["COCKPIT_SPAWNER_PID"] = str(os.getpid())
        elif spawner != str(os.getppid()):
            return  # a process a rank started (a DataLoader worker): not hooked
        import cockpit_rankspawn  # the hook's companion file, beside this one in <run>/hook/

        patch = cockpit_rankspawn.Spawn(run_dir, host, int(spawns), _Hook, _write).after_torch(spawner is None)
        sys.meta_path.insert(0, _TorchFinder(patch))
        return
    if os.environ.get("COCKPIT_WRAPPER_PID") != str(os.getppid()):
        return  # not the wrapper's own child: a process the rank spawned, or torchrun itself
    rank = os.environ.get("RANK") or os.environ.get("SLURM_PROCID") or "0"
    _Hook(f"{run_dir}/logs/rank-{rank}.{host}").install()


if __name__ == "sitecustomize":  # as the rank's sitecustomize; importing cockpit.node.rankhook does nothing
    _chain()
    try:
        _start()
    except Exception as _exc:  # noqa: BLE001 - never stop a rank from starting because of the hook
        sys.stderr.write(f"cockpit hook: not installed ({type(_exc).__name__}: {_exc})\n")
