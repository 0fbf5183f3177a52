"""The headless face: `cockpit <command>`. stdout carries data, stderr diagnostics.

Exit codes: 0 ok; 1 the job or check failed; 2 bad input (job file, arguments); a run exits with the
job's own code (130 after Ctrl-C). Heavy modules (torch, textual, asyncssh, pynvml) are imported inside the
commands that need them, so `cockpit --help`, `validate` and `render` start fast on a login node.
"""

from __future__ import annotations

import argparse
import errno
import gc
import os
import sys
from typing import NoReturn

from cockpit import __version__
from cockpit.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    grace_seconds,
    load_job,
    read_job,
    whole_number,
)
from cockpit.fs.safeio import Untrusted


def cmd_validate(args: argparse.Namespace) -> int:
    """Every file is checked, like a linter: `ok` per good file, every problem of every bad one; a good file
    also by what the preflight would refuse here at once (cockpit.cli.validate)."""
    from cockpit.cli.validate import here_problems

    bad = 0
    for path in args.jobs:
        spec, problems = read_job(path)
        found = here_problems(spec, path) if spec is not None else []
        if any(not p.warning for p in found):
            spec, problems = None, [p.format(path) for p in found if not p.warning]
        if spec is None:
            bad += 1
            for line in problems:
                print(line, file=sys.stderr, flush=True)
            continue
        trials = spec.sweep.count() if spec.sweep else 1
        extra = f" ({trials} trials)" if trials > 1 else ""
        print(f"{path}: ok{extra}", flush=True)
        for warning in (*spec.warnings, *found):  # valid, so still ok and exit 0; like a linter's warnings
            print(warning.format(path), file=sys.stderr, flush=True)
    return EXIT_USAGE if bad else EXIT_OK


def cmd_render(args: argparse.Namespace) -> int:
    from cockpit.launch import dry_run_facts, with_shell_env
    from cockpit.render import RenderError, default_kind, render

    spec = with_shell_env(load_job(args.job))
    kind = args.form or default_kind(spec)
    try:
        text = render(spec, dry_run_facts(spec, args.job, args.runs_dir), kind, args.node_rank,
                      for_display=not args.show_secrets)
    except RenderError as exc:
        raise UsageError(f"{args.job}: {exc}") from None
    sys.stdout.write(text)
    from cockpit.launch.site import DEFAULT_MASTER_PORT

    if spec.master_port is None and f"{DEFAULT_MASTER_PORT}" in text:  # stdout stays the script, to pipe or diff
        print(f"cockpit: master_port: auto: the {DEFAULT_MASTER_PORT} above stands in for the free port `cockpit run` "
              "picks at launch (the run's commands/node-0.sh has the one it used)", file=sys.stderr)
    return EXIT_OK


def _runs(name: str):
    """Dispatch to cockpit.cli.runs, imported only when a run command is used."""
    def call(args: argparse.Namespace) -> int:
        from cockpit.cli import runs as cli_runs

        try:
            if name == "run" and args.resume is not None:
                return cli_runs.cmd_resume(args)
            if name == "run":
                if args.job is None:
                    raise UsageError("run: a JOB.yaml to launch, or --resume RUN to continue a stopped run "
                                     "(hint: cockpit run jobs/demo.yaml)")
                return cli_runs.cmd_run(args, load_job(args.job), args.job)
            return getattr(cli_runs, f"cmd_{name}")(args)
        except cli_runs.CommandError as exc:
            raise UsageError(str(exc)) from None
    return call


def _ps(args: argparse.Namespace) -> int:
    from cockpit.cli.ps import cmd_ps  # not cockpit.cli.runs: listing runs needs no launcher (cockpit.cli.ps)

    return cmd_ps(args)


_seconds = whole_number(0, 7 * 86400, "seconds")


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0.5 <= value <= 300:
        raise argparse.ArgumentTypeError(f"{value:g} is out of range 0.5..300")
    return value


