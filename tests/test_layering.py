"""The layering the design promises, checked in fresh interpreters."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def loaded_modules(*imports: str) -> set[str]:
    code = (
        "import sys\n"
        + "".join(f"import {name}\n" for name in imports)
        + "print('\\n'.join(sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return set(out.split())


def roots(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_engine_and_cache_import_no_textual_or_tui():
    modules = loaded_modules("mutant_gate.engine.pipeline", "mutant_gate.cache")
    assert "mutant_gate.engine.pipeline" in modules
    assert "textual" not in roots(modules)
    assert not any(name.startswith("mutant_gate.tui") for name in modules)


def test_harness_imports_only_what_a_sandbox_has():
    """Code that runs inside a sandbox must not need the tool's own dependencies."""
    modules = roots(
        loaded_modules("mutant_gate.engine.harness.runner", "mutant_gate.engine.harness.worker")
    )
    for forbidden in ("libcst", "rich", "diskcache", "textual", "openai", "contree_sdk"):
        assert forbidden not in modules, forbidden


def _trees(directory: Path):
    for path in sorted(directory.rglob("*.py")):
        if "__pycache__" not in path.parts:
            yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def _imports(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and not node.level:
        return [node.module or ""]
    return []


def test_cli_imports_no_textual_nor_the_explorer():
    names = [
        "mutant_gate.cli." + p.stem
        for p in sorted((ROOT / "cli").glob("*.py"))
        if p.stem != "__main__"
    ]
    modules = loaded_modules(*names)
    assert "mutant_gate.cli.main" in modules
    for forbidden in ("textual", "openai", "contree_sdk"):
        assert forbidden not in roots(modules), forbidden
    assert not any(name.startswith("mutant_gate.tui") for name in modules)


def test_cli_reaches_the_explorer_only_inside_a_function():
    """No ``textual`` anywhere in ``cli/``; ``mutant_gate.tui`` only as a lazy import."""
    found = []
    for path, tree in _trees(ROOT / "cli"):
        lazy = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            for inner in ast.walk(node)
        }
        for node in ast.walk(tree):
            for name in _imports(node):
                if name.split(".")[0] == "textual":
                    found.append(f"{path.name}:{node.lineno}: {name}")
                elif name.startswith("mutant_gate.tui") and id(node) not in lazy:
                    found.append(f"{path.name}:{node.lineno}: {name} at module level")
    assert not found, found


def test_tui_is_the_explorer_only():
    """Parsing flags is the command line's job: ``tui/`` holds no argparse, imports no cli."""
    found = []
    for path, tree in _trees(ROOT / "tui"):
        for node in ast.walk(tree):
            for name in _imports(node):
                if name == "argparse" or name.startswith("mutant_gate.cli"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    assert not found, found


#: what the faces (``cli/``, ``tui/``) import of the engine, module by module (an import
#: contract, as harlequin's): the session (a run's lifecycle), the types it speaks in, and
#: the modules whose names a face shows or reads. A face that needs another engine module
#: names it here, in the same commit: what the faces depend on stays one list to read.
FACE_ALLOWLIST = frozenset(
    {
        # a run's lifecycle, and the types it speaks in
        "mutant_gate.engine.session",
        "mutant_gate.engine.vocabulary",
        "mutant_gate.engine.events",
        "mutant_gate.engine.errors",
        "mutant_gate.engine.settings",
        "mutant_gate.engine.records",
        # the sandbox backends' table: the --backend choices, the options' checks; the
        # local pool's start error, which the command line says in one line
        "mutant_gate.engine.sandbox.backends",
        "mutant_gate.engine.sandbox.local",
        # the report, its rows and formats, and the words they share with the faces
        "mutant_gate.engine.report",
        "mutant_gate.engine.formats",
        "mutant_gate.engine.formats.site",
        "mutant_gate.engine.formats.words",
        "mutant_gate.engine.prices",
        # files a run reads or writes beside its report
        "mutant_gate.engine.accepted",
        "mutant_gate.engine.predictions",
        # a library's run: its modules, shards and their merge
        "mutant_gate.engine.library",
        "mutant_gate.engine.library_paths",  # its kernel modules and test files, found
        # reruns and studies
        "mutant_gate.engine.rerun",
        "mutant_gate.engine.study",
        # flags' meanings: --mode, --probe-triggers, the survivor checks a face toggles
        "mutant_gate.engine.modes",
        "mutant_gate.engine.writers.probe.kinds",
        "mutant_gate.engine.checks",
    }
)


def test_the_faces_reach_the_engine_only_through_its_door():
    found = []
    for face in ("cli", "tui"):
        for path, tree in _trees(ROOT / face):
            for node in ast.walk(tree):
                names = _imports(node)
                if isinstance(node, ast.ImportFrom) and node.module == "mutant_gate.engine":
                    names = [f"mutant_gate.engine.{alias.name}" for alias in node.names]
                for name in names:
                    if name.startswith("mutant_gate.engine") and name not in FACE_ALLOWLIST:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    assert not found, "\n".join(found)


def test_the_allowlist_names_only_modules_a_face_imports():
    """The contract stays true both ways: every module on it is one a face imports."""
    used = set()
    for face in ("cli", "tui"):
        for _, tree in _trees(ROOT / face):
            for node in ast.walk(tree):
                used.update(_imports(node))
                if isinstance(node, ast.ImportFrom) and node.module == "mutant_gate.engine":
                    used.update(f"mutant_gate.engine.{alias.name}" for alias in node.names)
    assert FACE_ALLOWLIST <= used, sorted(FACE_ALLOWLIST - used)
    from mutant_gate.engine.checks import TOGGLED

    assert "compile-check" in TOGGLED and "claims" not in TOGGLED
