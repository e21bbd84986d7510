"""GPU-query shims so tutorial-style Triton files run on CPU in the interpreter.

Runs inside the sandbox child; imports only the stdlib, torch, triton.

Tutorial files ask the driver about the GPU at import time::

    DEVICE = triton.runtime.driver.active.get_active_torch_device()
    properties = triton.runtime.driver.active.utils.get_device_properties(DEVICE.index)
    target = triton.runtime.driver.active.get_current_target()
    torch.cuda.get_device_capability()

With ``TRITON_INTERPRET=1`` and no GPU, ``triton.runtime.driver.active`` raises
``RuntimeError: 0 active drivers`` and torch raises for CUDA queries.
``install()`` answers those queries as a CPU run of an sm_80-class GPU would
(active torch device ``cpu``, 108 SMs, 65536 registers, 166912 bytes of shared
memory, warp size 32, target ``GPUTarget("cuda", 80, 32)``, capability (8, 0)),
but only where the real query fails: a working driver is left alone.
``used()`` names the shimmed queries the file actually called.

In both modes ``@triton.autotune`` is made deterministic: timing configs on a
CPU says nothing about a GPU, and on a GPU shared by a pool of workers a timing
race would make verdicts depend on load; so the first config (after pruning)
always wins, without benchmarking (``--all-configs`` pins each in turn);
``used()`` names the config. Likewise ``triton.testing.perf_report`` /
``do_bench`` are neutralised in both modes: a benchmark is not a check
(benchmarks are not run, plots not drawn, ``do_bench`` calls its function once).

Files written for a GPU (the Triton tutorials) also hard-code CUDA. In
interpreter mode with no CUDA device: tensors made with ``device="cuda"`` (or
``.cuda()``, ``.to("cuda")``) are made on the CPU instead and report ``is_cuda``
as the file expects; ``torch.cuda``'s synchronize / current_device / device
properties answer plausibly; and torch's ``layer_norm`` in float16/bfloat16,
whose CPU backward is far less precise than CUDA's, runs in float32 and rounds
once, as the CUDA kernel does. ``torch.cuda.is_available()`` keeps telling the
truth.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["DEVICE_PROPERTIES", "install", "reset_used", "uninstall", "used"]

DEVICE_PROPERTIES = {  # an A100-like (sm_80) device
    "multiprocessor_count": 108,
    "max_num_regs": 65536,
    "max_shared_mem": 166912,
    "warpSize": 32,
    "sm_clock_rate": 1410000,  # kHz
    "mem_clock_rate": 1215000,  # kHz
    "mem_bus_width": 5120,  # bits
}
CAPABILITY = (8, 0)

_USED: list[str] = []
_ABSENT = object()  # saved for an attribute the shims added: uninstall deletes it
_APPLIED: list[str] = []
_SAVED: dict[str, Any] = {}


def _note(name: str) -> None:
    if name not in _USED:
        _USED.append(name)


def used() -> list[str]:
    """Shimmed queries called since install (or ``reset_used()``), first use first."""
    return list(_USED)


def reset_used() -> None:
    _USED.clear()
    _AUTOTUNE_CONFIGS.clear()
    if "scalar-arguments" in _APPLIED:
        from . import parity

        parity.reset()


class _CpuUtils:
    """Stands in for ``driver.active.utils``."""

    def get_device_properties(self, device: Any = None) -> dict:
        _note("driver.active.utils.get_device_properties")
        return dict(DEVICE_PROPERTIES)

    def get_device_capability(self, device: Any = None) -> tuple[int, int]:
        _note("driver.active.utils.get_device_capability")
        return CAPABILITY

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"mutant-gate CPU driver shim: utils.{name} is not provided")


class _CpuDriver:
    """Stands in for ``triton.runtime.driver.active`` when no real driver is."""

    def __init__(self) -> None:
        self.utils = _CpuUtils()

    @staticmethod
    def is_active() -> bool:
        return True

    def get_active_torch_device(self) -> Any:
        import torch

        _note("driver.active.get_active_torch_device")
        return torch.device("cpu")

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        _note("driver.active.get_current_target")
        return GPUTarget("cuda", CAPABILITY[0] * 10 + CAPABILITY[1], 32)

    def get_current_device(self) -> int:
        _note("driver.active.get_current_device")
        return 0

    def set_current_device(self, device: Any) -> None:
        _note("driver.active.set_current_device")

    def get_current_stream(self, device: Any = None) -> int:
        _note("driver.active.get_current_stream")
        return 0

    def get_device_capability(self, device: Any = None) -> tuple[int, int]:
        _note("driver.active.get_device_capability")
        return CAPABILITY

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"mutant-gate CPU driver shim: driver.active.{name} is not provided")


def _get_device_capability(device: Any = None) -> tuple[int, int]:
    _note("torch.cuda.get_device_capability")
    return CAPABILITY


#: ``--all-configs``: the job pins this autotune config (an index into the configs).
AUTOTUNE_ENV = "MUTANT_GATE_AUTOTUNE_CONFIG"
_AUTOTUNE_CONFIGS: dict[str, int] = {}


def _first_config_bench(self: Any, *args: Any, config: Any, **meta: Any) -> list[float]:
    """Replaces ``Autotuner._bench``: the pinned config (the first unless a job pins
    another) is the "fastest"; nothing is timed."""
    configs = list(self.configs)
    index = next((i for i, c in enumerate(configs) if c is config), len(configs))
    name = getattr(getattr(self, "base_fn", None), "__name__", None) or "kernel"
    _AUTOTUNE_CONFIGS[name] = len(configs)
    pinned = min(int(os.environ.get(AUTOTUNE_ENV, "0") or 0), len(configs) - 1)
    if index == pinned:
        where = "first config" if pinned == 0 else f"config {pinned + 1} of {len(configs)}"
        _note(f"triton.autotune: {where} ({config})")
    return [0.0 if index == pinned else 1.0 + index] * 3


def autotune_configs() -> dict[str, int]:
    """How many configs each autotuned kernel launched in this process has."""
    return dict(_AUTOTUNE_CONFIGS)


# -- CUDA as CPU ----------------------------------------------------------------
_FACTORIES = (
    "empty", "zeros", "ones", "full", "rand", "randn", "randint", "randperm", "arange",
    "linspace", "logspace", "tensor", "as_tensor", "empty_strided", "eye", "zeros_like",
    "ones_like", "empty_like", "rand_like", "randn_like", "randint_like", "full_like",
)  # fmt: skip


def _is_cuda_device(value: Any) -> bool:
    import torch

    if isinstance(value, str):
        return value == "cuda" or value.startswith("cuda:")
    if isinstance(value, torch.device):
        return value.type == "cuda"
    return isinstance(value, int) and not isinstance(value, bool)  # device index


def _cpu_device_args(name: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    if "device" in kwargs and _is_cuda_device(kwargs["device"]):
        _note(f"{name}: cuda -> cpu")
        kwargs = {**kwargs, "device": "cpu"}
    return args, kwargs


def _wrap_factory(torch: Any, name: str) -> None:
    original = getattr(torch, name)

    def factory(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = _cpu_device_args("device='cuda'", args, kwargs)
        return original(*args, **kwargs)

    factory.__wrapped__ = original  # type: ignore[attr-defined]
    factory.__name__ = name
    _SAVED[f"torch.{name}"] = original
    setattr(torch, name, factory)


def _install_cuda_as_cpu(torch: Any) -> None:
    for name in _FACTORIES:
        if hasattr(torch, name):
            _wrap_factory(torch, name)
    tensor = torch.Tensor
    to, is_cuda = tensor.to, tensor.is_cuda
    _SAVED["Tensor.to"], _SAVED["Tensor.cuda"], _SAVED["Tensor.is_cuda"] = to, tensor.cuda, is_cuda

    def to_cpu(self: Any, *args: Any, **kwargs: Any) -> Any:
        if args and _is_cuda_device(args[0]) and not isinstance(args[0], int):
            _note("Tensor.to('cuda') -> cpu")
            args = ("cpu", *args[1:])
        args, kwargs = _cpu_device_args("Tensor.to('cuda')", args, kwargs)
        return to(self, *args, **kwargs)

    def cuda(self: Any, *args: Any, **kwargs: Any) -> Any:
        _note("Tensor.cuda() -> cpu")
        return self

    def cuda_on_cpu(self: Any) -> bool:
        if self.device.type == "cpu":
            _note("Tensor.is_cuda: a CPU tensor says True")
            return True
        return is_cuda.__get__(self)

    tensor.to, tensor.cuda, tensor.is_cuda = to_cpu, cuda, property(cuda_on_cpu)

    fake_cuda = {
        "synchronize": lambda *a, **k: None,
        "current_device": lambda: 0,
        "set_device": lambda *a, **k: None,
        "device_count": lambda: 1,
        "empty_cache": lambda: None,
        "get_device_name": lambda *a, **k: "mutant-gate CPU stand-in (sm_80)",
        "get_device_properties": lambda *a, **k: _CudaProperties(),
    }
    for name, fn in fake_cuda.items():
        _SAVED[f"torch.cuda.{name}"] = getattr(torch.cuda, name)
        setattr(torch.cuda, name, _noted(f"torch.cuda.{name}", fn))
    # A library's own device helper names the device it found (``cpu`` here) and asks
    # ``getattr(torch, device).get_device_properties(0)``: answer as torch.cuda does.
    for name, fn in (
        ("get_device_properties", lambda *a, **k: _CudaProperties()),
        ("get_device_capability", lambda *a, **k: CAPABILITY),
        ("get_device_name", lambda *a, **k: _CudaProperties.name),
    ):
        if not hasattr(torch.cpu, name):
            _SAVED[f"torch.cpu.{name}"] = _ABSENT
            setattr(torch.cpu, name, _noted(f"torch.cpu.{name}", fn))
    _install_cuda_numerics(torch)


def _install_cuda_numerics(torch: Any) -> None:
    """Reference ops whose CPU kernels are far less precise than CUDA's in fp16/bf16.

    A tutorial compares its kernel with torch's op as computed on a GPU, which
    accumulates half-precision inputs in float32. On the CPU, torch's
    ``layer_norm`` backward in float16 is off by whole units (the weight and bias
    gradients of a 1151x8192 layer norm: 0.06 against 0.009 for Triton's kernel;
    in bfloat16 up to 51), so an unmodified tutorial's original would fail. Here
    it runs in float32 and rounds once, as the CUDA kernel does. Sum, softmax,
    rms_norm and matmul were measured within rounding of float32-then-round on the
    CPU and are left alone.
    """
    half = (torch.float16, torch.bfloat16)
    _norm_in_wider(
        torch, "layer_norm", half, torch.float32,
        "torch.nn.functional.layer_norm: float16/bfloat16 computed in float32, as on CUDA",
    )  # fmt: skip
    # group_norm's CPU backward in float32 is 3-5x further from the exact gradient than
    # CUDA's (a 16x48x8192 input, 12 groups: weight and bias gradients 6.4e-4 / 3.5e-4
    # off float64 on the CPU, 1.3e-4 / 1.5e-4 on an H200), enough to fail a library's
    # own 1e-4 tolerance. Here it runs in float64 and rounds once.
    _norm_in_wider(
        torch, "group_norm", (torch.float32, *half), torch.float64,
        "torch.nn.functional.group_norm: computed in float64 and rounded, as precise as CUDA's",
    )  # fmt: skip


def _norm_in_wider(torch: Any, name: str, dtypes: tuple, wide: Any, said: str) -> None:
    """Replace ``torch.nn.functional.NAME(input, shape_or_groups, weight, bias, eps)``:
    on CPU inputs of ``dtypes`` it computes in ``wide`` and rounds once to the input's
    dtype (autograd goes through the same path, so the backward does too)."""
    functional = torch.nn.functional
    original = getattr(functional, name)

    def norm(input: Any, size: Any, weight: Any = None, bias: Any = None,
             eps: float = 1e-5) -> Any:  # fmt: skip
        if input.device.type != "cpu" or input.dtype not in dtypes:
            return original(input, size, weight, bias, eps)
        _note(said)

        def up(t: Any) -> Any:
            return t.to(wide) if t is not None else None

        return original(input.to(wide), size, up(weight), up(bias), eps).to(input.dtype)

    norm.__wrapped__ = original  # type: ignore[attr-defined]
    norm.__name__ = name
    _SAVED[f"torch.nn.functional.{name}"] = original
    setattr(functional, name, norm)


class _CudaProperties:
    """What ``torch.cuda.get_device_properties`` answers on the CPU."""

    name = "mutant-gate CPU stand-in (sm_80)"
    major, minor = CAPABILITY
    multi_processor_count = DEVICE_PROPERTIES["multiprocessor_count"]
    total_memory = 40 * 1024**3
    warp_size = DEVICE_PROPERTIES["warpSize"]
    regs_per_multiprocessor = DEVICE_PROPERTIES["max_num_regs"]
    shared_memory_per_block_optin = DEVICE_PROPERTIES["max_shared_mem"]


def _noted(name: str, fn: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        _note(name)
        return fn(*args, **kwargs)

    return call


# -- benchmarks -------------------------------------------------------------------
class _NoBenchmark:
    """What ``@triton.testing.perf_report(...)`` returns: ``.run()`` does nothing."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def run(self, *args: Any, **kwargs: Any) -> None:
        _note("triton.testing.perf_report: benchmark not run")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


