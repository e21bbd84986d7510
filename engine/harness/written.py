"""What a test mutant-gate wrote needs to run outside the tool, under plain pytest.

A written test file starts with a guarded call here (``writers/proving.prologue``)::

    try:
        from mutant_gate.engine.harness.written import load_kernel
    except ImportError:  # without mutant-gate, the kernel module is imported as it is
        pass
    else:
        load_kernel(__file__, "t01", "../t01.py")

so that it meets the kernel module as its proof in the sandbox did (``runner.prepare``):

- the GPU-query shims (``shims.install``: ``driver.active`` and ``device="cuda"`` answered
  on the CPU under ``TRITON_INTERPRET=1``, autotune's first config, no benchmarks), which
  apply only where the environment needs them;
- in the interpreter, the bounds check and undefined-lane poison (``bounds``): a mutant
  the tool killed by an out-of-bounds access fails the test here too;
- file mode: the kernel file loaded as a probe test's proof loads it
  (``probe/capturing._definitions``: its module-level check, benchmark and ``__main__``
  block left out), or imported as a module (``checks=True``: a model's test, whose proof
  imported it so). The module comes from ``sys.path`` where it is found there
  (``python -m pytest`` from the kernel's directory, ``PYTHONPATH``, a sandbox job's
  files), else from the path recorded in the test, relative to the test file;
- project mode (``prepare``): the package imported as the project's tests import it; its
  import root (relative to the test file) is put on ``sys.path`` only when the package
  is not importable already.

A module already imported (a sandbox job's preload, an earlier test file) is left as it
is, and nothing recorded by a running job is reset. Stdlib, torch and triton only.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType

__all__ = ["load_kernel", "prepare"]


def _near(test_file: str, relative: str) -> str:
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(test_file)), relative))


def _found(name: str) -> str | None:
    """The file ``sys.path`` would import the top-level module ``name`` from, if any."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.origin not in (None, "built-in") else None


def _checks(poison: bool) -> None:
    """The shims, and in the interpreter the bounds check, as a sandbox job has them."""
    from . import shims

    shims.install()
    if os.environ.get("TRITON_INTERPRET") == "1":
        from . import bounds

        if not bounds.installed():  # a job's own (in a sandbox) keeps its settings
            bounds.install()
            bounds.set_poison(poison)


def prepare(
    test_file: str, package: str = "", import_root: str = "", *, poison: bool = True
) -> None:
    """Project mode: the checks a job has; ``package`` importable, from ``import_root``
    (relative to ``test_file``) when it is not already."""
    _checks(poison)
    if package and import_root and _found(package.split(".")[0]) is None:
        root = _near(test_file, import_root)
        if os.path.isdir(root) and root not in sys.path:
            sys.path.insert(0, root)


def load_kernel(
    test_file: str, module: str, kernel: str, *, checks: bool = False, poison: bool = True
) -> ModuleType:
    """File mode: the kernel module ``module`` loaded as the test's proof loaded it
    (``kernel``: its file, relative to ``test_file``, used where ``sys.path`` has none)."""
    if module in sys.modules:
        return sys.modules[module]
    _checks(poison)
    path = _found(module) if module.isidentifier() else None
    path = path or _near(test_file, kernel)
    if not os.path.isfile(path):
        raise ImportError(
            f"mutant-gate: the kernel file {kernel} (relative to {test_file}) is not there, "
            f"and {module!r} is not importable: run from the kernel's directory"
        )
    folder = os.path.dirname(path)
    if folder not in sys.path:  # the kernel's own imports of its neighbours
        sys.path.insert(0, folder)
    if checks or os.path.splitext(os.path.basename(path))[0] != module:
        from .project import load_as

        return load_as(module, path)
    from .probe.capturing import _definitions

    return _definitions(module, folder)
