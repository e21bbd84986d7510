"""The project's own modules, read with ``ast`` (never imported): no import cycles, and
a verdict is set only where the design says it is.

Every import statement counts: module level, under ``if TYPE_CHECKING:`` and inside
functions. A cycle hidden behind ``TYPE_CHECKING`` or a function-level import is still
a cycle in the design, only one Python happens to tolerate.
"""

from __future__ import annotations

import ast
import tomllib
from collections import deque
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP = "mutant_gate"
PACKAGES = ("engine", "cache", "tui", "cli")


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. mutant_gate.engine.pipeline
    path: Path
    is_package: bool  # an __init__.py

    @property
    def package(self) -> str:
        """The package relative imports in this module start from."""
        return self.name if self.is_package else self.name.rpartition(".")[0]


def package_dirs() -> dict[str, Path]:
    """``mutant_gate.X`` -> its directory, from pyproject's ``package-dir`` (else ``X/``),
    for the packages this test covers that exist (with or without an ``__init__.py``)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    mapping = config["tool"]["setuptools"].get("package-dir", {})
    found = {}
    for short in PACKAGES:
        name = f"{TOP}.{short}"
        directory = ROOT / mapping.get(name, short)
        if directory.is_dir() and any(directory.glob("*.py")):
            found[name] = directory
    return found


def project_modules() -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for package, directory in package_dirs().items():
        for path in sorted(directory.rglob("*.py")):
            rel = path.relative_to(directory)
            if "__pycache__" in rel.parts:
                continue
            parts = list(rel.with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            name = ".".join([package, *parts])
            modules[name] = Module(name, path, is_package)
    return modules


def parse(module: Module) -> ast.Module:
    return ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))


def where(module: Module, node: ast.AST) -> str:
    return f"{module.path.relative_to(ROOT)}:{node.lineno}"


def _known(name: str, modules: dict[str, Module]) -> str | None:
    """``name`` or its longest prefix that is a project module (``None``: not ours)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imported(module: Module, node: ast.Import | ast.ImportFrom, modules) -> set[str]:
    """The project modules one import statement of ``module`` names."""
    targets: set[str] = set()
    if isinstance(node, ast.Import):
        for alias in node.names:
            target = _known(alias.name, modules)
            if target:
                targets.add(target)
        return targets
    if node.level:
        base = module.package.split(".")
        if node.level > 1:
            base = base[: -(node.level - 1)]
        source = ".".join([*base, *([node.module] if node.module else [])])
    else:
        source = node.module or ""
    for alias in node.names:
        if f"{source}.{alias.name}" in modules:
            targets.add(f"{source}.{alias.name}")  # a submodule
        else:
            target = _known(source, modules)
            if target:
                targets.add(target)
    return targets


def import_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], str]]:
    """(module -> modules it imports, (module, imported) -> first file:line)."""
    modules = project_modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    lines: dict[tuple[str, str], str] = {}
    for name, module in modules.items():
        for node in ast.walk(parse(module)):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in imported(module, node, modules):
                    if target == name:
                        continue
                    graph[name].add(target)
                    lines.setdefault((name, target), where(module, node))
    return graph, lines


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components, each sorted, of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def shortest_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest cycle through the component's first module, inside the component."""
    start, members = component[0], set(component)
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for succ in sorted(graph[node] & members):
            if succ == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if succ not in parent:
                parent[succ] = node
                queue.append(succ)
    raise AssertionError(f"{start} is on no cycle")


def short(name: str) -> str:
    return name.removeprefix(TOP + ".")


def test_graph_sees_every_kind_of_import():
    """The graph is only as good as its parser: relative, function-level and
    ``TYPE_CHECKING`` imports, and ``from PKG import submodule``."""
    graph, lines = import_graph()
    engine = f"{TOP}.engine"
    assert f"{engine}.harness.trace" in graph[f"{engine}.harness.oracle"]  # from . import trace
    assert f"{engine}.job" in graph[f"{engine}.harness.runner"]  # absolute
    assert f"{engine}.harness.probe.capturing" in graph[f"{engine}.harness.runner"]  # in a function
    assert f"{engine}.harness.runner" in graph[f"{engine}.harness.sanitized"]  # in a try
    assert not any(target == TOP for targets in graph.values() for target in targets)


def test_no_import_cycles():
    graph, lines = import_graph()
    components = strongly_connected(graph)
    report = []
    for component in components:
        cycle = shortest_cycle(graph, component)
        inside = [(a, b) for a in component for b in sorted(graph[a]) if b in component]
        report.append(
            f"{len(component)} modules: {', '.join(short(m) for m in component)}\n"
            f"  e.g. {' -> '.join(short(m) for m in cycle)}\n"
            "  its imports:\n"
            + "".join(f"    {short(a)} -> {short(b)}: {lines[a, b]}\n" for a, b in inside)
        )
    assert not components, f"{len(components)} import cycle(s):\n" + "\n".join(report)