def _add_follow_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rank", type=int, action="append", help="only this global rank (repeatable)")
    p.add_argument("--host", action="append", help="only this host (repeatable)")
    p.add_argument("--quiet", "-q", action="store_true", help="no log lines: the notes (a failure, a stall), "
                   "the summary and the diagnosis only; the exit code is the job's all the same")
    p.add_argument("--no-fold", action="store_true", help="each rank's line with its own [host:rank], also where "
                   "many ranks wrote the same (a run of 9 ranks or more shows those once, as [ranks 0-4095])")
    p.add_argument("--runs-dir", help="where runs live (default: $COCKPIT_RUNS_DIR or "
                   "$XDG_STATE_HOME/cockpit/runs)")


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="launch a job, stream every rank's log, exit with the job's code")
    p.add_argument("job", metavar="JOB.yaml", nargs="?")
    p.epilog = "Arguments after -- are appended to the script's, e.g. -- --fail-rank 1 --fail-step 5"
    p.add_argument("--resume", metavar="RUN", help="continue a stopped (or failed) local run in its own directory: "
                   "its next attempt, from its last checkpoint (cockpit.train), with the job and arguments it was "
                   "started with")
    p.add_argument("--grace", type=grace_seconds, default=10.0, metavar="S",
                   help="seconds between SIGTERM and SIGKILL on stop")
    p.add_argument("--no-preflight", action="store_true", help="launch even when a preflight check fails (local: "
                   "skip the checks; ssh: the nodes must still answer; cockpit doctor JOB.yaml shows them)")
    p.add_argument("--trust-new-hosts", action="store_true", help="ssh launcher: record unknown host keys in "
                   "known_hosts (trust on first use) instead of refusing them; a changed key is always refused")
    p.add_argument("--detach", "-d", action="store_true", help="start the run and return (exit 0) with its id on "
                   "stdout, as sbatch or docker run -d; the run goes on: cockpit attach / logs -f / stop it later")
    p.add_argument("--stall-after", type=_seconds, metavar="S", help="call the run stalled when no rank made "
                   "progress for S seconds (default: the job's stall_after; without one, max(60 s, 3 x the "
                   "longest quiet gap the run has shown); 0 turns it off)")
    _add_follow_options(p)
    p.set_defaults(func=_runs("run"))


def _add_attach(sub) -> None:
    p = sub.add_parser("attach", help="follow a running job again (or show how it ended)")
    p.add_argument("run", metavar="RUN|JOBID", help="run id, a unique prefix of one, or last; or any Slurm job "
                   "of yours (123, 123_4)")
    p.add_argument("--from-start", action="store_true", help="replay the logs from their start")
    _add_follow_options(p)
    p.set_defaults(func=_runs("attach"))


def _add_logs(sub) -> None:
    p = sub.add_parser("logs", help="print a run's per-rank logs, or any Slurm job's output")
    p.add_argument("run", metavar="RUN|JOBID", help="run id, a unique prefix of one, or last; or any Slurm job "
                   "of yours (123, 123_4): its StdOut/StdErr files")
    p.add_argument("-f", "--follow", action="store_true", help="keep following until the run ends")
    p.add_argument("-n", "--lines", type=whole_number(0, 10**9, "lines"), metavar="N",
                   help="only the last N lines of each rank (with -f: then follow, as tail -f -n N)")
    _add_follow_options(p)
    p.set_defaults(func=_runs("logs"))


def _add_ps(sub) -> None:
    p = sub.add_parser("ps", help="list runs and their states")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--all", "-a", action="store_true", help="also every Slurm job of yours (squeue, and the "
                   "cluster's history of finished ones)")
    p.add_argument("--runs-dir")
    from cockpit.cli.ps_options import add_filter_options

    add_filter_options(p)
    p.set_defaults(func=_ps)


def _add_stacks(sub) -> None:
    p = sub.add_parser("stacks", help="every rank's Python stack, all threads: the ranks with the same stack "
                       "folded into one class, the fewest ranks first")
    p.add_argument("run", metavar="RUN")
    p.add_argument("--rank", type=int, action="append", help="only this global rank, its own stack in full "
                   "(repeatable)")
    p.add_argument("--all", action="store_true", help="after the classes, every rank's own stack, by host and rank")
    p.add_argument("--timeout", type=_timeout, default=5.0, help="seconds to wait for the ranks' answers "
                   "(0.5-300, default 5)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--raw", action="store_true", help="the dumps whole: with the frames and the thread of "
                   "cockpit's rank hook, which are left out by default")
    p.add_argument("--runs-dir")
    p.set_defaults(func=_runs("stacks"))