def _no_bench(fn: Any, *args: Any, quantiles: Any = None, **kwargs: Any) -> Any:
    """``do_bench`` without timing: the function runs once, the time is 0."""
    _note("triton.testing.do_bench: not timed")
    fn()
    return [0.0 for _ in quantiles] if quantiles else 0.0


def _install_no_benchmarks() -> None:
    import triton.testing

    for name, replacement in (
        ("perf_report", lambda benchmarks: _NoBenchmark),
        ("do_bench", _no_bench),
        ("do_bench_cudagraph", _no_bench),
    ):
        if hasattr(triton.testing, name):
            _SAVED[f"triton.testing.{name}"] = getattr(triton.testing, name)
            setattr(triton.testing, name, replacement)


# -- what a compiled launch returns ------------------------------------------------
class _CompiledStandIn:
    """What ``kernel.warmup(...)`` / ``kernel[grid](...)`` return on a GPU, for the interpreter.

    Tutorials read the compiled kernel's registers and shared memory to size their
    grids (``kernel._init_handles(); kernel.n_regs; kernel.metadata.shared``) or print
    its ``asm``; the interpreter compiles nothing and returns None.
    """

    n_regs = 32
    n_spills = 0

    def __init__(self, kernel: Any) -> None:
        from types import SimpleNamespace

        self._kernel = kernel
        self.metadata = SimpleNamespace(shared=1024, num_warps=4, num_stages=3, num_ctas=1)
        self.asm = _NoAsm()

    def _init_handles(self) -> None:
        _note("compiled kernel handle: a stand-in (interpreter)")

    def __getitem__(self, grid: Any) -> Any:
        return lambda *args, **kwargs: self._kernel.run(*args, grid=grid, warmup=False, **kwargs)


