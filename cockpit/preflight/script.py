"""What a job's script says about itself before it runs: the packages it imports and whether it starts its own
processes (``torch.multiprocessing.spawn``), read from its source with ``ast`` (nothing of it is executed).

Pure: source text in, a ``ScriptScan`` out; the checks over it take the facts the launcher gathered (which of the
imports the job's python cannot find). `cockpit validate`, `doctor JOB` and `run` use it: a script that spawns
its own ranks under the default runner, or that imports a package the job's python lacks, fails minutes later
on every rank otherwise.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from cockpit.preflight.checks import FAIL, OK, WARN, Check, Level

SPAWNERS = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes",
                      "torch.multiprocessing.spawn.spawn", "torch.multiprocessing.spawn.start_processes"})
"""What starts processes from the script itself (Lightning's ddp_spawn calls start_processes)."""
_GUARDS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
# import name -> what pip installs it as, where they differ (or where the usual name is not the obvious one)
DISTRIBUTIONS = {"sklearn": "scikit-learn", "cv2": "opencv-python", "PIL": "pillow", "yaml": "pyyaml",
                 "skimage": "scikit-image", "bs4": "beautifulsoup4", "pytorch_lightning": "pytorch-lightning",
                 "lightning_fabric": "lightning-fabric", "google": "protobuf", "tensorboardX": "tensorboardX",
                 "attr": "attrs", "dateutil": "python-dateutil", "Crypto": "pycryptodome"}


@dataclass(frozen=True)
class Imported:
    """A top-level package the script imports, at its first import statement."""

    name: str
    line: int
    required: bool
    """Imported at the script's top (also under ``if __name__ == "__main__":``): every run imports it. False: in
    a function, a class or another branch, which a run may never reach."""


@dataclass(frozen=True)
class ScriptScan:
    """The script as its source says. ``imports``: each absolute top-level package once (first statement), not
    ``__future__``, not those under ``try: ... except ImportError`` or ``if TYPE_CHECKING:``; ``spawns``: the
    line of the first call that starts processes (``SPAWNERS``), None if none; ``edits_path``: the script changes
    ``sys.path`` or calls ``site.addsitedir`` (its imports may resolve where no one else looks); ``error``: why
    the source could not be read as Python (then nothing else is known)."""

    imports: tuple[Imported, ...] = ()
    spawns: int | None = None
    edits_path: bool = False
    error: str | None = None


def scan(source: str, filename: str = "<script>") -> ScriptScan:
    """``source`` read as Python (never run)."""
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte in the source
        where = f"line {exc.lineno}: " if isinstance(exc, SyntaxError) and exc.lineno else ""
        return ScriptScan(error=f"{where}{exc.msg if isinstance(exc, SyntaxError) else exc}")
    walker = _Walker()
    walker.visit(tree)
    return ScriptScan(tuple(walker.imports.values()), walker.spawns, walker.edits_path)


class _Walker(ast.NodeVisitor):
    """One pass: imports (and how deep they sit), the names they bind, calls that spawn or edit sys.path."""

    def __init__(self) -> None:
        self.imports: dict[str, Imported] = {}
        self.aliases: dict[str, str] = {}  # a name bound by an import -> the dotted name it stands for
        self.spawns: int | None = None
        self.edits_path = False
        self.depth = 0  # 0: the script's top level (and its `if __name__ == "__main__":`)
        self.guarded = 0  # inside try/except ImportError or if TYPE_CHECKING

    def _add(self, name: str, line: int) -> None:
        top = name.split(".")[0]
        if self.guarded or top == "__future__" or top in self.imports and self.imports[top].required:
            return
        if top not in self.imports or self.depth == 0:
            self.imports[top] = Imported(top, line, self.depth == 0)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.aliases[top] = top

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return  # relative: the script's own package
        self._add(node.module, node.lineno)
        for alias in node.names:
            self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def visit_Try(self, node: ast.Try) -> None:
        guard = any(_catches_import_error(h) for h in node.handlers)
        self.guarded += guard
        for stmt in node.body:
            self.visit(stmt)
        self.guarded -= guard
        self.depth += 1
        for part in (*node.handlers, *node.orelse, *node.finalbody):
            self.visit(part)
        self.depth -= 1

    visit_TryStar = visit_Try

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        checking = _dotted(node.test, {}) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        main = self.depth == 0 and _is_main_test(node.test)
        self.guarded += checking
        self.depth += not main
        for stmt in node.body:
            self.visit(stmt)
        self.guarded -= checking
        self.depth += main  # the else of `if __name__ == "__main__":` is a branch too
        for stmt in node.orelse:
            self.visit(stmt)
        self.depth -= 1

    def _nested(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _nested
    visit_For = visit_AsyncFor = visit_While = visit_Match = _nested

    def visit_Call(self, node: ast.Call) -> None:
        target = _dotted(node.func, self.aliases)
        if self.spawns is None and target in SPAWNERS:
            self.spawns = node.lineno
        if target in ("sys.path.insert", "sys.path.append", "sys.path.extend", "site.addsitedir"):
            self.edits_path = True
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.edits_path |= _dotted(node.target, self.aliases) == "sys.path"
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.edits_path |= any(_dotted(t, self.aliases) == "sys.path" for t in node.targets)
        self.generic_visit(node)


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """``a.b.c`` of a name or attribute chain, its first name replaced by what an import bound it to."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(aliases.get(node.id, node.id))
    return ".".join(reversed(parts))


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any((_dotted(t, {}) or "").rsplit(".", 1)[-1] in _GUARDS for t in types)


def _is_main_test(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = (test.left, test.comparators[0])
    return (any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
            and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides))


def spawn_check(script: str, scan_: ScriptScan, runner: str, spawn_runner: str) -> Check | None:
    """A script that starts its own processes, under a runner that starts it once per rank (torchrun, the
    default): every copy spawns more, and their lines share one rank's log."""
    if scan_.spawns is None or runner == spawn_runner:
        return None
    return Check("runner", WARN, f"{script} calls torch.multiprocessing.spawn (line {scan_.spawns}), and runner: "
                 f"{runner} starts it as each rank: every copy spawns its own processes, whose lines share one "
                 "rank's log", (), f"this script starts its own processes: set `runner: {spawn_runner}` (and "
                 "procs_per_node: the nprocs it passes to spawn)")


def import_checks(script: str, scan_: ScriptScan, missing: tuple[str, ...], python: str, where: str) -> list[Check]:
    """The packages of ``scan_`` the job's python could not find (``missing``): FAIL for those the script imports
    at its top (every run stops there with ModuleNotFoundError), WARN for those only a function or a branch
    imports, and for all where the script edits sys.path (it may find them after all)."""
    if not missing:
        return [Check("imports", OK, f"{python} finds every package {script} imports ({len(scan_.imports)})")]
    first = {i.name: i for i in scan_.imports}
    sure = tuple(m for m in missing if m in first and first[m].required and not scan_.edits_path)
    maybe = tuple(m for m in missing if m not in sure)
    why = ("; the script edits sys.path, so it may find them there" if scan_.edits_path else
           " (imported in a function or a branch, which a run may not reach)")
    out = [_missing(script, sure, first, python, where, FAIL, "")] if sure else []
    return out + ([_missing(script, maybe, first, python, where, WARN, why)] if maybe else [])


def _missing(script: str, names: tuple[str, ...], first: dict[str, Imported], python: str, where: str,
             level: Level, why: str) -> Check:
    listed = ", ".join(f"{m} (line {first[m].line})" if m in first else m for m in names)
    install = " ".join(DISTRIBUTIONS.get(m, m) for m in names)
    return Check("imports", level, f"{script} imports {listed}, which {python} cannot find{why}", (where,),
                 f"{python} -m pip install {install}, or set python: in the job to an interpreter that has "
                 f"{'it' if len(names) == 1 else 'them'}")