def _add_stop(sub) -> None:
    p = sub.add_parser("stop", help="stop a run: SIGTERM to its ranks, SIGKILL after --grace")
    p.add_argument("run", metavar="RUN")
    p.add_argument("--grace", type=grace_seconds, default=10.0, metavar="S", help="seconds between SIGTERM and SIGKILL")
    p.add_argument("--runs-dir")
    p.set_defaults(func=_runs("stop"))


def _diagnose(args: argparse.Namespace) -> int:
    from cockpit.cli import diagnose as cli_diagnose

    try:
        return cli_diagnose.cmd_diagnose(args)
    except cli_diagnose.DiagnoseInputError as exc:
        raise UsageError(str(exc)) from None


def _add_validate(sub) -> None:
    p = sub.add_parser("validate", help="check job files; print ok or every problem (file:line:col)")
    p.add_argument("jobs", nargs="+", metavar="JOB.yaml")
    p.set_defaults(func=cmd_validate)


def _add_render(sub) -> None:
    p = sub.add_parser("render", help="print what cockpit would run (a dry run): sbatch script or "
                       "per-node torchrun / torch.distributed.launch / DataParallel scripts")
    p.add_argument("job", metavar="JOB.yaml")
    p.add_argument("--as", dest="form", choices=("sbatch", "torchrun", "launch", "spawn", "dp"),
                   help="form to print (default: what the job's launcher runs)")
    p.add_argument("--node-rank", type=int, help="only this node's script")
    p.add_argument("--show-secrets", action="store_true", help="print secret env values (names with KEY, TOKEN, "
                   "SECRET, PASSWORD, or listed in secret_env:) as they are, not as ***")
    p.add_argument("--runs-dir", help="runs directory to show in paths (default: $COCKPIT_RUNS_DIR or "
                   "$XDG_STATE_HOME/cockpit/runs)")
    p.set_defaults(func=cmd_render)


def _add_fleet(sub) -> None:
    from cockpit.cli.fleet import add_fleet_commands

    add_fleet_commands(sub)


def _add_sweep(sub) -> None:
    from cockpit.cli.sweep import add_sweep_commands

    add_sweep_commands(sub)


def _add_plot(sub) -> None:
    from cockpit.cli.plot import add_plot_command

    add_plot_command(sub)


def _add_tui(sub) -> None:
    sub.add_parser("tui", help="the terminal UI (the default with no command): fleet, compose, runs, logs; "
                   "cockpit tui --help for its options", add_help=False)


def _add_diagnose(sub) -> None:
    p = sub.add_parser("diagnose", help="say what broke in NCCL / torch / torchrun / Slurm logs, where, "
                       "and what to try (exit 1 when an error is found)")
    p.add_argument("inputs", nargs="+", metavar="PATH|RUN|JOBID", help="log files, run directories, run ids, or "
                   "Slurm job ids (any job of yours: its output files)")
    p.add_argument("--json", action="store_true", help="exactly one JSON object on stdout")
    p.add_argument("--fix", action="store_true", help="a run's configuration fixes as a diff of its job file "
                   "(printed only; exit 1 when no finding has one)")
    p.add_argument("--apply", action="store_true", help="with --fix: write the fixed job file next to the "
                   "original as JOB.fixed.yaml (never over a file)")
    p.add_argument("--runs-dir")
    p.set_defaults(func=_diagnose)


