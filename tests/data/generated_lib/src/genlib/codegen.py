"""Pointwise kernels generated at run time, as large operator libraries make them: the
kernel's source is written to a cache directory and imported from there; it calls the
op module's scalar ``@triton.jit`` function on every element."""

import importlib.util
import os
import sys
import tempfile

import triton

TEMPLATE = """import triton
import triton.language as tl

from {module} import {function} as _scalar


@triton.jit
def {kernel}(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, _scalar(x), mask=mask)
"""

_KERNELS: dict = {}


def cache_dir() -> str:
    return os.path.join(tempfile.gettempdir(), "genlib-cache")


def pointwise(module: str, function: str):
    """The generated kernel that applies ``module.function`` to each element."""
    key = (module, function)
    if key not in _KERNELS:
        kernel = f"{function}_kernel_rank_1"
        os.makedirs(cache_dir(), exist_ok=True)
        name = f"genlib_cache_{module.replace('.', '_')}_{function}"
        path = os.path.join(cache_dir(), f"{name}.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(TEMPLATE.format(module=module, function=function, kernel=kernel))
        spec = importlib.util.spec_from_file_location(name, path)
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[name] = loaded
        spec.loader.exec_module(loaded)
        _KERNELS[key] = getattr(loaded, kernel)
    return _KERNELS[key]


def launch(kernel, x, block: int = 128):
    out = x.new_empty(x.shape)
    n = x.numel()
    kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block)
    return out
