"""Written tests as files the user owns: each accepted test (and its data files) in one
folder, as soon as it is accepted (``keep``) and again when the run ends (``write_tests``).

A test file goes out as it was proved, with a guarded prologue before its first import
of the kernel (``prologue``): with mutant-gate installed, it loads the kernel module as
the test's proof in the sandbox met it (``harness/written``: the GPU-query shims, the
bounds check, a tutorial file's module-level check left out); without, the import is
plain. So each written test runs under plain pytest, from the folder's parent (file
mode) or the project's root (project mode): ``run_command`` says how.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass

from ..kernel_file import KernelFile, TestFile
from ..stage import StageContext
from ..testlist import WRITTEN, find_test_functions

#: The prologue's first line, also how a file already holding one is recognised.
MARK = "try:  # mutant-gate: "


@dataclass(frozen=True)
class Written:
    """What ``write_tests`` wrote: every path, and the count by kind."""

    directory: str
    paths: tuple[str, ...]
    tests: int  # test functions
    files: int  # test files
    data: int  # data files (a probe test's golden values)
    command: str  # how to run them with plain pytest

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def shown(self) -> str:
        """The folder as a user would type it (relative to the working directory)."""
        return shown(self.directory)


def _relative(target: str, directory: str) -> str:
    return os.path.relpath(os.path.abspath(target), os.path.abspath(directory))


def _quoted(text: str) -> str:
    return json.dumps(text)


def _call(test: TestFile, kernel: KernelFile, directory: str) -> tuple[str, str, str]:
    """(what the prologue imports, its call, why in words)."""
    project = kernel.project
    if project is not None:
        package = project.module.split(".")[0]
        root = _relative(project.import_root, directory)
        why = f"{package} as the project's tests import it"
        return "prepare", f"prepare(__file__, {_quoted(package)}, {_quoted(root)}", why
    checks = ", checks=True" if test.origin != "probe" else ""
    path = _relative(kernel.path, directory)
    why = f"{kernel.name} loaded as mutant-gate's checks loaded it"
    return (
        "load_kernel",
        f"load_kernel(__file__, {_quoted(kernel.module)}, {_quoted(path)}{checks}",
        why,
    )


def prologue(test: TestFile, kernel: KernelFile, directory: str, poison: bool = True) -> str:
    """The guarded lines that make ``test`` meet the kernel outside the tool."""
    what, call, why = _call(test, kernel, directory)
    more = "" if poison else ", poison=False"
    return (
        f"{MARK}{why}\n"
        f"    from mutant_gate.engine.harness.written import {what}\n"
        "except ImportError:  # without mutant-gate: the kernel module is imported as it is\n"
        "    pass\n"
        "else:\n"
        f"    {call}{more})\n\n"
    )


def _imports(node: ast.stmt, module: str) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == module for a in node.names)
    return isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == module


def _insert_line(source: str, module: str) -> int:
    """Where the prologue goes (a 0-based line): before the first top-level import of
    ``module``, or before the first statement that is not an import or the docstring."""
    tree = ast.parse(source)
    for index, node in enumerate(tree.body):
        docstring = (
            index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        )
        if _imports(node, module):
            return node.lineno - 1
        if not docstring and not isinstance(node, ast.Import | ast.ImportFrom):
            return node.lineno - 1 - len(getattr(node, "decorator_list", ()) or ())
    return len(source.splitlines())


def on_disk(test: TestFile, kernel: KernelFile, directory: str, poison: bool = True) -> str:
    """``test``'s source as it is written to ``directory``: the prologue added."""
    if MARK in test.source:
        return test.source
    project = kernel.project
    module = project.module.split(".")[0] if project is not None else kernel.module
    lines = test.source.splitlines(keepends=True)
    at = _insert_line(test.source, module)
    return "".join(lines[:at]) + prologue(test, kernel, directory, poison) + "".join(lines[at:])


def write_test(
    test: TestFile, kernel: KernelFile, directory: str, poison: bool = True
) -> list[str]:
    """One written test and its data files in ``directory``; the paths written."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for name, text in ((test.name, on_disk(test, kernel, directory, poison)), *test.data):
        path = os.path.join(directory, name)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        paths.append(path)
    return paths


def shown(path: str) -> str:
    """A path as a user would type it: relative to the working directory when under it."""
    rel = os.path.relpath(os.path.abspath(path))
    return path if rel.startswith("..") else rel


def run_command(kernel: KernelFile | None, directory: str, mode: str = "interpret") -> str:
    """How to run the folder's tests with plain pytest (from the project's root in
    project mode)."""
    env = "TRITON_INTERPRET=1 " if mode == "interpret" else ""
    folder = shown(directory).rstrip("/") + "/"
    project = kernel.project if kernel is not None else None
    here = os.path.abspath(os.getcwd())
    if project is not None and os.path.abspath(project.root) != here:
        folder = _relative(directory, project.root).rstrip("/") + "/"
        return f"cd {project.root} && {env}python -m pytest {folder}"
    return f"{env}python -m pytest {folder}"


def write_tests(
    tests: Iterable[TestFile],
    kernel: KernelFile | None,
    directory: str,
    mode: str = "interpret",
    poison: bool = True,
) -> Written:
    """Every written (not given) test of ``tests`` and its data files, in ``directory``."""
    paths: list[str] = []
    functions = files = data = 0
    for test in tests:
        if test.origin not in WRITTEN or kernel is None:
            continue
        paths += write_test(test, kernel, directory, poison)
        functions += len(find_test_functions(test.source))
        files += 1
        data += len(test.data)
    return Written(
        directory, tuple(paths), functions, files, data, run_command(kernel, directory, mode)
    )


def keep(ctx: StageContext, test: TestFile) -> str:
    """An accepted test written at once to the run's folder (``--write-tests``, by
    default ``mutant-gate-tests``); the name to show it by: its path, or its name when
    the run writes no tests (or the folder cannot be written: the run's end says so)."""
    directory = ctx.settings.writers.write_tests
    if not directory:
        return test.name
    try:
        write_test(test, ctx.kernel, directory, ctx.settings.poison_undefined)
    except OSError:
        return test.name
    return os.path.join(directory, test.name)