def test_no_cycle_between_the_engines_folders():
    """The engine's folders (sandbox/, harness/, writers/, ...) form layers: no folder reaches
    back into one that imports it. The data the two sides of a sandbox speak (``engine/job.py``)
    sits below both, and the code that runs in the sandbox's processes lives in harness/."""
    graph, lines = import_graph()
    engine = f"{TOP}.engine."

    def folder(name: str) -> str | None:
        rest = name.removeprefix(engine)
        return rest.split(".")[0] if name.startswith(engine) and "." in rest else None

    folders: dict[str, set[str]] = {}
    for a, targets in graph.items():
        for b in targets:
            fa, fb = folder(a), folder(b)
            if fa and fb and fa != fb:
                folders.setdefault(fa, set()).add(fb)
    for name in {f for targets in folders.values() for f in targets}:
        folders.setdefault(name, set())
    assert {"sandbox", "harness"} <= set(folders)
    assert "harness" in folders["sandbox"]  # the backends start the worker
    components = strongly_connected(folders)
    report = [
        " -> ".join(shortest_cycle(folders, c))
        + "".join(
            f"\n    {short(a)} -> {short(b)}: {lines[a, b]}"
            for a in graph
            for b in graph[a]
            if folder(a) in c and folder(b) in c and folder(a) != folder(b)
        )
        for c in components
    ]
    assert not components, "folder-level import cycles:\n" + "\n".join(report)


# -- who sets a verdict -------------------------------------------------------

#: The ledger, and the declarations of the records and the verdict words.
MAY_SET_VERDICTS = {"engine/verdicts.py", "engine/vocabulary.py", "engine/records.py"}
VERDICT_SCOPE = ("engine", "cli", "tui")
#: Code that runs inside a sandbox: it reports per-check outcomes (``CheckOutcome``),
#: which the engine reads through ``decide``; it holds no verdict to set.
SANDBOX_SIDE = "engine/harness/"


def _names(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        todo = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        todo = [node.target]
    else:
        return []
    flat = []
    while todo:
        target = todo.pop()
        if isinstance(target, ast.Tuple | ast.List):
            todo.extend(target.elts)
        elif isinstance(target, ast.Starred):
            todo.append(target.value)
        else:
            flat.append(target)
    return flat


def verdict_settings(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, what) for each place ``tree`` sets a verdict."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = _names(node.func)
            if func == "MutantOutcome":
                found.append((node.lineno, "MutantOutcome(...)"))
            elif func == "replace" and any(k.arg == "verdict" for k in node.keywords):
                found.append((node.lineno, "replace(..., verdict=...)"))
            elif (
                func in ("setattr", "__setattr__")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value == "verdict"
            ):
                found.append((node.lineno, f"{func}(..., 'verdict', ...)"))
        for target in _targets(node):
            if isinstance(target, ast.Subscript) and _names(target.value) == "outcomes":
                found.append((node.lineno, "outcomes[...] = ..."))
            elif isinstance(target, ast.Attribute) and target.attr == "verdict":
                found.append((node.lineno, ".verdict = ..."))
    return sorted(set(found))


def test_verdict_detector():
    source = """\
a = MutantOutcome(m, Verdict.KILLED)
b = records.MutantOutcome(m, Verdict.KILLED)
c = replace(o, verdict=Verdict.SURVIVED)
d = dataclasses.replace(o, verdict=v)
run.outcomes[m.id] = o
outcomes[k] = o
o.verdict = v
object.__setattr__(o, "verdict", v)
x, self.outcomes[k] = 1, o
e = replace(o, reason="r")
f = "a".replace("a", "b")
o.outcomes = {}
outcome[k] = o
v = o.verdict
"""
    assert [line for line, _ in verdict_settings(ast.parse(source))] == list(range(1, 10))


def test_only_the_ledger_sets_verdicts():
    violations = []
    for top in VERDICT_SCOPE:
        directory = ROOT / top
        for path in sorted(directory.rglob("*.py")) if directory.is_dir() else []:
            rel = path.relative_to(ROOT).as_posix()
            if (
                rel in MAY_SET_VERDICTS
                or "__pycache__" in path.parts
                or rel.startswith(SANDBOX_SIDE)
            ):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), rel)
            violations += [f"{rel}:{line}: {what}" for line, what in verdict_settings(tree)]
    assert not violations, (
        "a verdict is set outside engine/verdicts.py (the ledger):\n" + "\n".join(violations)
    )
