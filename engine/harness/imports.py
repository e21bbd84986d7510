"""The time a job spends importing what a warm runner keeps loaded.

A runner serves job after job in one process (``warm.py``) and unloads only the modules of
the job's own files and of the project: the third-party world a project's tests import
(transformers, a model zoo, the library's own dependencies) is paid for by the first job on
a runner and is free for every job after it. The original's run is often that first job,
so its time outside its test cases holds those imports, and a mutant's job on the same warm
runner does not pay them. ``Clock`` measures them: every module loaded while it runs whose
file lies outside the job's own directories, timed at the outermost such load (a module it
imports in turn is inside that time), in CPU and wall seconds. The estimate of the mutant
phase leaves them out of each mutant's share of the original's time
(``StageContext.original_s(..., warm=True)``); the mutants' limits keep them, since a job
on a fresh runner still pays them.

Runs inside the sandbox's processes; imports only the stdlib. It wraps the import
system's one load step (``importlib._bootstrap._load_unlocked``, which every ``import``
statement and ``importlib.import_module`` go through), so no loader or spec is changed.
"""

from __future__ import annotations

import importlib._bootstrap as _bootstrap
import os
import time
from typing import Any


class Clock:
    """While entered, the CPU and wall seconds of loads of modules outside ``own`` (path
    prefixes: the job's directory, the project's roots). Never nests with itself: a clock
    entered while another runs measures nothing."""

    _running = False

    def __init__(self, own: tuple[str, ...]) -> None:
        self.own = tuple(os.path.join(os.path.realpath(p), "") for p in own if p)
        self.cpu_s = 0.0
        self.wall_s = 0.0
        self.modules = 0
        self._depth = 0
        self._original: Any = None

    def __enter__(self) -> Clock:
        if Clock._running:
            return self
        Clock._running = True
        self._original = _bootstrap._load_unlocked
        _bootstrap._load_unlocked = self._load
        return self

    def __exit__(self, *exc: object) -> None:
        # ``_original`` stays set: a thread that took ``_load`` just before this still
        # calls through it
        if self._original is not None and _bootstrap._load_unlocked == self._load:
            _bootstrap._load_unlocked = self._original
            Clock._running = False

    def _theirs(self, spec: Any) -> bool:
        origin = getattr(spec, "origin", None)
        if not origin or not os.path.isabs(origin):  # built-in and frozen modules
            return True
        return not os.path.realpath(origin).startswith(self.own)

    def _load(self, spec: Any) -> Any:
        if self._depth or not self._theirs(spec):  # inside a timed load, or the job's own
            return self._original(spec)
        self._depth += 1
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            return self._original(spec)
        finally:
            self._depth -= 1
            self.cpu_s += time.process_time() - cpu
            self.wall_s += time.perf_counter() - wall
            self.modules += 1

    def record(self) -> dict:
        """The job's ``imports`` section: what a warm runner would not pay again."""
        return {
            "imports": {
                "cpu_s": round(self.cpu_s, 4),
                "wall_s": round(self.wall_s, 4),
                "modules": self.modules,
            }
        }
