"""Inside the sandbox, project mode: the mutant stands in for the module at its
import path, and each test's kernel launches are recorded (stdlib+torch+triton).

``install(module, path)`` puts a finder first on ``sys.meta_path`` that loads
``module`` from ``path`` (the mutated source), so ``from pkg.ops.rms_norm import ...``
in the project's tests, relative imports inside the module and package
``__init__`` side effects all behave as under plain pytest.
``Coverage`` is a pytest plugin: for every test case, which jit functions it
launched, which jit functions those reach and how long its call took; the pipeline
selects tests from it.

A launched kernel reaches the jit functions it calls, transitively, wherever it was
defined: a kernel a library generates at run time (written to a cache module and
imported) reaches the op module's ``@triton.jit`` function it calls. The walk follows
the names of each function's source through its globals (and the jit functions passed
to the launch), as Triton's own dependency walk does, and records each function it
meets as ``module:name`` (``reaches``); Triton's own ``triton.*`` functions are left out.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.util
import inspect
import sys
import textwrap
import time
from types import ModuleType
from typing import Any

from . import compiles


def load_as(name: str, path: str) -> Any:
    """The file ``path`` imported as the module ``name`` (in ``sys.modules`` while it
    runs, so it may import itself; taken out again when it raises)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[name] = loaded
    try:
        spec.loader.exec_module(loaded)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return loaded


_LAUNCHED: set[str] = set()  # per test case (project mode's coverage)
_EVER: set[str] = set()  # every kernel this job launched (the baseline's launch record)
_REACHED: set[str] = set()  # per test case: "module:name" of every jit function reached
_EVER_REACHED: set[str] = set()  # ... and of every one this job's launches reached


class _Override(importlib.abc.MetaPathFinder):
    def __init__(self, module: str, path: str) -> None:
        self.module, self.path = module, path

    def find_spec(self, fullname: str, path: Any = None, target: Any = None):
        if fullname != self.module:
            return None
        return importlib.util.spec_from_file_location(fullname, self.path)


def install(module: str, path: str) -> None:
    sys.meta_path.insert(0, _Override(module, path))
    sys.modules.pop(module, None)
    record_launches()


def launched() -> list[str]:
    """The names of every jit kernel this process launched since ``record_launches``."""
    return sorted(_EVER)


def reached() -> list[str]:
    """``module:name`` of every jit function this process's launches reached since
    ``record_launches`` (the kernels launched among them)."""
    return sorted(_EVER_REACHED)


def record_launches() -> None:
    """Note the name of every kernel launched (interpreter and compiled launches) and the
    jit functions it reaches, from an empty record (a warm runner's process serves many
    jobs)."""
    from triton.compiler import compiler
    from triton.runtime import interpreter, jit

    _LAUNCHED.clear()
    _EVER.clear()
    _REACHED.clear()
    _EVER_REACHED.clear()

    def wrap(owner: Any, attr: str, name_of: Any, reach: Any) -> None:
        """``reach``: the jit object a launch through ``owner.attr`` is walked from (None:
        the launch is walked elsewhere)."""
        original = getattr(owner, attr)
        if getattr(original, "_mutant_gate_records", False):
            return

        def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
            if name_of is not None:
                name = name_of(self)
                _LAUNCHED.add(name)
                _EVER.add(name)
            if reach is not None and not kwargs.get("warmup"):
                try:
                    found = launch_reaches(reach(self), args, kwargs)
                except Exception:  # noqa: BLE001 - the record never stops a launch
                    found = frozenset()
                _REACHED.update(found)
                _EVER_REACHED.update(found)
            return original(self, *args, **kwargs)

        launch._mutant_gate_records = True  # type: ignore[attr-defined]
        setattr(owner, attr, launch)

    # The interpreter's launches are named by its grid executor (the rewritten function)
    # and walked from the jit object that made it (its source and globals are the user's).
    itself = lambda self: self  # noqa: E731
    wrap(interpreter.GridExecutor, "__call__", lambda self: self.fn.__name__, reach=None)
    wrap(interpreter.InterpretedFunction, "run", None, reach=itself)
    wrap(jit.JITFunction, "run", lambda self: self.fn.__name__, reach=itself)
    # A library may keep the compiled kernel of a first launch and launch it again itself
    # (``compiled[grid](*args)``), never through ``JITFunction.run`` again: each case
    # that does is recorded too, from the jit function the kernel was compiled from.
    wrap(compiler.CompiledKernel, "__getitem__", _compiled_name, reach=_compiled_from)


def _compiled_from(kernel: Any) -> Any:
    """The jit function a compiled kernel was made from (None for one made from IR)."""
    return getattr(getattr(kernel, "src", None), "fn", None)


