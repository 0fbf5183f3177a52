"""The launcher seam (cockpit.launch.protocol): adding a launcher is one package under cockpit/launch/ and one line
in cockpit/launch/registry.py. So no service or face asks for a launcher by name (`status.launcher == "slurm"`, a
table keyed by the name, a tuple of names) and none imports a launcher's own modules: each asks the run's or the
job's launcher through the registry. Read statically (AST), deferred imports included.

May name launchers: each launcher's own package, the registry, the renderers (render/: what to write for each),
the job file's model (spec/), the training runtime (train/) and the compose form (its fields are the job file's)."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO

NAMES = frozenset({"local", "ssh", "slurm", "local-sweep"})
LAUNCHER_PACKAGES = ("cockpit.launch.local", "cockpit.launch.ssh", "cockpit.launch.slurm")
MAY_NAME = ("cockpit/launch/local/", "cockpit/launch/ssh/", "cockpit/launch/slurm/", "cockpit/launch/registry.py",
            "cockpit/render/", "cockpit/spec/", "cockpit/train/",
            # the compose form: its fields and advice are the job file's `launcher:` values
            "cockpit/tui/models/form.py", "cockpit/tui/models/compose.py", "cockpit/tui/models/fleet.py",
            "cockpit/tui/screens/compose.py")


def _names_in(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and node.value in NAMES:
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [v for e in node.elts for v in _names_in(e)]
    return []


def _launcherish(node: ast.AST) -> bool:
    return "launcher" in ast.unparse(node).lower()


def name_tests(source: str) -> list[tuple[int, str]]:
    """Every place ``source`` tests a launcher's name: (line, the code)."""
    found = []
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Compare):
            sides = [n.left, *n.comparators]
            if any(_names_in(s) for s in sides) and any(_launcherish(s) or isinstance(s, ast.Name) for s in sides):
                found.append((n.lineno, ast.unparse(n)))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args:
            if n.func.attr == "get" and (_launcherish(n.args[0]) and isinstance(n.args[0], ast.Attribute)
                                         or ast.unparse(n.func.value).endswith("registry") and _names_in(n.args[0])):
                found.append((n.lineno, ast.unparse(n)))  # TABLE.get(status.launcher), registry.get("ssh")
        elif isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Attribute) and n.slice.attr == "launcher":
            found.append((n.lineno, ast.unparse(n)))  # TABLE[status.launcher]
        elif isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None and _names_in(n.value):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(_launcherish(t) for t in targets):
                found.append((n.lineno, ast.unparse(n)))  # LOCAL_LAUNCHERS = ("local",)
    return sorted(found)


def launcher_imports(source: str) -> list[tuple[int, str]]:
    """Every import of a launcher's own modules in ``source``: (line, the module)."""
    found = []
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.ImportFrom) and n.module:
            mods = [n.module] if n.module != "cockpit.launch" else [f"cockpit.launch.{a.name}" for a in n.names]
        elif isinstance(n, ast.Import):
            mods = [a.name for a in n.names]
        else:
            continue
        found += [(n.lineno, m) for m in mods if m.startswith(LAUNCHER_PACKAGES)
                  and (m in LAUNCHER_PACKAGES or m.startswith(tuple(p + "." for p in LAUNCHER_PACKAGES)))]
    return sorted(found)


def _modules() -> list[tuple[str, str]]:
    return [(p.relative_to(REPO).as_posix(), p.read_text(encoding="utf-8"))
            for p in sorted((REPO / "cockpit").rglob("*.py"))]


def test_no_service_or_face_tests_a_launchers_name():
    found = [f"{rel}:{line}: {code}" for rel, src in _modules() if not rel.startswith(MAY_NAME)
             for line, code in name_tests(src)]
    assert found == [], "ask the launcher (cockpit.launch.registry.for_run / for_spec), not its name:\n" + \
        "\n".join(found)


def _own_package(rel: str) -> str | None:
    parts = Path(rel).parts
    if len(parts) > 3 and parts[:2] == ("cockpit", "launch") and ".".join(parts[:3]) in LAUNCHER_PACKAGES:
        return ".".join(parts[:3])
    return None


def test_only_the_registry_and_the_launcher_itself_import_its_modules():
    found = []
    for rel, src in _modules():
        if rel == "cockpit/launch/registry.py":
            continue
        own = _own_package(rel)
        found += [f"{rel}:{line}: {mod}" for line, mod in launcher_imports(src)
                  if own is None or not (mod == own or mod.startswith(own + "."))]
    assert found == [], "a launcher's modules are its own (ask it through cockpit.launch.registry):\n" + \
        "\n".join(found)


MADE_UP = '''
from cockpit.launch.slurm.launcher import job_ids
from cockpit.launch import ssh
import cockpit.launch.local.sweep
from cockpit.launch import registry, protocol
from cockpit.fleet.cluster import cluster_path
LOCAL_LAUNCHERS = ("local",)
LOOK_EVERY = {"local": 1.0}
_TOP_KEYS = ("hosts", "ssh", "python")
def f(status, spec, launcher, kind):
    a = status.launcher == "ssh"
    b = spec.launcher in ("local", "slurm")
    c = launcher != "slurm"
    d = LOOK_EVERY.get(status.launcher, 5.0)
    e = LOOK_EVERY[status.launcher]
    g = registry.get("slurm")
    h = status.name == "slurm"
    i = LOOK_EVERY.get("local")
    return registry.for_run(status).look_every
'''


def test_the_scan_finds_each_form_of_asking_by_name():
    """The scan itself, on a made-up module: each form it must catch, and what it must leave alone (a cluster
    file's `ssh:` key, a run named "slurm", a table read with a constant)."""
    lines = MADE_UP.splitlines()
    assert [lines[n - 1].strip() for n, _ in name_tests(MADE_UP)] == [
        'LOCAL_LAUNCHERS = ("local",)', 'a = status.launcher == "ssh"', 'b = spec.launcher in ("local", "slurm")',
        'c = launcher != "slurm"', 'd = LOOK_EVERY.get(status.launcher, 5.0)', 'e = LOOK_EVERY[status.launcher]',
        'g = registry.get("slurm")']
    assert [m for _, m in launcher_imports(MADE_UP)] == ["cockpit.launch.slurm.launcher", "cockpit.launch.ssh",
                                                        "cockpit.launch.local.sweep"]
    assert _own_package("cockpit/launch/ssh/stacks.py") == "cockpit.launch.ssh"
    assert _own_package("cockpit/launch/rerun.py") is None
