"""Inside the sandbox, project mode: the mutant stands in for the module at its
import path, and each test's kernel launches are recorded (stdlib+torch+triton).

``install(module, path)`` puts a finder first on ``sys.meta_path`` that loads
``module`` from ``path`` (the mutated source), so ``from pkg.ops.rms_norm import ...``
in the project's tests, relative imports inside the module and package
``__init__`` side effects all behave as under plain pytest.
``Coverage`` is a pytest plugin: for every test case, which jit functions it
launched and how long its call took; the pipeline selects tests from it.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import time
from typing import Any


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


def record_launches() -> None:
    """Note the name of every kernel launched (interpreter and compiled launches), from
    an empty record (a warm runner's process serves many jobs)."""
    from triton.runtime import interpreter, jit

    _LAUNCHED.clear()
    _EVER.clear()

    def wrap(owner: Any, attr: str, name_of: Any) -> None:
        original = getattr(owner, attr)
        if getattr(original, "_mutant_gate_records", False):
            return

        def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
            name = name_of(self)
            _LAUNCHED.add(name)
            _EVER.add(name)
            return original(self, *args, **kwargs)

        launch._mutant_gate_records = True  # type: ignore[attr-defined]
        setattr(owner, attr, launch)

    wrap(interpreter.GridExecutor, "__call__", lambda self: self.fn.__name__)
    wrap(jit.JITFunction, "run", lambda self: self.fn.__name__)


class Coverage:
    """pytest plugin: {nodeid: {"functions": [...], "duration_s": ...}} for each test case."""

    def __init__(self) -> None:
        self.cases: dict[str, dict] = {}

    def pytest_runtest_setup(self, item: Any) -> None:
        _LAUNCHED.clear()

    def pytest_runtest_call(self, item: Any) -> None:
        item._mutant_gate_start = time.perf_counter()

    def pytest_runtest_teardown(self, item: Any) -> None:
        start = getattr(item, "_mutant_gate_start", None)
        self.cases[item.nodeid] = {
            "functions": sorted(_LAUNCHED),
            "duration_s": round(time.perf_counter() - start, 6) if start else 0.0,
        }
        # forgotten here too: a case skipped in its setup never reaches this plugin's
        # setup hook, and would otherwise be recorded with the case before it's launches
        _LAUNCHED.clear()
