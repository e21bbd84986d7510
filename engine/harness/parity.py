"""Interpreter parity: what compiled Triton does that Triton's interpreter does not.

Runs inside the sandbox child, in interpreted jobs only; imports only the stdlib,
numpy, torch and triton.

Kernels of real libraries rely on compiled Triton's behaviour in ways the
interpreter (Triton 3.9) does not follow:

* **scalar arguments**: compiled, a non-constexpr ``float`` argument is an fp32
  scalar tensor, so ``eps.to(tl.float32)`` or ``x + eps`` (promoting an fp16 block to
  fp32) work; the interpreter passes the Python float (``'float' object has no
  attribute 'to'``, and weak typing instead of fp32). Here it is an fp32 tensor, as
  integers and bools already are.
* **libdevice math** (``triton.language.extra.libdevice`` and
  ``...extra.cuda.libdevice``): see ``libdevice``.
* **bfloat16 arithmetic**: the interpreter computes on bfloat16 bit patterns as if
  they were integers: see ``bf16``.
* **what failed**: when a launch raises inside the interpreter, ``failures()`` keeps
  the real exception, the kernel and the kernel line it was on, so the one line a
  user reads names them (not ``interpreter.py:1515: InterpreterError``).

Each shim that a job used is named by ``note`` (the report's ``baseline.shims``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from . import bf16, libdevice

__all__ = ["failures", "install", "reset", "uninstall"]

_SAVED: dict[str, Any] = {}
_FAILURES: list[dict] = []
#: the shims ``install`` applied (a name this Triton's interpreter has no place for is not)
_APPLIED: list[str] = []
_NAMED = ("scalar-arguments", "libdevice", "bfloat16-arithmetic")  # what ``install`` reports
_MAX_FAILURES = 4
SCALAR_NOTE = "scalar float arguments: float32 tensors, as compiled"


def failures() -> list[dict]:
    """The launches that raised inside the interpreter since ``reset()``, first first:
    kernel, exception (type and message), file, line and source line in the kernel."""
    return [dict(f) for f in _FAILURES]


def reset() -> None:
    _FAILURES.clear()


def _install_scalar_arguments(note: Callable[[str], None]) -> None:
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    original = interpreter._implicit_cvt

    def implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, float):
            note(SCALAR_NOTE)
            handle = interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32)
            return tl.tensor(handle, tl.float32)
        return original(arg)

    _SAVED["_implicit_cvt"] = original
    interpreter._implicit_cvt = implicit_cvt


def _kernel_frame(exc: BaseException, fn: Any) -> tuple[str, int, str]:
    """The innermost frame of ``exc`` in the user's code (not Triton's, numpy's or this
    harness's): the kernel line that raised; else the kernel's ``def``."""
    import linecache

    import numpy
    import triton

    skip = tuple(
        os.path.dirname(os.path.abspath(m.__file__)) + os.sep
        for m in (triton, numpy)
        if getattr(m, "__file__", None)
    ) + (os.path.dirname(os.path.abspath(__file__)) + os.sep,)
    found = None
    tb = exc.__traceback__
    while tb is not None:
        filename = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if not filename.startswith(skip):
            found = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    if found is None:
        code = getattr(fn, "__code__", None)
        if code is None:
            return "", 0, ""
        found = (code.co_filename, code.co_firstlineno)
    return found[0], found[1], linecache.getline(found[0], found[1]).strip()


def _record_failure(executor: Any, exc: Exception) -> None:
    """Keep the kernel, exception and kernel line of a launch that failed in the
    interpreter (the first ``_MAX_FAILURES``)."""
    cause = exc.__cause__ or exc
    if len(_FAILURES) < _MAX_FAILURES:
        filename, line, source = _kernel_frame(cause, executor.fn)
        _FAILURES.append(
            {
                "kernel": getattr(executor.fn, "__name__", "?"),
                "exception": f"{type(cause).__name__}: {cause}",
                "file": filename,
                "line": line,
                "source": source,
            }
        )


def _install_failure_record() -> None:
    from triton.runtime import interpreter

    original = interpreter.GridExecutor.__call__

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, *args, **kwargs)
        except interpreter.InterpreterError as exc:
            _record_failure(self, exc)
            raise

    # it only watches a launch fail: the batched executor's resumed loop, which runs
    # beneath it in its place, tells it a failure too (``batched._watchers``)
    call.wraps_loop = original  # type: ignore[attr-defined]
    call.on_failure = _record_failure  # type: ignore[attr-defined]
    _SAVED["GridExecutor.__call__"] = original
    interpreter.GridExecutor.__call__ = call


def install(note: Callable[[str], None]) -> list[str]:
    """Install the parity shims (idempotent); the names of those applied."""
    if _APPLIED:
        return [n for n in _APPLIED if n in _NAMED]
    # Each shim leans on the interpreter's internals: one this Triton lacks is skipped
    # (the job runs as the interpreter alone would), never a failed job.
    for name, install_one in (
        ("scalar-arguments", lambda: _install_scalar_arguments(note) or True),
        ("libdevice", lambda: libdevice.install(note)),
        ("bfloat16-arithmetic", lambda: bf16.install(note)),
        ("failure-record", lambda: _install_failure_record() or True),
    ):
        try:
            if install_one():
                _APPLIED.append(name)
        except (AttributeError, ImportError, TypeError):
            pass
    return [n for n in _APPLIED if n in _NAMED]


def uninstall() -> None:
    from triton.runtime import interpreter

    if "_implicit_cvt" in _SAVED:
        interpreter._implicit_cvt = _SAVED["_implicit_cvt"]
    if "GridExecutor.__call__" in _SAVED:
        interpreter.GridExecutor.__call__ = _SAVED["GridExecutor.__call__"]
    libdevice.uninstall()
    bf16.uninstall()
    _SAVED.clear()
    _APPLIED.clear()
    _FAILURES.clear()