class _NoAsm(dict):
    def __missing__(self, key: str) -> str:
        _note("kernel.asm: no code in the interpreter")
        return f"// {key}: not available in Triton's interpreter (mutant-gate)"


def _tuple_grid(grid: Any) -> Any:
    """A launch grid as a tuple: a GPU launch takes a list, the interpreter does not."""
    if isinstance(grid, list):
        _note("launch grid given as a list: made a tuple")
        return tuple(grid)
    if callable(grid):
        return lambda meta: _tuple_grid(grid(meta))
    return grid


def _install_compiled_stand_ins() -> None:
    from triton.runtime import interpreter
    from triton.runtime.jit import KernelInterface

    warmup, getitem, grid_init = (
        KernelInterface.warmup,
        KernelInterface.__getitem__,
        interpreter.GridExecutor.__init__,
    )
    _SAVED["KernelInterface.warmup"] = warmup
    _SAVED["KernelInterface.__getitem__"] = getitem
    _SAVED["GridExecutor.__init__"] = grid_init

    def warmup_stand_in(self: Any, *args: Any, grid: Any, **kwargs: Any) -> Any:
        result = warmup(self, *args, grid=grid, **kwargs)
        return result if result is not None else _CompiledStandIn(self)

    def launch_with_handle(self: Any, grid: Any) -> Any:
        launch = getitem(self, grid)

        def call(*args: Any, **kwargs: Any) -> Any:
            result = launch(*args, **kwargs)
            return result if result is not None else _CompiledStandIn(self)

        return call

    def init_with_tuple_grid(self: Any, fn: Any, arg_names: Any, grid: Any, *rest: Any) -> None:
        grid_init(self, fn, arg_names, _tuple_grid(grid), *rest)

    KernelInterface.warmup = warmup_stand_in
    KernelInterface.__getitem__ = launch_with_handle
    interpreter.GridExecutor.__init__ = init_with_tuple_grid


