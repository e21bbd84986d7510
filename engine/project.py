"""Kernel modules inside a package, tested by the project's own test suite.

``mutant-gate run src/pkg/ops/rms_norm.py --tests tests/ops/test_rms_norm.py``: the
module's import path is found from its package's ``__init__.py`` files; the sandbox
sees the project through a writable view of the job's own (harness/isolation.py) and
loads the mutant in place of the module at that import path (engine/harness/project.py); tests run from the project root with the
project's own pytest configuration and conftest fixtures.
"""

from __future__ import annotations

import ast
import functools
import os
from dataclasses import asdict, dataclass

from .errors import BadInput

ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", "pytest.ini", "tox.ini", ".git")


@dataclass(frozen=True)
class Project:
    root: str  # tests run from here (a writable view of it in the sandbox)
    import_root: str  # the sys.path entry the module's top package lives in
    module: str  # dotted import path of the kernel module
    module_file: str  # the original file (absolute)

    def to_json(self) -> dict:
        return asdict(self)


def find_root(start: str) -> str | None:
    here = os.path.abspath(start)
    while True:
        if any(os.path.exists(os.path.join(here, m)) for m in ROOT_MARKERS):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def module_path(path: str) -> tuple[str, str] | None:
    """(import_root, dotted name) when ``path`` lies inside a package, else None. A folder
    without an ``__init__.py`` inside a package is a namespace portion of it (PEP 420:
    ``pkg/ops/experimental/k.py`` imports as ``pkg.ops.experimental.k`` when ``pkg/ops`` is
    a package), as Python imports it."""
    path = os.path.abspath(path)
    parts = [os.path.splitext(os.path.basename(path))[0]]
    folder = os.path.dirname(path)
    while _in_package(folder):
        parts.append(os.path.basename(folder))
        folder = os.path.dirname(folder)
    if len(parts) == 1:
        return None
    return folder, ".".join(reversed(parts))


def _in_package(folder: str) -> bool:
    """Whether ``folder`` is a package, or a namespace portion of the package above it."""
    if os.path.exists(os.path.join(folder, "__init__.py")):
        return True
    parent = os.path.dirname(folder)
    return parent != folder and os.path.exists(os.path.join(parent, "__init__.py"))


def detect(kernel_path: str, tests: list[tuple[str, str]], root: str | None) -> Project | None:
    """The project layout when the kernel is a module of a package with given tests.

    ``tests`` are (path, source) pairs. Whether a test file reaches the module is judged
    by the original's run (``baseline.run_baseline``: which kernels its cases launch),
    not by its import lines: a test may import the kernel through a package's
    re-exports (``from pkg.ops import layer_norm``).
    """
    located = module_path(kernel_path)
    if located is None or not tests:
        if root is not None and located is None:
            raise BadInput(
                f"{kernel_path}: --project-root given, but the file is not inside a package"
            )
        return None
    import_root, module = located
    root = os.path.abspath(root) if root else find_root(os.path.dirname(kernel_path)) or os.getcwd()
    return Project(root, import_root, module, os.path.abspath(kernel_path))


def jit_callers(source: str, function: str) -> set[str]:
    """``function`` and every jit function that calls it, directly or through others.

    A test that launches any of them reaches a mutant of ``function``; launches
    record only the kernel launched, not the ``@triton.jit`` helpers it calls.
    """
    bodies = _calls(source)
    reach = {function}
    while True:
        more = {name for name, calls in bodies.items() if calls & reach} - reach
        if not more:
            return reach
        reach |= more


def record_reaches(record: dict, module: str | None, names: set[str]) -> bool:
    """Whether a launch record reaches a jit function of ``module`` named in ``names``
    (a mutant's function and its callers in the module's source: ``jit_callers``).

    A record is a test case's or a job's: ``functions``, the names of the kernels
    launched, and ``reaches``, ``module:name`` of every jit function those kernels
    reached, transitively, wherever they were defined or generated (a kernel a library
    writes to a cache module at run time reaches the op module's function it calls).
    With ``reaches``: an entry of ``module`` (of any module where it is None: a kernel
    file's own run) with one of ``names``. A record without it (a result cached before
    it was kept) matches as it always did: a kernel launched under one of ``names``. A
    case the original's run left out (``left_out``) reaches nothing."""
    if record.get("left_out"):
        return False
    reaches = record.get("reaches")
    if reaches is None:
        return bool(names & set(record.get("functions") or ()))
    for entry in reaches:
        of, _, name = entry.rpartition(":")
        if name in names and (module is None or of == module):
            return True
    return False


@functools.lru_cache(maxsize=8)
def _calls(source: str) -> dict[str, frozenset[str]]:
    """Each top-level function of ``source`` -> the names it calls. Parsed once per
    source: a run asks once per mutant, and parsing each time was most of a cached
    rerun's time on a file with many mutants."""
    tree = ast.parse(source)
    return {
        node.name: frozenset(
            call.func.id if isinstance(call.func, ast.Name) else call.func.attr
            for call in ast.walk(node)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name | ast.Attribute)
        )
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
    }
