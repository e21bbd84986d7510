"""What a library run's paths hold: the kernel modules below the kernel paths, the test
files below the test paths, and which modules ``--changed-since`` leaves unchanged.

``find_modules`` walks the paths for ``.py`` files with a ``@triton.jit`` function (less
``--exclude`` globs); ``find_tests`` walks the test paths for the files ``pytest PATH``
would collect (the project's ``python_files``, less its ``norecursedirs``). The run
itself is ``library.Library``'s.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import tomllib
from collections.abc import Iterator
from configparser import ConfigParser

from .errors import BadInput
from .kernel_file import split_node_id
from .project import find_root

#: pytest's defaults for the files a directory collects, and the folders it never enters
PYTHON_FILES = ("test_*.py", "*_test.py")
NORECURSE = ("*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}")
SKIP_DIRS = ("__pycache__", "site-packages")


def is_library(paths: list[str], tests: list[str], shard: str | None = None) -> bool:
    """Whether a run is a library's: several paths, a directory (of kernels or of tests),
    or a shard. One kernel file with test files runs as it always has."""
    if len(paths) != 1 or os.path.isdir(paths[0]) or shard:
        return True
    return any(os.path.isdir(split_node_id(t)[0]) for t in tests)


def has_jit(path: str) -> bool:
    """A ``.py`` file with a ``@triton.jit`` function, by the rule a run finds them with
    (``mutate.jit``: ``triton.jit``, an alias of ``triton``, ``from triton import jit``);
    another library's ``@cute.jit`` or ``@numba.jit`` is not one. A file that does not
    parse counts where its text names ``triton.jit``: its run then says what is wrong."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError):
        return False
    if "jit" not in text:
        return False
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return "triton.jit" in text
    from .mutate.jit import ast_jit_functions  # libcst: not for --help (test_startup)

    return next(ast_jit_functions(tree), None) is not None


def _excluded(path: str, base: str, exclude: tuple[str, ...]) -> bool:
    """``--exclude GLOB``: matched against the path below the directory given, the path
    as shown from here, and the file's name."""
    names = {os.path.relpath(path, base), shown(path), os.path.basename(path)}
    return any(fnmatch.fnmatch(n, glob) for n in names for glob in exclude)


def _walk(directory: str, norecurse: tuple[str, ...] = NORECURSE) -> Iterator[str]:
    for here, dirs, files in os.walk(directory):
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIP_DIRS and not any(fnmatch.fnmatch(d, g) for g in norecurse)
        )
        for name in sorted(files):
            yield os.path.join(here, name)


def find_modules(paths: list[str], exclude: tuple[str, ...] = ()) -> list[str]:
    """Every kernel module the paths name: a file as given (it must hold a jit function),
    a directory's ``.py`` files below it that do; each once, in the order found."""
    found: list[str] = []
    for path in paths:
        if not os.path.exists(path):
            raise BadInput(f"kernel file not found: {path}")
        if os.path.isfile(path):
            if not has_jit(path):
                raise BadInput(f"{path}: no @triton.jit function found")
            mine = [os.path.abspath(path)]
        else:
            mine = _modules_below(path, exclude)
        found += [p for p in mine if p not in found]
    return found


def _modules_below(directory: str, exclude: tuple[str, ...]) -> list[str]:
    """The ``.py`` files below ``directory`` that hold a jit function, less ``exclude``;
    bad input when there is none."""
    mine = [
        os.path.abspath(p)
        for p in _walk(directory)
        if p.endswith(".py") and not _excluded(p, directory, exclude) and has_jit(p)
    ]
    if not mine:
        left = f" (less --exclude {' '.join(exclude)})" if exclude else ""
        raise BadInput(f"{directory}: no .py file with a @triton.jit function below it{left}")
    return mine