def _real_driver_works(config: Any) -> bool:
    if config._active is not None or config._default is not None:
        return True
    try:
        config.active  # noqa: B018 - creating it is the test
    except RuntimeError:
        return False
    return True


def install() -> list[str]:
    """Apply the shims the environment needs (idempotent); names of those applied."""
    if _APPLIED or _SAVED:
        return list(_APPLIED)
    import torch
    from triton.runtime.driver import driver

    if not _real_driver_works(driver):
        _SAVED["driver"] = (driver._default, driver._active)
        shim = _CpuDriver()
        driver._default = shim
        driver._active = shim
        _APPLIED.append("driver.active")

    try:
        torch.cuda.get_device_capability()
    except Exception:  # noqa: BLE001 - torch raises AssertionError or RuntimeError
        _SAVED["torch.cuda.get_device_capability"] = torch.cuda.get_device_capability
        torch.cuda.get_device_capability = _get_device_capability
        _APPLIED.append("torch.cuda.get_device_capability")
    import os

    from triton.runtime.autotuner import Autotuner

    # Both modes: a verdict must not hang on which config won a timing race, and a
    # benchmark is not a check (on a GPU shared by a pool's workers it only times out).
    _SAVED["Autotuner._bench"] = Autotuner._bench
    Autotuner._bench = _first_config_bench
    _APPLIED.append("triton.autotune")
    if os.environ.get("TRITON_INTERPRET") == "1":
        from . import parity

        _install_compiled_stand_ins()
        _APPLIED.append("compiled-kernel-stand-ins")
        _APPLIED.extend(parity.install(_note))  # "scalar-arguments", "libdevice"
        if not torch.cuda.is_available():
            _install_cuda_as_cpu(torch)
            _APPLIED.append("cuda-as-cpu")
    _install_no_benchmarks()
    _APPLIED.append("no-benchmarks")
    if not _APPLIED:
        _SAVED["none"] = None  # remember that install ran
    return list(_APPLIED)


