"""The job form as data: the text the user typed in each field <-> job YAML, validated by cockpit.spec.model.

Why it is shaped so: the form never re-implements validation. It turns its fields into YAML text (typed values
where a field parses, the raw text where it does not, so that ``parse_spec`` says what is wrong in its own
words), parses that text, and maps every ``Problem`` back to the field it came from. Keys of an opened job file
that the form has no field for (seed, workdir, slurm.modules, ...) ride along unchanged. Pure: no textual, no IO.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field, fields, replace
from typing import Any

import yaml

from cockpit.spec.model import JobSpec, SpecError, parse_spec
from cockpit.spec.yamlpos import Problem

NCCL_DEBUG_LEVELS = ("", "VERSION", "WARN", "INFO", "TRACE")
SLURM_FIELDS = ("partition", "time", "account", "qos", "mem", "cpus_per_task", "gres_type")
_FORM_ENV = ("NCCL_DEBUG", "NCCL_SOCKET_IFNAME")
_TOP_SHOWN = ("name", "script", "args", "launcher", "nodes", "gpus", "procs_per_node", "backend", "pg_backend",
              "precision", "env", "slurm", "sweep")


@dataclass(frozen=True)
class JobForm:
    """Every field as the user typed it (strings, one bool). ``rest`` / ``slurm_rest`` / ``sweep_rest`` keep
    the keys of an opened file that have no field here."""

    name: str = "job"
    launcher: str = "local"
    nodes: str = ""  # ssh: "a, b"; slurm: "2" or "gpu[01-02]"; local: unused
    gpus: str = "none"  # none | all | 4 (a count) | [0] or 0,2 (ids)
    procs_per_node: str = "auto"
    backend: str = "ddp"
    pg_backend: str = "auto"
    precision: str = "fp32"
    script: str = ""
    args: str = ""  # shell words
    nccl_debug: str = ""
    nccl_socket_ifname: str = ""
    env: str = ""  # other variables: NAME=value NAME2=value
    partition: str = ""
    time: str = ""
    account: str = ""
    qos: str = ""
    mem: str = ""
    cpus_per_task: str = ""
    gres_type: str = ""
    requeue: bool = False
    sweep: str = ""  # lr=0.1,0.01 batch-size=32,64
    rest: dict = field(default_factory=dict, compare=False)
    slurm_rest: dict = field(default_factory=dict, compare=False)
    sweep_rest: dict = field(default_factory=dict, compare=False)

    def set(self, **changes: Any) -> JobForm:  # each field's own type (replace checks the names)
        return replace(self, **changes)


FIELD_NAMES = tuple(f.name for f in fields(JobForm) if not f.name.endswith("rest"))


@dataclass(frozen=True)
class Checked:
    """A form run through the spec: its YAML text, the spec when valid, every problem (with its form field)."""

    text: str
    spec: JobSpec | None
    problems: tuple[Problem, ...]

    def by_field(self) -> dict[str, list[Problem]]:
        out: dict[str, list[Problem]] = {}
        for p in self.problems:
            out.setdefault(field_of(p.path), []).append(p)
        return out


def field_of(path: str) -> str:
    """The form field a spec problem's dotted path belongs to; '' for the job as a whole or unshown keys."""
    head = re.split(r"[.\[]", path, maxsplit=1)[0]
    if head == "env":
        key = path[len("env."):]
        return {"NCCL_DEBUG": "nccl_debug", "NCCL_SOCKET_IFNAME": "nccl_socket_ifname"}.get(key, "env")
    if head == "slurm":
        key = re.split(r"[.\[]", path[len("slurm."):], maxsplit=1)[0]
        return "requeue" if key == "requeue" else key if key in SLURM_FIELDS else ""
    if head == "module":
        return "script"
    return head if head in FIELD_NAMES else ""


def check(form: JobForm, filename: str = "job.yaml") -> Checked:
    """Build the YAML text and validate it with the spec; form-level problems (a shell quote left open, an
    env entry without '=') come first, positioned at line 0."""
    data, own = to_data(form)
    text = dump(data)
    try:
        spec = parse_spec(text, filename)
        problems: list[Problem] = []
    except SpecError as exc:
        spec, problems = None, list(exc.problems)
    all_problems = tuple(own + problems)
    return Checked(text, spec if not all_problems else None, all_problems)


HERE_FIELDS = ("workdir", "script", "module")  # what the launcher checks on this machine that the form can fix


def with_here(checked: Checked, refusals: list) -> Checked:
    """``checked`` with what its launcher would refuse here (a missing workdir, script or module: the FAIL checks
    of cockpit.launch here_checks, cockpit.preflight.checks.Check) as warnings on their fields. The job file stays
    valid (it may be saved before its script is written); the summary no longer says it would run."""
    spec = checked.spec
    if spec is None:
        return checked
    found = tuple(Problem(*spec.where.of((c.name,)), c.name, c.detail, c.hint, True) for c in refusals
                  if c.name in HERE_FIELDS)
    return replace(checked, problems=checked.problems + found) if found else checked


def same_job(a: JobForm, b: JobForm) -> bool:
    """Whether two forms say the same job (what a file would hold), whatever the spacing typed."""
    return to_data(a) == to_data(b)


def pinned(form: JobForm, old_dir: str, new_dir: str) -> JobForm:
    """The form to save in ``new_dir`` so that it runs as it did from ``old_dir`` (both absolute).

    A job runs in its ``workdir``, relative to the job file's directory (default: that directory), and a
    relative ``script:`` (or a ``module:``) is looked up there; saved elsewhere as it is, it would name a
    script that is not there. So the workdir it had is written out absolute, as launching a composed job
    does. Unchanged where nothing depends on the file's directory: the same directory, an absolute (or ~)
    workdir, an absolute script without a workdir, or a workdir that is not text (the spec says why)."""
    workdir = form.rest.get("workdir")
    if os.path.normpath(old_dir) == os.path.normpath(new_dir) or not isinstance(workdir, str | None):
        return form
    if workdir is None and os.path.isabs(form.script.strip()) and "module" not in form.rest:
        return form
    if workdir is not None and (os.path.isabs(workdir) or workdir.startswith("~")):
        return form
    return form.set(rest={**form.rest, "workdir": os.path.normpath(os.path.join(old_dir, workdir or "."))})


def dump(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, allow_unicode=True, width=120)


def to_data(form: JobForm) -> tuple[dict, list[Problem]]:
    """The job mapping for the form, and the problems only the form can see."""
    problems: list[Problem] = []
    data: dict = {"name": form.name.strip()}
    if form.script.strip() or "module" not in form.rest:
        data["script"] = form.script.strip()
    args = _words(form.args, "args", problems)
    if args:
        data["args"] = args
    data["launcher"] = form.launcher
    nodes = _nodes(form)
    if nodes is not None:
        data["nodes"] = nodes
    data["gpus"] = _gpus(form.gpus)
    if form.procs_per_node.strip() not in ("", "auto"):
        data["procs_per_node"] = _number(form.procs_per_node)
    data.update(backend=form.backend, pg_backend=form.pg_backend, precision=form.precision)
    data.update({k: v for k, v in form.rest.items() if k not in _TOP_SHOWN})
    env = _env(form, problems)
    if env:
        data["env"] = env
    if form.launcher == "slurm":
        slurm = {k: _number(v) if k == "cpus_per_task" else v.strip()
                 for k in SLURM_FIELDS if (v := getattr(form, k)).strip()}
        if form.requeue:
            slurm["requeue"] = True
        slurm.update(form.slurm_rest)
        if slurm:
            data["slurm"] = slurm
    grid = _grid(form.sweep, problems)
    if grid:
        data["sweep"] = {"grid": grid, **form.sweep_rest}
    return data, problems


def _nodes(form: JobForm) -> object:
    text = form.nodes.strip()
    if form.launcher == "local" or not text:
        return None
    if form.launcher == "slurm":
        return _number(text)
    return [h for h in re.split(r"[,\s]+", text) if h]


def _gpus(text: str) -> object:
    """none | all | a count ("4") | ids ("0,2" or "[0]": brackets make one id a list, not a count)."""
    t = text.strip()
    if t in ("", "none"):
        return "none"
    if t == "all":
        return "all"
    if t.startswith("[") or "," in t:
        return [_number(x) for x in t.strip("[]").split(",") if x.strip()]
    return _number(t)


