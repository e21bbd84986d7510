"""The own check with every kernel launch skipped: can it notice at all?

Runs inside the sandbox child; imports only the stdlib, torch and triton.

A check that only prints (the vector-add and matmul tutorials compare and
print, and assert nothing about the result) passes whatever the kernel
computes. Reading the source cannot always tell: ``assert x.device == DEVICE``
in a wrapper is an assertion, but not about the result. So the pipeline runs
the own check once more with ``install()`` applied: every kernel launch returns
without running (interpreter and compiled), and every tensor made by
``torch.empty`` / ``empty_like`` / ``empty_strided`` / ``Tensor.new_empty``
starts as -31337 (integers as 77), so an output the kernel should have written
is plainly wrong. A finite value, not NaN: ``assert not diff.max() > tol`` lets
NaN through. If the check still passes, it cannot see a wrong result.

``skipped()`` counts the launches skipped: a check that launches nothing was
never a check of the kernel.
"""

from __future__ import annotations

from typing import Any

_SKIPPED = [0]
FLOAT_FILL = -31337.0  # representable in float16 and bfloat16 (rounded)
INT_FILL = 77


def skipped() -> int:
    return _SKIPPED[0]


def _poison(t: Any) -> Any:
    import torch

    if t.is_floating_point() or t.is_complex():
        t.fill_(FLOAT_FILL)
    elif t.dtype != torch.bool:
        t.fill_(INT_FILL)
    return t


def _poisoned(factory: Any) -> Any:
    def make(*args: Any, **kwargs: Any) -> Any:
        return _poison(factory(*args, **kwargs))

    make.__wrapped__ = factory  # type: ignore[attr-defined]
    return make


def _skip(*args: Any, **kwargs: Any) -> None:
    _SKIPPED[0] += 1


def install() -> None:
    """Skip every launch and fill empty tensors (in a job's own forked child only).

    A ``warmup`` (compile only: the fused-softmax tutorial sizes its grid from the
    compiled kernel) still compiles; the launch of what it returns is skipped."""
    import torch
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime import interpreter
    from triton.runtime.jit import JITFunction

    _SKIPPED[0] = 0
    interpreter.GridExecutor.__call__ = _skip
    run = JITFunction.run

    def run_or_skip(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("warmup"):
            return run(self, *args, **kwargs)
        return _skip()

    JITFunction.run = run_or_skip
    CompiledKernel.__getitem__ = lambda self, grid: _skip
    for name in ("empty", "empty_like", "empty_strided"):
        setattr(torch, name, _poisoned(getattr(torch, name)))
    torch.Tensor.new_empty = _poisoned(torch.Tensor.new_empty)