def uninstall() -> None:
    """Undo ``install()`` (for tests)."""
    import torch
    from triton.runtime.driver import driver

    if "driver" in _SAVED:
        driver._default, driver._active = _SAVED["driver"]
    if "Autotuner._bench" in _SAVED:
        from triton.runtime.autotuner import Autotuner

        Autotuner._bench = _SAVED["Autotuner._bench"]
    if "torch.cuda.get_device_capability" in _SAVED:
        torch.cuda.get_device_capability = _SAVED["torch.cuda.get_device_capability"]
    import triton.testing

    for key, value in _SAVED.items():
        owner, _, attr = key.rpartition(".")
        from triton.runtime import interpreter
        from triton.runtime.jit import KernelInterface

        target = {
            "torch": torch,
            "torch.cuda": torch.cuda,
            "torch.cpu": torch.cpu,
            "torch.nn.functional": torch.nn.functional,
            "Tensor": torch.Tensor,
            "triton.testing": triton.testing,
            "KernelInterface": KernelInterface,
            "GridExecutor": interpreter.GridExecutor,
        }.get(owner)
        if target is not None and value is _ABSENT:
            delattr(target, attr)
        elif target is not None:
            setattr(target, attr, value)
    if "scalar-arguments" in _APPLIED:
        from . import parity

        parity.uninstall()
    _SAVED.clear()
    _APPLIED.clear()
    _USED.clear()