def _number(text: str) -> object:
    t = text.strip()
    return int(t) if re.fullmatch(r"-?\d+", t) else t


def _words(text: str, path: str, problems: list[Problem]) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        problems.append(Problem(0, 0, path, f"cannot split into words: {exc}", "close the quote"))
        return []


def _env(form: JobForm, problems: list[Problem]) -> dict:
    env: dict = {}
    if form.nccl_debug:
        env["NCCL_DEBUG"] = form.nccl_debug
    if form.nccl_socket_ifname.strip():
        env["NCCL_SOCKET_IFNAME"] = form.nccl_socket_ifname.strip()
    for word in _words(form.env, "env", problems):
        key, eq, value = word.partition("=")
        if not eq:
            problems.append(Problem(0, 0, "env", f"{word!r} is not NAME=value", "e.g. OMP_NUM_THREADS=4"))
        else:
            env[key] = value
    return env


def _grid(text: str, problems: list[Problem]) -> dict:
    grid: dict = {}
    for word in _words(text, "sweep", problems):
        key, eq, values = word.partition("=")
        if not eq or not values:
            problems.append(Problem(0, 0, "sweep", f"{word!r} is not name=value,value",
                                    "e.g. lr=0.1,0.01 batch-size=32,64"))
        else:
            grid[key] = [v for v in values.split(",") if v]
    return grid


class FormError(ValueError):
    """Text that cannot fill the form at all (not a YAML mapping)."""


def from_text(text: str) -> JobForm:
    """A form filled from job YAML; values the form cannot show as typed are written back as text, so that a
    broken job file still opens and shows its problems. Raises FormError for text that is not a mapping."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FormError(f"not YAML: {exc}") from None
    if not isinstance(data, dict):
        raise FormError("expected a mapping of key: value lines (start from jobs/demo.yaml)")
    return from_data(data)


def from_data(data: dict) -> JobForm:
    env = dict(data.get("env") or {}) if isinstance(data.get("env"), dict) else {}
    slurm = dict(data.get("slurm") or {}) if isinstance(data.get("slurm"), dict) else {}
    sweep = dict(data.get("sweep") or {}) if isinstance(data.get("sweep"), dict) else {}
    grid = sweep.pop("grid", None) or {}
    return JobForm(
        name=_text(data.get("name", "job")), launcher=_text(data.get("launcher", "local")),
        nodes=_list_text(data.get("nodes"), ", "), gpus=_gpu_text(data.get("gpus", "none")),
        procs_per_node=_text(data.get("procs_per_node", "auto")), backend=_text(data.get("backend", "ddp")),
        pg_backend=_text(data.get("pg_backend", "auto")), precision=_text(data.get("precision", "fp32")),
        script=_text(data.get("script") or ""), args=_shell(data.get("args")),
        nccl_debug=_text(env.pop("NCCL_DEBUG", "")), nccl_socket_ifname=_text(env.pop("NCCL_SOCKET_IFNAME", "")),
        env=" ".join(shlex.quote(f"{k}={_text(v)}") for k, v in env.items()),
        **{k: _text(slurm.pop(k, "")) for k in SLURM_FIELDS}, requeue=bool(slurm.pop("requeue", False)),
        sweep=" ".join(f"{k}={','.join(map(_text, v if isinstance(v, list) else [v]))}"
                       for k, v in (grid.items() if isinstance(grid, dict) else ())),
        rest={k: v for k, v in data.items() if k not in _TOP_SHOWN},
        slurm_rest=slurm, sweep_rest=sweep)


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _list_text(value: object, sep: str) -> str:
    if isinstance(value, list):
        return sep.join(_text(v) for v in value)
    return _text(value)


def _gpu_text(value: object) -> str:
    if isinstance(value, list):
        return "[" + ",".join(_text(v) for v in value) + "]"
    return _text(value)


def _shell(value: object) -> str:
    if value is None:
        return ""
    items = value if isinstance(value, list) else [value]
    return shlex.join(_text(v) for v in items)
