"""The layering of DESIGN.md, enforced over every import of every module, deferred ones included (an import inside a
function or under TYPE_CHECKING is a dependency all the same): the pure core (spec, render, logs, preflight checks, the
typed records) imports no adapter, service or face; adapters (remote, nvml, what runs on a node, Slurm's facts) import
no service or face; services (fleet, launch, the run store, hangs) import neither insight (what cockpit concludes about
a run: diagnosis, fixes, forecast) nor a face; the two faces do not import each other (one exception: `cockpit` with no
command opens the TUI); the training runtime imports only the environment contract. And no two modules import each
other, directly or round a loop, and no two packages either (a loop of packages can hide between modules that each stand
on their own: hang.gather -> launch.slurm and launch.supervisor -> hang.watchdog make hang and launch one knot)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import REPO

PACKAGE = REPO / "cockpit"

# Most specific prefix wins: cockpit.fleet.records (the typed node record) is core, the rest of fleet a service.
LAYERS = {
    "core": ("cockpit", "cockpit.spec", "cockpit.render", "cockpit.logs", "cockpit.preflight", "cockpit.contract",
             "cockpit.gpu", "cockpit.fs", "cockpit.fs.safeio", "cockpit.run", "cockpit.run.layout",
             "cockpit.run.records", "cockpit.run.status", "cockpit.fleet.records", "cockpit.slurm.hostlist",
             "cockpit.slurm.states", "cockpit.slurm.sinfo", "cockpit.hang.progress",
             "cockpit.hang.stacks", "cockpit.hang.straggler",
             "cockpit.hang.words", "cockpit.insight", "cockpit.insight.forecast",
             "cockpit.plot", "cockpit.plot.series", "cockpit.plot.chart", "cockpit.plot.text", "cockpit.plot.png"),
    "adapter": ("cockpit.remote", "cockpit.nvml", "cockpit.nvml_replay", "cockpit.node", "cockpit.slurm",
                "cockpit.launch.procs", "cockpit.fs.paths", "cockpit.requeue", "cockpit.run.trust"),
    "service": ("cockpit.fleet", "cockpit.launch", "cockpit.run.store", "cockpit.run.watch", "cockpit.run.handle",
                "cockpit.run.restarts",
                "cockpit.hang", "cockpit.plot.source", "cockpit.plot.sources", "cockpit.plot.framework_files",
                "cockpit.plot.tensorboard_files"),
    # what cockpit concludes about a run: above every service it reads, below the two faces that show it
    "insight": ("cockpit.insight.diagnosis", "cockpit.insight.cause", "cockpit.insight.fixes",
                "cockpit.insight.proposals", "cockpit.insight.forecast_inputs", "cockpit.insight.sweep_table",
                "cockpit.insight.sweep_series", "cockpit.insight.listing", "cockpit.insight.restarted",
                "cockpit.insight.first_failure"),
    "face": ("cockpit.cli", "cockpit.tui", "cockpit.__main__"),
    "train": ("cockpit.train",),
}
RANK = {"core": 0, "adapter": 1, "service": 2, "insight": 3, "face": 4}
ALLOWED = {("cockpit.cli.main", "cockpit.tui"), ("cockpit.cli.main", "cockpit.tui.app"),  # `cockpit` opens the TUI
           ("cockpit.__main__", "cockpit.cli.main")}  # `python -m cockpit` is the CLI
# Stdlib-only modules the ranks share: names (contract, run_layout) and the stop flag + scontrol requeue
# (requeue), which plain scripts use without cockpit.train.
TRAIN_MAY_IMPORT = ("cockpit", "cockpit.contract", "cockpit.run.layout", "cockpit.requeue")
# Package circles that exist and are to be cut, each with its reason; none may be added.
KNOWN_PACKAGE_CIRCLES: list[list[str]] = []


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(name: str) -> set[str]:
    """Every cockpit module ``name`` imports anywhere in its body; ``from P import x`` counts as P.x when that
    is a module, else as P."""
    path = MODULES[name]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "cockpit"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level or base.split(".")[0] != "cockpit":  # cockpit uses no relative imports
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in MODULES else base)
    found.discard(name)
    return {m for m in found if m in MODULES}


def layer(name: str) -> str:
    """The layer of the longest prefix that names ``name``'s package; "cockpit" itself (the version) only by name,
    so a new top-level module must be given a layer here (None until then)."""
    prefixes = [p for ps in LAYERS.values() for p in ps if name == p or (p != "cockpit" and name.startswith(p + "."))]
    if not prefixes:
        return None  # type: ignore[return-value]
    best = max(prefixes, key=len)
    return next(k for k, ps in LAYERS.items() if best in ps)


GRAPH = {name: imports(name) for name in MODULES}
PACKAGES = {name for name, path in MODULES.items() if path.name == "__init__.py"}


def unit(name: str, depth: int) -> str:
    """What ``name`` counts as in the graph of packages ``depth`` deep: its package (cockpit.launch at depth 1,
    cockpit.launch.ssh at 2) or, for a module loose at that depth, itself (cockpit.gpu, cockpit.hang.gather)."""
    parts = name.split(".")
    for d in range(1, depth + 1):
        head = ".".join(parts[: d + 1])
        if head not in PACKAGES:
            return head
    return ".".join(parts[: depth + 1])


def package_graph(graph: dict[str, set[str]], depth: int) -> dict[str, set[str]]:
    grouped: dict[str, set[str]] = {}
    for name, targets in graph.items():
        mine = unit(name, depth)
        grouped.setdefault(mine, set()).update(unit(t, depth) for t in targets)
        grouped[mine].discard(mine)
    return grouped


def violations(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for name, targets in graph.items():
        mine = layer(name)
        for target in sorted(targets):
            theirs = layer(target)
            if (name, target) in ALLOWED:
                continue
            if mine == "train":
                ok = theirs == "train" or target in TRAIN_MAY_IMPORT
            elif theirs == "train":
                ok = False  # torch is imported under cockpit.train only: nothing else may pull it in
            elif mine == "face" and theirs == "face":
                ok = name.split(".")[1] == target.split(".")[1]  # within one face, not across
            else:
                ok = RANK[theirs] <= RANK[mine]
            if not ok:
                wrong.append(f"{name} ({mine}) imports {target} ({theirs})")
    return wrong


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_layer():
    assert [m for m in sorted(MODULES) if layer(m) is None] == []


def test_imports_point_down_the_layers():
    assert violations(GRAPH) == []


def test_no_import_cycles():
    assert cycles(GRAPH) == []


@pytest.mark.parametrize("depth", [1, 2])
def test_no_circle_between_packages(depth: int):
    """Top-level packages (depth 1) and their sub-packages (depth 2, e.g. launch.ssh, tui.screens)."""
    assert [c for c in cycles(package_graph(GRAPH, depth)) if c not in KNOWN_PACKAGE_CIRCLES] == []


def test_the_known_package_circles_are_still_there():
    """A circle that was cut leaves this list in the same commit, so none comes back unseen."""
    assert [c for c in KNOWN_PACKAGE_CIRCLES if c not in cycles(package_graph(GRAPH, 1))] == []


def test_the_package_check_sees_a_circle_that_no_module_loop_shows():
    loop = {"cockpit.hang.gather": {"cockpit.launch.slurm.launcher"},
            "cockpit.launch.supervisor": {"cockpit.hang.watchdog"}}
    assert cycles(loop) == [] and cycles(package_graph(loop, 2)) == []
    assert cycles(package_graph(loop, 1)) == [["cockpit.hang", "cockpit.launch"]]
    assert package_graph(loop, 2)["cockpit.hang.gather"] == {"cockpit.launch.slurm"}


def test_the_checks_report_what_they_should():
    """The checkers on a made-up graph: a core module importing a service, the TUI importing the CLI, a
    service pulling in the training runtime, and a three-module loop."""
    bad = {"cockpit.logs.parse.parser": {"cockpit.run.store"}, "cockpit.tui.app": {"cockpit.cli.console"},
           "cockpit.fleet.probes": {"cockpit.train.runtime"}, "cockpit.run.store": {"cockpit.run.watch"},
           "cockpit.run.watch": {"cockpit.hang.gather"}, "cockpit.hang.gather": {"cockpit.run.store"}}
    assert violations(bad) == ["cockpit.logs.parse.parser (core) imports cockpit.run.store (service)",
                               "cockpit.tui.app (face) imports cockpit.cli.console (face)",
                               "cockpit.fleet.probes (service) imports cockpit.train.runtime (train)"]
    assert cycles(bad) == [["cockpit.hang.gather", "cockpit.run.store", "cockpit.run.watch"]]
    assert "cockpit.cli.common" in GRAPH["cockpit.cli.main"]  # deferred and top-level imports are both seen
