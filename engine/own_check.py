"""What a kernel file's own check is, and whether it can fail at all.

Tutorial-style files run their check at module level (no ``__main__`` block):
top-level statements that call the file's own functions or launch a kernel.
A check that never asserts (it only prints, as the vector-add tutorial does)
can kill a mutant only by crashing: the report says so plainly.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .harness.main_guard import is_main_guard

NOTHING_ASSERTED = (
    "the own check asserts nothing: mutants can only be killed by crashes, bounds or new tests"
)


@dataclass(frozen=True)
class OwnCheck:
    has_main: bool
    module_level: bool  # top-level code exercises the file's own functions
    test_functions: tuple[str, ...]  # runnable under pytest (no unfilled parameters)
    asserts: bool


def _called_names(nodes: list[ast.AST]) -> set[str]:
    """Names called in ``nodes``: ``f(...)`` and kernel launches ``k[grid](...)``."""
    names = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                func = sub.func.value if isinstance(sub.func, ast.Subscript) else sub.func
                if isinstance(func, ast.Name):
                    names.add(func.id)
                elif isinstance(func, ast.Attribute):
                    names.add(func.attr)
    return names


def _asserts(nodes: list[ast.AST], *, raises: bool) -> bool:
    """Whether ``nodes`` check a result: ``assert`` on a comparison or a call
    (``assert x.is_cuda`` is a precondition, not a check), an ``assert*``
    helper (``torch.testing.assert_close``), or (with ``raises``) a ``raise``."""
    return any(_is_check(sub, raises) for node in nodes for sub in ast.walk(node))


def _is_check(node: ast.AST, raises: bool) -> bool:
    """Whether one node checks a result (``_asserts``)."""
    if isinstance(node, ast.Assert):
        return any(isinstance(n, ast.Compare | ast.Call) for n in ast.walk(node.test))
    if isinstance(node, ast.Raise):
        return raises
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return "assert" in name.lower() or name in ("fail", "raises")
    return False


def _runnable_test(fn: ast.FunctionDef) -> bool:
    """A ``test_*`` function pytest can call: every parameter has a default or is parametrized."""
    if not fn.name.startswith("test"):
        return False
    params = fn.args.posonlyargs + fn.args.args
    required = len(params) - len(fn.args.defaults)
    if required == 0:
        return True
    return any(
        "parametrize" in ast.unparse(d) or "fixture" in ast.unparse(d) for d in fn.decorator_list
    )


def _top_level_code(tree: ast.Module) -> list[ast.stmt]:
    """The module's statements that run on import: not a definition, an import or the
    ``__main__`` block."""
    return [
        n
        for n in tree.body
        if not isinstance(
            n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Import | ast.ImportFrom
        )
        and not is_main_guard(n)
    ]


def _reached_functions(entry: list[ast.AST], functions: dict[str, ast.AST]) -> dict[str, ast.AST]:
    """The file's functions that ``entry`` calls, directly or through one another."""
    reached: dict[str, ast.AST] = {}
    frontier = _called_names(entry) & set(functions)
    while frontier:
        name = frontier.pop()
        reached[name] = functions[name]
        frontier |= (_called_names([functions[name]]) & set(functions)) - set(reached)
    return reached


def _module_functions(tree: ast.Module) -> dict[str, ast.AST]:
    """The module's top-level functions (plain and async), by name."""
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def _test_functions(tree: ast.Module) -> tuple[str, ...]:
    """The names of the module's top-level test functions pytest can call."""
    return tuple(n.name for n in tree.body if isinstance(n, ast.FunctionDef) and _runnable_test(n))


def analyse(source: str) -> OwnCheck:
    tree = ast.parse(source)
    functions = _module_functions(tree)
    main = [n for n in tree.body if is_main_guard(n)]
    top = _top_level_code(tree)
    module_level = bool(_called_names(top) & set(functions))
    tests = _test_functions(tree)
    # Everything the check runs: its entry code and the file's functions it reaches.
    entry: list[ast.AST] = [*main, *(top if module_level else []), *(functions[t] for t in tests)]
    reached = _reached_functions(entry, functions)
    return OwnCheck(
        has_main=bool(main),
        module_level=module_level,
        test_functions=tests,
        # A raise in a wrapper guards its inputs; a raise in the check itself is a check.
        asserts=_asserts(entry, raises=True) or _asserts(list(reached.values()), raises=False),
    )
