"""What every command of the headless face shares: exit codes, reading a job file (its problems as
clear lines, exit 2), and which of a run's log sources the user asked for (--rank / --host / --no-agent)."""

from __future__ import annotations

import contextlib
import sys

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def whole_number(lo: int, hi: int, unit: str = ""):
    """An argparse type: a whole number in lo..hi, else a one-line error naming the range."""
    import argparse

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number{unit and ' of ' + unit}, got {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is out of range {lo}..{hi}")
        return value
    return parse


def grace_seconds(text: str) -> float:
    """--grace: seconds from SIGTERM to SIGKILL. -1, nan or inf were taken as given (a stop that never kills a
    rank that ignores SIGTERM, or kills at once) and handed to the supervisor."""
    import argparse  # as whole_number: common is imported by every command, argparse only by those that parse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0 <= value <= 86400:  # nan fails both
        raise argparse.ArgumentTypeError(f"{value:g} is out of range 0..86400 seconds")
    return value


def notice(text: str) -> None:
    """One line of cockpit's own on stderr; a reader that has gone (a closed pipe) changes nothing."""
    with contextlib.suppress(BrokenPipeError, ValueError):
        print(f"cockpit: {text}", file=sys.stderr, flush=True)


class UsageError(Exception):
    """Bad input from the user: printed as one clear line, exit 2."""


def read_job(path: str):
    """(spec, []) or (None, the lines that say why not), for one job file."""
    from cockpit.spec.model import SpecError, load_spec

    try:
        return load_spec(path), []
    except FileNotFoundError:
        return None, [f"cockpit: {path}: no such job file (hint: try jobs/demo.yaml)"]
    except IsADirectoryError:
        return None, [f"cockpit: {path}: is a directory, not a job file"]
    except OSError as exc:  # a symlink loop, no permission, an I/O error: the path, not the job, is wrong
        return None, [f"cockpit: {path}: cannot open it: {exc.strerror or exc} (hint: check the path and its "
                      "permissions)"]
    except SpecError as exc:
        return None, exc.lines()


def load_job(path: str):
    """The job at ``path``; otherwise its problems go to stderr and the command exits 2. Its warnings (valid,
    likely not meant: an env name torch never reads) go to stderr too, and the command goes on."""
    spec, problems = read_job(path)
    if spec is None:
        for line in problems:
            print(line, file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
    for warning in spec.warnings:
        print(warning.format(path), file=sys.stderr)
    return spec


def selector(args):
    """A predicate over (host, rank) log sources for --rank / --host / --no-agent."""
    ranks = set(args.rank or ())
    hosts = set(args.host or ())

    def include(source: tuple) -> bool:
        host, rank = source
        if rank == "agent":
            return not ranks and (not hosts or host in hosts) and not getattr(args, "no_agent", False)
        return (not ranks or rank in ranks) and (not hosts or host in hosts)
    return include