# Each command's parser, in the order --help lists them (gpus and doctor come together, from cockpit.cli.fleet).
COMMANDS = {"validate": _add_validate, "render": _add_render, "run": _add_run, "attach": _add_attach,
            "logs": _add_logs, "ps": _add_ps, "stacks": _add_stacks, "stop": _add_stop, "gpus": _add_fleet,
            "doctor": _add_fleet, "sweep": _add_sweep, "plot": _add_plot, "tui": _add_tui, "diagnose": _add_diagnose}


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusal of a command without its run says how to name one."""

    def error(self, message: str) -> NoReturn:
        if "arguments are required: RUN" in message or "arguments are required: PATH|RUN" in message:
            command = self.prog.split()[-1]
            last = "" if command == "stop" else f"; `last` names the newest: {self.prog} last"
            message = f"{message} (hint: `cockpit ps` lists your runs{last})"
        super().error(message)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """cockpit's parser. ``command``: with only that command's arguments, when it is one (the one being run:
    a start then builds one command's parser and imports one family's module, not all fourteen; the help and
    errors it prints are the same); else every command's (--help, and the error that lists them)."""
    parser = Parser(
        prog="cockpit", description="Compose, launch, follow and diagnose PyTorch DDP training "
        "(local, SSH, Slurm). With no command, opens the terminal UI.")
    parser.add_argument("--version", action="version", version=f"cockpit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    only = COMMANDS.get(command or "")
    for add in [only] if only else dict.fromkeys(COMMANDS.values()):
        add(sub)
    return parser


# `cockpit --run last` as `cockpit tui --run last`: `cockpit` alone is the TUI, so its options are taken without
# the word (before, argparse read the option's value as a command: "invalid choice: 'last'")
TUI_OPTIONS = ("--nodes", "--job", "--run", "--runs-dir", "--theme", "--interval")


def unrecognized(args: argparse.Namespace, extra: list[str]) -> str:
    """argparse's refusal of arguments no option takes; for `run`, where they are most likely the script's
    (`cockpit run job.yaml --epochs 1`, a torchrun habit), the hint says they go after `--`."""
    text = f"unrecognized arguments: {' '.join(extra)}"
    if args.command != "run" or args.resume:  # a resumed run keeps the arguments it was started with
        return text
    return (f"{text} (hint: arguments for the script go after --: "
            f"cockpit run {args.job or 'JOB.yaml'} -- {' '.join(extra)})")


# Commands that only read and print. When one is this process's own command, what it made is frozen out of the
# cyclic collector once it is done (gc.freeze), so that the interpreter's exit does not walk every module's
# objects again: 6% of a validate's start (issue 29). Their objects need no finalizer at exit.
_FROZEN_AT_EXIT = frozenset({"validate", "render", "ps"})


def main(argv: list[str] | None = None) -> int:
    own = argv is None  # this process's command line (the console script, python -m cockpit), not a caller's list
    argv = list(sys.argv[1:] if argv is None else argv)
    # `cockpit run job.yaml [options] -- ARGS`: everything after the first -- belongs to the script.
    script_args: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, script_args = argv[:at], argv[at + 1:]
    if argv and argv[0].partition("=")[0] in TUI_OPTIONS and (cmd := next((a for a in argv if a in COMMANDS), None)):
        # `cockpit --runs-dir X ps`: options before the command are the TUI's; say where the command's go
        print(f"cockpit: error: options go after the command: cockpit {cmd} {' '.join(a for a in argv if a != cmd)}",
              file=sys.stderr)
        return 2
    if not argv or argv[0] == "tui" or argv[0].partition("=")[0] in TUI_OPTIONS:
        # `cockpit` alone opens the terminal UI; `cockpit tui --help` lists its options. Textual is imported
        # only here, so every other command starts without it.
        from cockpit.tui import before_textual

        before_textual()
        from cockpit.tui.app import run_tui

        return run_tui(argv[1:] if argv and argv[0] == "tui" else argv)
    parser = build_parser(argv[0])
    args, extra = parser.parse_known_args(argv)
    if extra:
        parser.error(unrecognized(args, extra))
    args.script_args = script_args
    try:
        code = args.func(args)
        sys.stdout.flush()  # a full disk or a closed pipe shows here, not in the interpreter's last flush
        if own and args.command in _FROZEN_AT_EXIT:
            gc.freeze()
        return code
    except (UsageError, Untrusted) as exc:  # Untrusted: a directory another user could change (cockpit.run.trust)
        print(f"cockpit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `cockpit render ... | head`: the reader left; not an error worth a traceback. What is still buffered
        # goes nowhere: else the interpreter's last flush fails again and the exit code becomes its 120.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.stderr.close()
        return EXIT_OK
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EIO) or exc.filename is not None:
            raise
        # the output itself could not be written (`cockpit ps > /dev/full`): one line, and what is still
        # buffered goes nowhere (else the interpreter's last flush fails again, with a traceback)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print(f"cockpit: cannot write the output: {exc.strerror}", file=sys.stderr)
        return EXIT_FAILED