def _compiled_name(kernel: Any) -> str:
    fn = getattr(_compiled_from(kernel), "fn", None)
    return getattr(fn, "__name__", None) or str(getattr(kernel, "name", "?"))


def _jit_types() -> tuple[type, ...]:
    from triton.runtime import interpreter, jit

    return (jit.JITCallable, interpreter.InterpretedFunction)


def _unwrap(value: Any, jit_types: tuple[type, ...]) -> Any:
    """The jit object under autotuner and heuristics wrappers, or None."""
    for _ in range(8):
        if isinstance(value, jit_types):
            return value
        inner = getattr(value, "fn", None)
        if inner is None or inspect.isfunction(value):
            return None
        value = inner
    return None


def _entry(obj: Any) -> str | None:
    fn = getattr(obj, "fn", None)
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__name__", None)
    if not module or not name or module == "triton" or module.startswith("triton."):
        return None
    return f"{module}:{name}"


def launch_reaches(kernel: Any, args: tuple, kwargs: dict) -> frozenset[str]:
    """``module:name`` of the launched ``kernel`` and of every jit function it reaches,
    with those passed to the launch as arguments (a ``tl.constexpr`` activation)."""
    types = _jit_types()
    found = set(reaches_of(_unwrap(kernel, types)))
    for value in (*args, *kwargs.values()):
        if not isinstance(value, type) and (obj := _unwrap(value, types)) is not None:
            found |= reaches_of(obj)
    return frozenset(found)


def reaches_of(obj: Any) -> frozenset[str]:
    """``obj`` (a jit object) and the jit functions it calls, transitively; kept on the
    object (its source and globals are settled once it is launched)."""
    if obj is None:
        return frozenset()
    known = getattr(obj, "_mutant_gate_reaches", None)
    if known is not None:
        return known
    types = _jit_types()
    seen: dict[int, Any] = {}
    todo = [obj]
    while todo:
        current = todo.pop()
        if id(current) in seen or _entry(current) is None:
            continue
        seen[id(current)] = current
        todo.extend(_callees(current, types))
    found = frozenset(e for o in seen.values() if (e := _entry(o)) is not None)
    try:
        obj._mutant_gate_reaches = found
    except (AttributeError, TypeError):
        pass
    return found


def _callees(obj: Any, types: tuple[type, ...]) -> list[Any]:
    """The jit objects the names of ``obj``'s source resolve to through its globals and
    closure (``helper(x)``, ``ops.helper(x)``)."""
    fn = obj.fn
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return []
    scope = dict(getattr(fn, "__globals__", {}))
    closure = getattr(fn, "__closure__", None) or ()
    for name, cell in zip(fn.__code__.co_freevars, closure, strict=False):
        try:
            scope[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    found = []
    for node in ast.walk(tree):
        value = _resolve(node, scope)
        if value is not None and (callee := _unwrap(value, types)) is not None:
            found.append(callee)
    return found


_MISSING = object()


def _resolve(node: ast.AST, scope: dict) -> Any:
    """What a name or a dotted name (through modules) of the source stands for, or None."""
    chain: list[str] = []
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load):
        return None
    value = scope.get(node.id, _MISSING)
    for attr in reversed(chain):
        if not isinstance(value, ModuleType):
            return None
        value = getattr(value, attr, _MISSING)
    return None if value is _MISSING else value


class Coverage:
    """pytest plugin: {nodeid: {"functions": [...], "reaches": [...], "duration_s": ...}}
    for each test case: the kernels it launched (by name), the jit functions they reached
    (``module:name``), and its call's time."""

    def __init__(self) -> None:
        self.cases: dict[str, dict] = {}

    def pytest_runtest_setup(self, item: Any) -> None:
        _LAUNCHED.clear()
        _REACHED.clear()

    def pytest_runtest_call(self, item: Any) -> None:
        item._mutant_gate_start = time.perf_counter()
        item._mutant_gate_cpu = time.process_time()
        item._mutant_gate_compiles = compiles.mark()

    def pytest_runtest_teardown(self, item: Any) -> None:
        start = getattr(item, "_mutant_gate_start", None)
        self.cases[item.nodeid] = {
            "functions": sorted(_LAUNCHED),
            "reaches": sorted(_REACHED),
            "duration_s": round(time.perf_counter() - start, 6) if start else 0.0,
            # what a mutant's CPU-time limit counts (the process's threads)
            "cpu_s": round(time.process_time() - item._mutant_gate_cpu, 6) if start else 0.0,
            # its kernels' compiles, where any (compiled mode)
            **(compiles.since(item._mutant_gate_compiles) if start else {}),
        }
        # forgotten here too: a case skipped in its setup never reaches this plugin's
        # setup hook, and would otherwise be recorded with the case before it's launches
        _LAUNCHED.clear()
        _REACHED.clear()
