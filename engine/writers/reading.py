"""Reading a written test before it runs: its code out of a reply, what it may not do
(``source_problem``, ``static_problem``: read with ``ast``, never run), and its names.
The proof that runs it is ``proving``'s."""

from __future__ import annotations

import ast
import re

from ..stage import StageContext
from ..testlist import find_test_functions

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)


def extract_code(text: str) -> str | None:
    """The Python code block of a reply (the longest one holding a test, if several)."""
    blocks = _python_blocks(text)
    if not blocks:
        return None
    with_tests = [b for b in blocks if re.search(r"^\s*(async\s+)?def\s+test", b, re.M)]
    return max(with_tests or blocks, key=len).strip() + "\n"


def _python_blocks(text: str | None) -> list[str]:
    """The bodies of a reply's fenced code blocks that hold something and are Python
    (no language named, or python, py, python3, pytest), in order."""
    return [
        body
        for lang, body in _FENCE.findall(text or "")
        if body.strip() and lang.lower() in ("", "python", "py", "python3", "pytest")
    ]


#: Modules a generated test may not import: they read code, or reach into the harness.
REFUSED_MODULES = ("inspect", "linecache", "dis", "tokenize", "mutant_gate", "_pytest")
#: Attributes that hold a kernel's source or code, or the harness's plumbing.
REFUSED_ATTRIBUTES = frozenset(
    {
        "src",
        "fn",
        "__code__",
        "__wrapped__",
        "__loader__",
        "__spec__",
        "__file__",
        "getsource",
        "getsourcelines",
        "getfile",
        "_exit",
        "exit",
        "kill",
    }
)
_READS = frozenset({"read_text", "read_bytes", "open"})


def _literal_data(node: ast.AST) -> bool:
    """A string literal that names no Python file."""
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and not node.value.rstrip().endswith((".py", ".pyc"))
    )


def _own_data_path(node: ast.AST) -> bool:
    """``Path(__file__).with_name("golden.json")`` (the test's own data file) or
    ``open("/proc/self/environ")``: a file named by a literal that is no Python file."""
    return any(
        isinstance(sub, ast.Call)
        and bool(sub.args)
        and _literal_data(sub.args[0])
        and (
            (sub is node and isinstance(sub.func, ast.Name) and sub.func.id == "open")
            or (isinstance(sub.func, ast.Attribute) and sub.func.attr == "with_name")
        )
        for sub in ast.walk(node)
    )


def _own_data_nodes(tree: ast.AST) -> set[int]:
    """The ids of the nodes inside a call that opens the test's own data (``_own_data_path``)."""
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _own_data_path(node):
            allowed.update(id(sub) for sub in ast.walk(node))
    return allowed


def _import_problem(node: ast.Import | ast.ImportFrom) -> str | None:
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
    if isinstance(node, ast.ImportFrom):
        names.append(node.module or "")
    for name in names:
        if name.split(".")[0] in REFUSED_MODULES:
            return f"it imports {name}, which reads code or reaches into the harness"
    return None


def _name_problem(node: ast.Name) -> str | None:
    if node.id not in ("__file__", "__builtins__", "open"):
        return None
    what = "opens files" if node.id == "open" else f"uses {node.id}"
    return f"it {what}: a test may read only its own data files, never the kernel's"


def _attribute_problem(node: ast.Attribute) -> str | None:
    if node.attr not in REFUSED_ATTRIBUTES and node.attr not in _READS:
        return None
    return (
        f"it uses .{node.attr}: a test must look at the kernel's outputs, never at its "
        "source, its file, the harness or the process's exit"
    )


def _hook_problem(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    if not node.name.startswith("pytest_"):
        return None
    return f"it defines the pytest hook {node.name}: a test may not change how tests report"


#: what ``source_problem`` looks for, by the kind of node
_NODE_PROBLEMS = (
    (ast.Import | ast.ImportFrom, _import_problem),
    (ast.Name, _name_problem),
    (ast.Attribute, _attribute_problem),
    (ast.FunctionDef | ast.AsyncFunctionDef, _hook_problem),
)


def _node_problem(node: ast.AST) -> str | None:
    """Why this one node may not be in a generated test (``source_problem``), or None."""
    for kinds, problem in _NODE_PROBLEMS:
        if isinstance(node, kinds):
            return problem(node)
    return None


def source_problem(tree: ast.AST) -> str | None:
    """Why a generated test may not run at all: it reads the kernel's source or file, or
    reaches into the harness or the test runner, or forges its own exit. Read, never
    run; the behaviour check (``verdicts.kill_evidence``) stands behind it."""
    allowed = _own_data_nodes(tree)
    for node in ast.walk(tree):
        problem = None if id(node) in allowed else _node_problem(node)
        if problem is not None:
            return problem
    return None


def _imports_module(tree: ast.AST, module: str) -> bool:
    """Whether the code imports ``module`` (or names it, for ``importlib.import_module``)."""
    return any(_names_module(node, module) for node in ast.walk(tree))


def _names_module(node: ast.AST, module: str) -> bool:
    """Whether one node imports ``module`` or is its name as a string constant."""
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == module for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == module
    return isinstance(node, ast.Constant) and node.value == module  # importlib.import_module


def static_problem(code: str, module: str) -> str | None:
    """Why ``code`` cannot be a test file for ``module`` (read, never run), or None."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return f"the code is not valid Python (line {exc.lineno}: {exc.msg})"
    if not find_test_functions(code):
        return "the code has no top-level test_* function"
    refused = source_problem(tree)
    if refused is not None:
        return f"refused before it ran: {refused}"
    if _imports_module(tree, module):
        return None
    return f"the tests never import the kernel module {module!r}"


def rename_taken(code: str, taken: set[str]) -> str:
    """Rename top-level test functions whose names another test file of the run uses,
    so every kill names exactly one test."""
    for name in find_test_functions(code):
        if name not in taken:
            continue
        n = 2
        while f"{name}_{n}" in taken:
            n += 1
        code = re.sub(
            rf"^((?:async\s+)?def\s+){re.escape(name)}(\s*\()",
            rf"\g<1>{name}_{n}\2",
            code,
            count=1,
            flags=re.M,
        )
    return code


def taken_names(ctx: StageContext) -> set[str]:
    names = set(ctx.kernel.test_functions)
    for test in ctx.kernel.tests:
        names.update(find_test_functions(test.source))
    return names


def file_stem(ctx: StageContext) -> str:
    return "test_" + re.sub(r"\W", "_", ctx.kernel.module) + "_mg"