def jit_names(path: str) -> list[str]:
    """The names of a module's ``@triton.jit`` functions, read from its source."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    from .mutate.jit import ast_jit_functions  # libcst: not for --help (test_startup)

    return [node.name for node in ast_jit_functions(tree)]


def changed_modules(modules: list[str], ref: str) -> tuple[list[str], list[str]]:
    """``--changed-since REF`` over a library: (the modules with a jit function whose
    lines changed since REF, the others), each in the order given. A module that does
    not parse counts as changed: its run says what is wrong with it."""
    from .changes import changed_functions  # git: only for --changed-since

    changed, unchanged = [], []
    for path in modules:
        try:
            names = jit_names(path)
            with open(path, encoding="utf-8") as fh:
                source = fh.read()
        except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
            changed.append(path)
            continue
        (changed if changed_functions(path, source, names, ref) else unchanged).append(path)
    return changed, unchanged


def unchanged_line(unchanged: list[str], changed: list[str], ref: str) -> str:
    """The line for ``--changed-since``: "12 modules unchanged since REF", once a run."""
    n = len(unchanged)
    names = f" ({', '.join(shown(p) for p in unchanged)})" if n <= 3 else ""
    head = f"{n} module{'s' if n != 1 else ''} unchanged since {ref}{names}, not run"
    return head if changed else f"{head}: no kernel module changed, nothing to judge"


def pytest_config(root: str) -> dict[str, list[str]]:
    """``python_files`` and ``norecursedirs`` from the project's pytest configuration
    (pytest.ini, pyproject.toml's ``[tool.pytest.ini_options]``, tox.ini, setup.cfg, in
    pytest's order); pytest's defaults where it says nothing."""
    found: dict[str, object] = {}
    for name in ("pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"):
        path = os.path.join(root, name)
        table = _pytest_section(path, name) if os.path.isfile(path) else None
        if table is not None:
            found = table
            break

    def words(key: str, default: tuple[str, ...]) -> list[str]:
        value = found.get(key)
        if value is None:
            return list(default)
        return value.split() if isinstance(value, str) else [str(v) for v in value]

    return {
        "python_files": words("python_files", PYTHON_FILES),
        "norecursedirs": words("norecursedirs", NORECURSE),
    }


def _pytest_section(path: str, name: str) -> dict | None:
    """The pytest settings of one configuration file ``name`` at ``path``; None where it
    holds none or cannot be read."""
    if name == "pyproject.toml":
        try:
            with open(path, "rb") as fh:
                table = tomllib.load(fh).get("tool", {}).get("pytest", {}).get("ini_options")
        except (OSError, tomllib.TOMLDecodeError):
            table = None
        return None if table is None else dict(table)
    parser = ConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except Exception:  # noqa: BLE001 - an unreadable file: pytest's defaults
        return None
    section = "tool:pytest" if name == "setup.cfg" else "pytest"
    return dict(parser.items(section)) if parser.has_section(section) else None


def find_tests(tests: list[str], root: str | None) -> list[str]:
    """The test files the paths name: a file (or node id) as given, a directory's files
    that ``pytest DIR`` collects (the project's ``python_files``, less its
    ``norecursedirs``). A path that collects no file is bad input."""
    found: list[str] = []
    for arg in tests:
        path, _ = split_node_id(arg)
        if not os.path.exists(path):
            raise BadInput(f"test file not found: {path}")
        if not os.path.isdir(path):
            found.append(arg)
            continue
        mine = _tests_below(arg, path, root)
        found += [p for p in mine if p not in found]
    return found


def _tests_below(arg: str, directory: str, root: str | None) -> list[str]:
    """The files ``pytest DIR`` collects below ``directory`` (the project's
    ``python_files``, less its ``norecursedirs``); bad input when none."""
    config = pytest_config(root or find_root(directory) or os.getcwd())
    patterns = config["python_files"]
    mine = [
        p
        for p in _walk(directory, tuple(config["norecursedirs"]))
        if p.endswith(".py") and any(fnmatch.fnmatch(os.path.basename(p), g) for g in patterns)
    ]
    if not mine:
        raise BadInput(
            f"--tests {arg}: collects no test file (pytest collects {' '.join(patterns)})"
        )
    return mine


def shown(path: str) -> str:
    """A path as a user would type it: relative to the working directory when under it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel
