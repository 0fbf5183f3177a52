"""The compose screen's table of fields and its words, as pure functions (no textual): the summary line over
the preview, the problems under a field, the preview of what would run, NCCL interface advice, a path as a
user reads it. cockpit.tui.screens.compose puts them on screen."""

from __future__ import annotations

from pathlib import Path

from cockpit.fleet.records import NodeReport
from cockpit.spec.model import BACKENDS, LAUNCHERS, PG_BACKENDS, PRECISIONS, JobSpec
from cockpit.spec.yamlpos import Problem
from cockpit.tui.models import form as jobform

# (field, label, kind, choices or placeholder); slurm fields are shown only for launcher: slurm
FIELDS = [
    ("name", "name", "input", "my-job"),
    ("launcher", "launcher", "select", LAUNCHERS),
    ("nodes", "nodes", "input", "host1, host2"),
    ("gpus", "GPUs", "input", "none | all | 4 | [0,2]"),
    ("procs_per_node", "procs/node", "input", "auto"),
    ("backend", "backend", "select", BACKENDS),
    ("pg_backend", "pg backend", "select", PG_BACKENDS),
    ("precision", "precision", "select", PRECISIONS),
    ("script", "script", "input", "train.py"),
    ("args", "args", "input", "--epochs 3"),
    ("nccl_debug", "NCCL_DEBUG", "select", jobform.NCCL_DEBUG_LEVELS),
    ("nccl_socket_ifname", "NCCL ifname", "input", "eth0 or ^lo,docker0"),
    ("env", "env", "input", "NAME=value …"),
    ("sweep", "sweep grid", "input", "lr=0.1,0.01 batch-size=32,64"),
]
SLURM = [
    ("partition", "partition", "input", "gpu"),
    ("time", "time", "input", "02:00:00"),
    ("account", "account", "input", ""),
    ("qos", "qos", "input", ""),
    ("mem", "mem/node", "input", "64G"),
    ("cpus_per_task", "cpus/task", "input", "8"),
    ("gres_type", "gres type", "input", "a100"),
    ("requeue", "requeue", "checkbox", ""),
]
NODES_PLACEHOLDER = {"local": "this machine", "ssh": "host1, host2", "slurm": "2 or gpu[01-02]"}


def interface_advice(spec: JobSpec | None, nccl_value: str, nodes: list[NodeReport]) -> str:
    """What to put in NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) for an ssh job over several nodes, from the
    interfaces the fleet's probes reported (cockpit.preflight.ifadvice); and whether the value typed selects anything on
    each node. Empty where there is nothing to say."""
    if spec is None or spec.launcher != "ssh" or len(spec.hosts) < 2:
        return ""
    from cockpit.preflight import ifadvice

    seen = {n.host: n.interfaces for n in nodes}
    unknown = [h for h in spec.hosts if not seen.get(h)]
    if unknown:
        return (f"interface advice: no interfaces known for {', '.join(unknown)} (hint: show these nodes in "
                "Fleet: cockpit --nodes …)")
    ifaces = {h: seen[h] or () for h in spec.hosts}  # none empty: unknown ones returned above
    advice = ifadvice.advise(ifaces)
    lines = [f"advice: {advice.env_text()} ({advice.reason})" if advice.subnet else f"advice: {advice.reason}"]
    if nccl_value:
        empty = [h for h in spec.hosts if not ifadvice.selected(ifadvice.NCCL, nccl_value, ifaces[h])]
        if empty:
            lines.append(f"NCCL_SOCKET_IFNAME={nccl_value} selects no interface on {', '.join(empty)}")
    return "\n".join(lines)


def shown_path(path: Path) -> str:
    """A path as a user reads it best: relative to the working directory when under it, else with ~."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        home = Path.home()
        return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)


def preview_text(spec: JobSpec, facts) -> str:
    """What the launcher would run: the sbatch script, or each node's torchrun / DataParallel script."""
    from cockpit.render import RenderError, default_kind, render

    try:
        return render(spec, facts, default_kind(spec), for_display=True)
    except RenderError as exc:
        return f"cannot render: {exc}"


def summary(checked: jobform.Checked) -> str:
    """The line over the preview: the job in a few words, or its problems, each by its field."""
    spec = checked.spec
    if spec is None:
        n = len(checked.problems)
        return f"✗ {n} problem{'s' if n != 1 else ''}\n" + "\n".join(map(problem_line, checked.problems))
    if checked.problems:  # valid as a file, but its launcher would refuse it here (form.with_here)
        n = len(checked.problems)
        return (f"⚠ valid file, would not run here: {n} problem{'s' if n != 1 else ''}\n"
                + "\n".join(map(problem_line, checked.problems)))
    procs = "one per GPU" if spec.nprocs is None else str(spec.nprocs)
    world = f" = world {spec.world_size}" if spec.world_size else ""
    trials = f" · sweep of {len(spec.sweep.trials())}" if spec.sweep else ""
    gpus = {0: "CPU", None: "all GPUs"}.get(spec.gpus_per_node, f"{spec.gpus_per_node} GPU/node")
    return (f"✓ valid · {spec.launcher} · {spec.num_nodes} node{'s' if spec.num_nodes != 1 else ''} × {procs}"
            f"{world} · {gpus} · {spec.dist_backend} · {spec.precision}{trials}")


def problem_line(p: Problem) -> str:
    """A problem by its field, as `cockpit validate` says it less its ``file:line:col``: the form's YAML is made
    from the fields, not the file (a new job has none; an opened one loses its comments), so a position in it
    pointed into a file that does not exist yet ("job.yaml:1:13", issue 33's new-user pass) or at another line."""
    level = "warning: " if p.warning else ""
    hint = f" (hint: {p.hint})" if p.hint else ""
    return f"{level}{p.path or 'job'}: {p.message}{hint}"


def field_error(problems: list) -> str:
    """The lines under a field: each problem the form check found there, with its hint."""
    return "\n".join(f"↳ {p.message}" + (f" (hint: {p.hint})" if p.hint else "") for p in problems)
