"""The probe writer's sandbox side: stdlib, torch, triton and numpy only.

Two entry points, reached through a ``harness`` check (``runner._run_harness``):

``capture``: import the kernel module, wrap its public functions (top-level, not
``_private``, not ``test*``, not kernels), run the own check (the ``__main__`` block
in the module's namespace, and/or its ``test_*`` functions under pytest) and record
each outermost call: function, parameter names, every argument (tensors as shape,
dtype and value range; scalars, tuples and dtypes as values), the kernel launches it
made, their integer constexprs (block sizes) and grids (in the interpreter), and its
duration.

``compare``: for each candidate input (a seeded setup snippet and a call, written by
the tool), run the original and each mutant module of the request (several survivors
share one job, each loaded under its own module name) on identical inputs and compare
every output (the return value and any tensor argument the original changed) with
``torch.testing.assert_close``'s dtype-aware defaults; a bounds violation or an
exception only on the mutant side is a difference too. The original's run on a
candidate does not depend on the mutant: a job without mutants runs it once and
returns its digest (``digest``: the outputs' exact bytes), and later jobs get it with
the request; a mutant whose outputs are bit-identical to it is the same without the
original running again, and otherwise the original runs beside it as before (in the
interpreter, a digest that then differs from the shipped one means the original itself
varies on that input: no evidence either way). In the interpreter a job of the
original alone on the first round's inputs (``ship``) also returns its outputs whole
where they are small enough (``SHIP_JOB_BYTES``), once a second run there gave the same
bits; shipped with the digest, they stand for the original's run in later jobs (their
digest checked first). A mutant stops at its first difference whose outputs can be
kept; for it the original's outputs come back as golden values (else for the best
difference: values before exceptions before bounds, then the first; where no
difference's outputs can be kept, the golden entry names the best one and says why,
``error``). Before each side starts a marker line is printed (candidate
id, then ``original`` or the mutant's module), so that when the job times out or
crashes the output tail says which candidate on which side did it.
"""

from __future__ import annotations

import ast
import base64
import functools
import hashlib
import importlib
import inspect
import math
import os
import sys
import time
import traceback
import types
from typing import Any

from .cuda_fault import lost_cuda_context
from .main_guard import is_main_guard

# ``bounds`` (numpy) is imported where a job uses it: the tool's process imports this
# module for ``VERSION`` and ``MARKER`` only, and a cached run never needs numpy.

VERSION = "9"
MARKER = "mutant-gate-probe:"
MAX_CALLS = 64
MAX_GOLDEN_ELEMENTS = 1 << 14  # expected values a compare job's answer holds in all (~0.4 MB)
MIN_GOLDEN_ELEMENTS = 1 << 12  # ... and each of its mutants at least
#: in the interpreter, a job of the original alone sends its outputs on its candidates
#: back whole (exactly, ``_ship``), the first ones, up to this many bytes of text in all:
#: the compare jobs get them, and a mutant that differs from them needs no run of the
#: original of its own (the outputs of a hit become its test's expected values, and the
#: test's proof runs the original again against them). A job's answer may hold 1 MiB
#: (``harness/worker.RESULT_LIMIT``): the rest of it is the answer's own.
SHIP_JOB_BYTES = 640 << 10


# -- describing values ---------------------------------------------------------
def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def describe(value: Any) -> dict:
    """A JSON description of one argument, enough to build a similar one."""
    import torch

    if isinstance(value, torch.Tensor):
        spec: dict = {
            "kind": "tensor",
            "shape": list(value.shape),
            "dtype": _dtype_name(value.dtype),
            "contiguous": bool(value.is_contiguous()),
            "device": value.device.type,
            "min": None,
            "max": None,
        }
        if value.numel():
            flat = value.detach().reshape(-1)
            if flat.dtype == torch.bool:
                spec["min"], spec["max"] = 0, 1
            elif flat.is_floating_point():
                finite = flat[torch.isfinite(flat)].double()
                if finite.numel():
                    spec["min"], spec["max"] = float(finite.min()), float(finite.max())
            elif not flat.is_complex():
                spec["min"], spec["max"] = int(flat.min()), int(flat.max())
        return spec
    if isinstance(value, torch.dtype):
        return {"kind": "dtype", "value": _dtype_name(value)}
    if value is None or isinstance(value, bool | int | float | str):
        if isinstance(value, float) and not math.isfinite(value):
            return {"kind": "opaque", "type": "float", "repr": repr(value)}
        return {"kind": "value", "value": value}
    if isinstance(value, tuple | list) and all(
        isinstance(v, bool | int | float) and not isinstance(v, bool) for v in value
    ):
        return {"kind": "value", "value": list(value), "sequence": type(value).__name__}
    return {"kind": "opaque", "type": type(value).__name__}


# -- capture ---------------------------------------------------------------------
class _Recorder:
    def __init__(self) -> None:
        self.calls: list[dict] = []
        self.depth = 0
        self.current: dict | None = None
        self.keys: dict[str, dict] = {}
        self.case = ""  # the test case running (project mode): each call says which
        #: ``XFunction.apply`` -> the kernels its ``backward`` launched (project mode)
        self.backward: dict[str, list[str]] = {}
        #: ``XFunction.apply`` -> the module that defines the Function (project mode)
        self.homes: dict[str, str] = {}
        #: the kernels a call must launch one of to be kept (None: any)
        self.only: set[str] | None = None
        #: the kernel module's name: a launch of one of its kernels with no public call
        #: around it is learned as a call of its own (``launch``)
        self.module = ""

    def wrap(self, name: str, fn: Any, signature: inspect.Signature | None = None) -> Any:
        """``fn`` recording its outermost calls as ``name``; ``signature``: the one its
        arguments bind to, where ``fn``'s own says nothing (``Function.apply``)."""
        recorder = self

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if recorder.depth:
                recorder.depth += 1
                try:
                    return fn(*args, **kwargs)
                finally:
                    recorder.depth -= 1
            record = recorder.start(name, fn, args, kwargs, signature)
            recorder.depth, recorder.current = 1, record
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                recorder.depth, recorder.current = 0, None
                if record is not None:
                    record["duration_s"] = time.perf_counter() - start
                    recorder.finish(record)

        return wrapper

    def start(
        self,
        name: str,
        fn: Any,
        args: tuple,
        kwargs: dict,
        signature: inspect.Signature | None = None,
    ) -> dict | None:
        try:
            sig = signature or inspect.signature(fn)
            bound = sig.bind(*args, **kwargs)
        except (TypeError, ValueError):
            return None
        positional: list[dict] = []
        keywords: dict[str, dict] = {}
        for pname, value in bound.arguments.items():
            kind = sig.parameters[pname].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                positional.extend({"name": None, **describe(v)} for v in value)
            elif kind is inspect.Parameter.VAR_KEYWORD:
                keywords.update({k: describe(v) for k, v in value.items()})
            elif pname in kwargs:
                keywords[pname] = describe(value)
            else:
                positional.append({"name": pname, **describe(value)})
        return {
            "function": name,
            "args": positional,
            "kwargs": keywords,
            "launches": 0,
            "kernels": [],
            "constexprs": {},
            **({"case": self.case} if self.case else {}),
        }

    def finish(self, record: dict) -> None:
        if not record["launches"]:
            return  # a reference implementation or helper: nothing of the kernel ran
        if self.only is not None and not set(record["kernels"]) & self.only:
            return  # it launched other modules' kernels only
        key = repr(
            (
                record["function"],
                [_shape_key(a) for a in record["args"]],
                sorted((k, _shape_key(v)) for k, v in record["kwargs"].items()),
            )
        )
        seen = self.keys.get(key)
        if seen is not None:  # the same shapes again: widen the value ranges
            for old, new in zip(
                seen["args"] + list(seen["kwargs"].values()),
                record["args"] + list(record["kwargs"].values()),
                strict=False,
            ):
                _widen(old, new)
            seen["count"] += 1
            return
        if len(self.calls) < MAX_CALLS:
            record["count"] = 1
            self.keys[key] = record
            self.calls.append(record)

    def launch(self, fn: Any, arg_names: Any, args: tuple, kwargs: dict) -> dict | None:
        """A launch of one of the module's kernels with no public call of the module
        around it (the tests launch the kernel themselves, or through a private helper):
        recorded as the call ``kernel[grid](...)``, its arguments named by the kernel's
        (constexprs marked: never varied), its grid filled in when it ran
        (``launch_done``). None where a public call is current or the kernel is not the
        module's."""
        if self.current is not None or self.depth or not self.module:
            return None
        raw = getattr(fn, "fn", fn)  # a JITFunction holds the Python function
        name = getattr(raw, "__name__", None)
        if name is None or getattr(raw, "__module__", None) != self.module:
            return None
        names = list(arg_names or ())
        if len(args) > len(names):
            return None
        try:
            params = inspect.signature(raw).parameters
        except (TypeError, ValueError):
            params = {}

        def constexpr(pname: str) -> bool:
            annotation = getattr(params.get(pname), "annotation", None)
            return annotation is not None and "constexpr" in str(annotation)

        positional = [
            {"name": n, **describe(v), **({"constexpr": True} if constexpr(n) else {})}
            for n, v in zip(names, args, strict=False)
        ]
        keywords = {
            k: {**describe(v), **({"constexpr": True} if constexpr(k) or k not in names else {})}
            for k, v in kwargs.items()
            if k not in ("grid", "warmup")
        }
        record = {
            "function": name,
            "launch": True,
            "args": positional,
            "kwargs": keywords,
            "launches": 0,
            "kernels": [],
            "constexprs": {},
            **({"case": self.case} if self.case else {}),
        }
        self.depth, self.current = 1, record
        record["_start"] = time.perf_counter()
        return record

    def launch_done(self, record: dict | None) -> None:
        if record is None:
            return
        record["duration_s"] = time.perf_counter() - record.pop("_start")
        self.depth, self.current = 0, None
        grids = record.get("grids") or []
        if len(grids) != 1:
            return  # no grid seen (or several): nothing to launch it with again
        record["grid"] = grids[0]
        self.finish(record)

    def grid(self, dims: list[int] | None) -> None:
        """The grid a launch of the current call ran (the interpreter's): ``grids``."""
        record = self.current
        if record is None or dims is None:
            return
        grids = record.setdefault("grids", [])
        if dims not in grids and len(grids) < 8:
            grids.append(dims)

    def launched(self, kernel: str, constexprs: dict) -> None:
        record = self.current
        if record is None:
            return
        record["launches"] += 1
        if kernel not in record["kernels"]:
            record["kernels"].append(kernel)
        for k, v in constexprs.items():
            values = record["constexprs"].setdefault(k, [])
            if v not in values:
                values.append(v)


def _shape_key(spec: dict) -> tuple:
    if spec["kind"] == "tensor":
        return ("tensor", tuple(spec["shape"]), spec["dtype"])
    return (spec["kind"], repr(spec.get("value", spec.get("type"))))


def _widen(old: dict, new: dict) -> None:
    if old.get("kind") != "tensor" or new.get("kind") != "tensor":
        return
    for key, pick in (("min", min), ("max", max)):
        if new.get(key) is None:
            continue
        old[key] = new[key] if old.get(key) is None else pick(old[key], new[key])


def _grid_dim() -> list[int] | None:
    """The grid of the interpreter's last launch, or None."""
    try:
        from triton.runtime.interpreter import interpreter_builder

        return [int(v) for v in interpreter_builder.grid_dim]
    except Exception:  # noqa: BLE001 - not the interpreter, or not launched
        return None


def _resolved_grid(grid: Any, record: dict) -> list[int] | None:
    """A compiled launch's grid as ints: a tuple as given, a callable applied to the
    launch's arguments by name (as Triton does); None where it cannot be told."""
    try:
        if callable(grid):
            named = {a["name"]: a.get("value") for a in record["args"] if "value" in a}
            named.update({k: v.get("value") for k, v in record["kwargs"].items()})
            grid = grid(named)
        dims = [int(v) for v in grid]
    except Exception:  # noqa: BLE001 - a grid it cannot resolve: no launch learned
        return None
    return (dims + [1, 1])[:3] if 0 < len(dims) <= 3 else None


def _count_launches(recorder: _Recorder) -> Any:
    """Wrap the launch paths (interpreter and compiled) so the recorder sees every launch."""
    undo: list[Any] = []

    def ints(kwargs: dict) -> dict:
        return {k: v for k, v in kwargs.items() if isinstance(v, int) and not isinstance(v, bool)}

    try:
        from triton.runtime.interpreter import GridExecutor

        grid_call = GridExecutor.__call__

        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            record = recorder.launch(self.fn, getattr(self, "arg_names", ()), args, kwargs)
            recorder.launched(getattr(self.fn, "__name__", "?"), ints(kwargs))
            try:
                return grid_call(self, *args, **kwargs)
            finally:
                recorder.grid(_grid_dim())
                recorder.launch_done(record)

        GridExecutor.__call__ = call
        undo.append(lambda: setattr(GridExecutor, "__call__", grid_call))
    except ImportError:
        pass
    try:
        from triton.runtime.jit import JITFunction

        jit_run = JITFunction.run

        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            record = recorder.launch(self, getattr(self, "arg_names", ()), args, kwargs)
            recorder.launched(getattr(self, "__name__", "?"), ints(kwargs))
            try:
                return jit_run(self, *args, **kwargs)
            finally:
                if record is not None:  # compiled: the grid as the launch resolved it
                    recorder.grid(_resolved_grid(kwargs.get("grid"), record))
                recorder.launch_done(record)

        JITFunction.run = run
        undo.append(lambda: setattr(JITFunction, "run", jit_run))
    except ImportError:
        pass

    def restore() -> None:
        for step in reversed(undo):
            step()

    return restore


def _public_callables(node: ast.stmt, namespace: dict) -> list[str]:
    """Names ``node`` defines that the own check may call as the kernel's wrapper: a
    public function, or a public name bound to a callable that is neither a class, a
    module nor a Triton object (``layer_norm = LayerNorm.apply``, as the layer-norm
    tutorial has it)."""
    if isinstance(node, ast.FunctionDef):
        names = [node.name]
    elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
        names = [t.id for t in node.targets if isinstance(t, ast.Name)]
    else:
        return []
    found = []
    for name in names:
        value = namespace.get(name)
        if name.startswith(("_", "test")) or not callable(value):
            continue
        if isinstance(node, ast.FunctionDef):
            if inspect.isfunction(value):
                found.append(name)
        elif inspect.isfunction(value) or inspect.ismethod(value):
            found.append(name)  # a lambda, or a bound method such as Function.apply
        elif not (inspect.isclass(value) or inspect.ismodule(value)):
            if type(value).__module__.split(".")[0] not in ("triton", "torch", "builtins"):
                found.append(name)  # e.g. a functools.partial
    return found


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_check(node: ast.stmt, own: set[str]) -> bool:
    """A top-level call of the file's own functions (``test_layer_norm(1151, 8192, ...)``,
    ``y = softmax(x)``, ``benchmark.run(...)``): the module-level check, not a definition."""
    value = node.value if isinstance(node, ast.Expr | ast.Assign) else None
    return isinstance(value, ast.Call) and _root_name(value) in own


def _run_wrapped(
    module_name: str, path: str, recorder: _Recorder | None, main: bool, checks: bool = True
) -> tuple:
    """Execute the kernel file statement by statement as module ``module_name``,
    wrapping each public function as soon as it is defined (with a ``recorder``), so
    checks at module level and in the ``__main__`` block (run last, when ``main``) call
    the wrappers. Without ``checks`` the module-level check is left out (``_is_check``)
    and a statement that then fails is skipped: what a probe needs is the definitions,
    and the layer-norm tutorial's check alone takes 18 s in the interpreter.
    Returns (module, names wrapped, errors)."""
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    tree = ast.parse(source, path)
    future = importlib.import_module("__future__")
    flags = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                feature = getattr(future, alias.name, None)
                flags |= getattr(feature, "compiler_flag", 0)
    module = types.ModuleType(module_name)
    module.__file__ = path
    sys.modules[module_name] = module
    namespace = vars(module)
    wrapped: list[str] = []
    errors: list[str] = []
    guard = None
    saved = sys.argv[:]
    sys.argv = [path]
    own = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    try:
        for node in tree.body:
            if is_main_guard(node):
                guard = node
                continue
            if not checks and _is_check(node, own):
                continue
            code = compile(ast.Module(body=[node], type_ignores=[]), path, "exec", flags, True)
            try:
                exec(code, namespace)
            except SystemExit:
                continue
            except BaseException:  # noqa: BLE001 - keep what was captured, go on
                if len(errors) < 5:
                    errors.append(traceback.format_exc(limit=-3))
                continue
            for name in _public_callables(node, namespace) if recorder is not None else ():
                namespace[name] = recorder.wrap(name, namespace[name])
                wrapped.append(name)
        if main and guard is not None:
            code = compile(ast.Module(body=guard.body, type_ignores=[]), path, "exec", flags, True)
            try:
                exec(code, namespace)
            except SystemExit:
                pass
            except BaseException:  # noqa: BLE001
                errors.append(traceback.format_exc(limit=-3))
    finally:
        sys.argv = saved
    return module, wrapped, errors


class _Rebound:
    """Project mode: every name bound to one of the module's public functions, in the
    kernel module and in each module of the project and its tests (``from ..ops.x
    import f`` in a layer, a Function's ``forward``, a re-export), bound to its
    wrapper instead, however the tests reach it; ``undo`` puts the functions back."""

    def __init__(self, wrappers: dict[int, tuple[Any, Any]], roots: list[str]) -> None:
        self.wrappers = wrappers  # id(function) -> (function, wrapper)
        self.roots = tuple(os.path.join(os.path.abspath(r), "") for r in roots)
        self.done: list[tuple[dict, str, Any]] = []

    def scan(self) -> None:
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None) or ""
            if not path or not os.path.abspath(path).startswith(self.roots):
                continue
            namespace = vars(module)
            for name, value in list(namespace.items()):
                pair = self.wrappers.get(id(value))
                if pair is not None and pair[0] is value:
                    namespace[name] = pair[1]
                    self.done.append((namespace, name, value))

    def undo(self) -> None:
        for namespace, name, value in reversed(self.done):
            namespace[name] = value
        self.done.clear()


def _capture_project(request: dict, workdir: str, recorder: _Recorder) -> tuple[list, list]:
    """Run the project's selected test cases (``tests``: [path, [case...]]) with every
    binding of the module's public functions wrapped; each call records its case."""
    import pytest

    module = importlib.import_module(request["module"])
    recorder.module = module.__name__
    path = module.__file__ or ""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    namespace = vars(module)
    names = [n for node in tree.body for n in _public_callables(node, namespace)]
    wrappers = {id(namespace[n]): (namespace[n], recorder.wrap(n, namespace[n])) for n in names}
    project = request["project"]
    roots = [os.path.dirname(path), project["root"], project["import_root"]]
    rebound = _Rebound(wrappers, roots)
    entries = _function_entries(module, recorder)
    names += [f"{cls.__name__}.apply" for cls, _ in entries]
    # only calls that launch one of this module's kernels are worth learning
    recorder.only = {n for n, v in namespace.items() if type(v).__module__.startswith("triton.")}

    class Cases:
        def pytest_collection_finish(self, session: Any) -> None:
            rebound.scan()  # the test modules and what they import are loaded now
            # the project's own Functions elsewhere (a layer over the kernel module's
            # functions) are entry points too: their module is loaded now
            for other in _project_modules(roots, module):
                entries.extend(_function_entries(other, recorder))

        def pytest_runtest_setup(self, item: Any) -> None:
            recorder.case = item.nodeid
            rebound.scan()  # modules a test imports as it runs

        def pytest_runtest_teardown(self, item: Any) -> None:
            recorder.case = ""

    targets = [f"{p}::{c}" for p, cases in project["tests"] for c in cases] + [
        p for p, cases in project["tests"] if not cases
    ]
    args = [*targets, "-q", "-p", "no:cacheprovider", "-p", "no:unraisableexception"]
    for flag in ("keyword", "marker"):  # the run's -k / -m selection
        if project.get(flag):
            args += ["-k" if flag == "keyword" else "-m", project[flag]]
    errors: list[str] = []
    rebound.scan()
    try:
        code = pytest.main([*args, "--rootdir", project["root"]], plugins=[Cases()])
        if int(code) not in (0, 1):
            errors.append(f"pytest exit code {int(code)}")
    finally:
        rebound.undo()
        for cls, held in entries:
            for attr, had in held.items():
                if had is None:
                    delattr(cls, attr)
                else:
                    setattr(cls, attr, had)
    for call in recorder.calls:  # a Function's call reaches what its backward launched too
        if recorder.homes.get(call["function"], module.__name__) != module.__name__:
            call["module"] = recorder.homes[call["function"]]  # imported from there
        kernels = recorder.backward.get(call["function"])
        if kernels:
            call["backward"] = kernels
            call["kernels"] = call["kernels"] + [k for k in kernels if k not in call["kernels"]]
    return names, errors


def _function_entries(module: Any, recorder: _Recorder) -> list[tuple[Any, dict]]:
    """The module's public ``torch.autograd.Function`` classes (a library's usual entry
    point: its layers and tests call ``XFunction.apply``), each ``apply`` wrapped as the
    call ``XFunction.apply(...)``, its arguments named by ``forward``'s (less ``ctx``),
    and its ``backward`` followed: the kernels it launches when a test calls
    ``.backward()`` belong to that call (``recorder.backward``). Returns (class, what its
    own ``__dict__`` held as ``apply`` and ``backward``: None where it inherited them)."""
    import torch

    found = []
    for name, value in list(vars(module).items()):
        if name.startswith("_") or not inspect.isclass(value):
            continue
        if not issubclass(value, torch.autograd.Function) or value.__module__ != module.__name__:
            continue
        try:
            params = list(inspect.signature(value.forward).parameters.values())[1:]
        except (TypeError, ValueError):
            continue
        if getattr(value.apply, "_mutant_gate_entry", False):
            continue  # wrapped already (a module scanned twice)
        held = {attr: value.__dict__.get(attr) for attr in ("apply", "backward")}
        entry = f"{name}.apply"
        recorder.homes[entry] = module.__name__
        value.apply = recorder.wrap(
            entry, value.apply, inspect.Signature(params)
        )  # a plain function on the class: ``XFunction.apply(x)`` calls it with x alone
        value.apply._mutant_gate_entry = True
        if held["backward"] is not None:
            value.backward = staticmethod(_followed(recorder, entry, value.backward))
        found.append((value, held))
    return found


def _project_modules(roots: list[str], kernel: Any) -> list[Any]:
    """The project's loaded modules (files under ``roots``) but the kernel module."""
    prefixes = tuple(os.path.join(os.path.abspath(r), "") for r in roots)
    return [
        m
        for m in list(sys.modules.values())
        if m is not kernel
        and os.path.abspath(getattr(m, "__file__", None) or "/").startswith(prefixes)
    ]


def _followed(recorder: _Recorder, entry: str, backward: Any) -> Any:
    """``backward`` with the kernels it launches noted under ``entry``."""

    @functools.wraps(backward)
    def follow(ctx: Any, *grads: Any) -> Any:
        saved = recorder.current, recorder.depth
        record: dict = {"launches": 0, "kernels": [], "constexprs": {}}
        recorder.current, recorder.depth = record, 1
        try:
            return backward(ctx, *grads)
        finally:
            recorder.current, recorder.depth = saved
            kernels = recorder.backward.setdefault(entry, [])
            kernels += [k for k in record["kernels"] if k not in kernels]

    return follow


#: what a call that reaches a Function's backward runs in a probe (and in its written
#: test, verbatim): the call, then the gradients of a fixed random weighting of its
#: outputs with respect to each float tensor argument; all of it compared
GRAD_HELPER = """
def _mg_grad(fn, *args):
    args = [
        a.detach().clone().requires_grad_(True)
        if isinstance(a, torch.Tensor) and a.is_floating_point()
        else a
        for a in args
    ]
    out = fn(*args)
    outs = [
        o
        for o in (out if isinstance(out, tuple) else (out,))
        if isinstance(o, torch.Tensor) and o.requires_grad
    ]
    inputs = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    grads = ()
    if outs and inputs:
        weights = torch.Generator().manual_seed(1)
        total = sum(
            (o.float() * torch.rand(o.shape, generator=weights).to(o.device)).sum() for o in outs
        )
        grads = torch.autograd.grad(total, inputs, allow_unused=True)
    detached = (
        tuple(o.detach() if isinstance(o, torch.Tensor) else o for o in out)
        if isinstance(out, tuple)
        else out.detach() if isinstance(out, torch.Tensor) else out
    )
    return (detached, *grads)
"""


def capture(request: dict, workdir: str) -> dict:
    """Run the own check with the module's public functions wrapped; return the calls.
    Project mode (``project``): the project's test cases, through whatever path they
    take to the module's functions (``_capture_project``)."""
    from . import bounds

    recorder = _Recorder()
    undo = _count_launches(recorder)
    try:
        if request.get("project"):
            wrapped, errors = _capture_project(request, workdir, recorder)
        else:
            wrapped, errors = _capture_file(request, workdir, recorder)
    finally:
        undo()
        bounds.reset()
    return {
        "version": VERSION,
        "functions": sorted(wrapped),
        "calls": recorder.calls,
        "errors": errors,
    }


def _capture_file(request: dict, workdir: str, recorder: _Recorder) -> tuple[list, list]:
    """The kernel file run as its own check (its ``__main__`` block, its ``test_*``)."""
    path = os.path.join(workdir, request["kernel"])
    recorder.module = request["module"]
    _, wrapped, errors = _run_wrapped(request["module"], path, recorder, request.get("main"))
    if request.get("tests"):
        import pytest

        args = [path, "-q", "-p", "no:cacheprovider", "--rootdir", workdir, "-c", os.devnull]
        pytest.main(args)
    return wrapped, errors


# -- compare ----------------------------------------------------------------------
class ContextLost(RuntimeError):
    """A kernel faulted on the GPU: the process's CUDA context is gone, and every run
    after it in this job would fail for that reason alone. The job ends here; the
    message starts with the marker of the side that did it (``side``), so the tool
    knows whom to blame and runs the others again."""


class _Homes:
    """Project mode, one compare job: the kernel module's import name (empty outside
    project mode) and the copies of other project modules made against each mutant."""

    def __init__(self, kernel_name: str = "") -> None:
        self.kernel_name = kernel_name
        self.copies: dict[tuple[str, str], Any] = {}

    def home(self, name: str, kernel: Any) -> Any:
        """Module ``name`` of the project (where a candidate's entry point, a Function
        over the kernel module's functions, is defined) as it is against ``kernel``:
        imported as it is for the original; for a mutant, a copy of it loaded afresh
        while the mutant stands at the kernel module's import path, so that what it
        imports from the kernel module is the mutant's."""
        real = self.kernel_name
        if kernel is sys.modules.get(real) or not real:
            return importlib.import_module(name)
        key = (name, kernel.__name__)
        if key not in self.copies:
            self.copies[key] = self._copy(name, kernel)
        return self.copies[key]

    def _copy(self, name: str, kernel: Any) -> Any:
        from importlib import util

        real = self.kernel_name
        origin = util.find_spec(name).origin  # type: ignore[union-attr]
        spec = util.spec_from_file_location(f"{kernel.__name__}__{name.replace('.', '_')}", origin)
        assert spec is not None and spec.loader is not None
        copy = util.module_from_spec(spec)
        copy.__package__ = name.rpartition(".")[0]  # its relative imports, as the original's
        held = sys.modules.get(real)
        sys.modules[real] = kernel
        try:
            spec.loader.exec_module(copy)
        finally:
            if held is not None:
                sys.modules[real] = held
        return copy


def _execute(
    module: Any, candidate: dict, homes: _Homes, side: str | None = None
) -> tuple[dict | None, str | None, dict | None]:
    """(outputs, error, bounds violation) of one candidate on one module (``side``:
    ``original``, else the module's name); ``homes``: where a candidate's entry point
    lives when another module of the project defines it."""
    import torch

    from . import bounds

    namespace: dict = {"torch": torch, "math": math}
    root = candidate["function"].split(".")[0]  # ``XFunction.apply``: the class
    home = homes.home(candidate["module"], module) if candidate.get("module") else module
    namespace[root] = getattr(home, root)
    if "_mg_grad(" in candidate["call"]:
        exec(GRAD_HELPER, namespace)
    bounds.reset()
    try:
        exec(candidate["setup"], namespace)
        before = {
            name: namespace[name].clone()
            for name in candidate["tensors"]
            if isinstance(namespace.get(name), torch.Tensor)
        }
        if candidate.get("launch"):  # ``kernel[grid](...)``: what it wrote is the output
            exec(candidate["call"], namespace)
            result = None
        else:
            result = eval(candidate["call"], namespace)
    except BaseException as exc:  # noqa: BLE001 - an exception is an observation
        violations = bounds.violations()
        bounds.reset()
        if violations:
            return None, None, violations[0]
        line = (str(exc).strip().splitlines() or [""])[0]
        if lost_cuda_context(str(exc)):
            who = side or module.__name__
            raise ContextLost(f"{MARKER} {candidate['id']} {who} {line}") from exc
        return None, f"{type(exc).__name__}: {line}"[:300], None
    violations = bounds.violations()
    bounds.reset()
    if violations:
        return None, None, violations[0]
    outputs = {} if candidate.get("launch") else {"result": result}
    for name in before:
        outputs[name] = namespace[name]
    return outputs, None, None


def _difference(expected: Any, actual: Any) -> str | None:
    import torch

    if isinstance(expected, torch.Tensor) or isinstance(actual, torch.Tensor):
        if not (isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor)):
            return f"{type(actual).__name__} instead of {type(expected).__name__}"
        if expected.shape != actual.shape:
            return f"shape {tuple(actual.shape)} instead of {tuple(expected.shape)}"
        if expected.dtype != actual.dtype:
            return f"dtype {_dtype_name(actual.dtype)} instead of {_dtype_name(expected.dtype)}"
        try:
            torch.testing.assert_close(actual, expected, equal_nan=True)
        except AssertionError as exc:
            return " ".join(str(exc).split())[:400]
        return None
    if isinstance(expected, tuple | list) and isinstance(actual, tuple | list):
        if len(expected) != len(actual):
            return f"{len(actual)} results instead of {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            why = _difference(e, a)
            if why:
                return f"[{i}] {why}"
        return None
    if isinstance(expected, float | int) and isinstance(actual, float | int):
        try:
            torch.testing.assert_close(actual, expected, equal_nan=True)
        except AssertionError as exc:
            return " ".join(str(exc).split())[:400]
        return None
    return None if expected == actual else f"{actual!r} instead of {expected!r}"


def _changed(before: Any, after: Any) -> bool:
    return _difference(before, after) is not None


def _values(flat: Any) -> list:
    import torch

    if flat.is_floating_point():
        return flat.double().tolist()
    if flat.dtype == torch.bool:
        return [bool(v) for v in flat.tolist()]
    return flat.tolist()


#: assert_close's default (rtol, atol) per dtype, to find where a mutant's output differs
_TOLERANCE = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5)}


def _sample(t: Any, actual: Any, budget: int) -> dict:
    """Expected values at ``budget`` positions of a big output: where the mutant's output
    differs (up to a quarter of them, first first) and a seeded uniform sample."""
    import torch

    flat = t.reshape(-1)
    picks = torch.empty(0, dtype=torch.long)
    if isinstance(actual, torch.Tensor) and actual.shape == t.shape and actual.dtype == t.dtype:
        other = actual.detach().cpu().reshape(-1)
        if flat.is_floating_point():
            rtol, atol = _TOLERANCE.get(_dtype_name(t.dtype), (1e-7, 1e-7))
            same = torch.isclose(
                other.double(), flat.double(), rtol=rtol, atol=atol, equal_nan=True
            )
        else:
            same = other == flat
        picks = torch.nonzero(~same).reshape(-1)[: budget // 4]
    generator = torch.Generator().manual_seed(0)
    spread = torch.randperm(flat.numel(), generator=generator)[: budget - picks.numel()]
    where = torch.unique(torch.cat([picks, spread]))  # sorted
    return {
        "kind": "sample",
        "dtype": _dtype_name(t.dtype),
        "shape": list(t.shape),
        "indices": where.tolist(),
        "values": _values(flat[where]),
    }


def golden(value: Any, actual: Any = None, budget: int | None = None) -> dict:
    """JSON form of an output (exact: every float dtype round-trips through a double).

    A tensor of more than ``budget`` elements keeps only a sample of its values
    (``_sample``; ``actual``, the mutant's output, says where it differs)."""
    import torch

    if isinstance(value, torch.Tensor):
        t = value.detach().cpu()
        if budget is not None and t.numel() > budget:
            return _sample(t, actual, budget)
        return {
            "kind": "tensor",
            "dtype": _dtype_name(t.dtype),
            "shape": list(t.shape),
            "values": _values(t.reshape(-1)),
        }
    if isinstance(value, tuple | list):
        others = actual if isinstance(actual, tuple | list) and len(actual) == len(value) else None
        return {
            "kind": "sequence",
            "items": [
                golden(v, others[i] if others else None, budget) for i, v in enumerate(value)
            ],
        }
    if value is None:
        return {"kind": "none"}
    if isinstance(value, bool | int | float | str):
        return {"kind": "scalar", "value": value}
    raise TypeError(f"cannot write a {type(value).__name__} as an expected value")


def _elements(value: dict) -> int:
    if value["kind"] in ("tensor", "sample"):
        return len(value["values"])
    if value["kind"] == "sequence":
        return sum(_elements(v) for v in value["items"])
    return 1


def _golden_size(value: Any) -> int | None:
    """How many values ``golden(value)`` holds, or None where it cannot be written."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, tuple | list):
        sizes = [_golden_size(v) for v in value]
        return None if None in sizes else sum(s for s in sizes if s is not None)
    if value is None or isinstance(value, bool | int | float | str):
        return 1
    return None


def _fits(outputs: dict, limit: int = MAX_GOLDEN_ELEMENTS) -> bool:
    sizes = [_golden_size(v) for v in outputs.values()]
    return None not in sizes and sum(s for s in sizes if s is not None) <= limit


def _tensors(value: Any) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return 1
    if isinstance(value, tuple | list):
        return sum(_tensors(v) for v in value)
    return 0


def _golden_outputs(outputs: dict, actual: dict | None, limit: int) -> dict:
    """Every output whole where they fit together in ``limit`` values, else each big
    tensor sampled."""
    budget = None
    if not _fits(outputs, limit):
        budget = limit // (2 * max(1, sum(_tensors(v) for v in outputs.values())))
    return {name: golden(v, (actual or {}).get(name), budget) for name, v in outputs.items()}


RANK = {"differs": 0, "mutant_error": 1, "bounds": 2}


def _definitions(module: str, workdir: str, package: str = "") -> Any:
    """The kernel module (or its mutant) without its module-level check; a module that
    is not a file of the job (a package's) is imported as it is. ``package`` (project
    mode): a mutant's file is loaded as a module of the kernel's package, so that its
    relative imports resolve as the original's do."""
    path = os.path.join(workdir, module + ".py")
    if package and "." not in module and os.path.isfile(path):
        from .project import load_as

        return load_as(f"{package}.{module}", path)
    if "." not in module and os.path.isfile(path):
        return _run_wrapped(module, path, None, main=False, checks=False)[0]
    return importlib.import_module(module)


def _feed(h: Any, value: Any) -> bool:
    """Feed ``value`` exactly (dtype, shape, bytes) into the hash ``h``; False where it
    has no exact form (an object the compare could only judge by ``==``)."""
    import torch

    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous().reshape(-1)
        h.update(f"T{_dtype_name(value.dtype)}{tuple(value.shape)}:".encode())
        h.update(t.view(torch.uint8).numpy().tobytes())
        return True
    if isinstance(value, tuple | list):
        h.update(f"S{len(value)}:".encode())
        return all(_feed(h, v) for v in value)
    if value is None or isinstance(value, bool | int | float | str):
        h.update(f"V{type(value).__name__}:{value!r};".encode())
        return True
    return False


def digest(outputs: dict) -> str | None:
    """An exact fingerprint of a run's outputs: equal digests mean bit-identical outputs
    (no tolerance needed to call them the same); None where one cannot be taken."""
    h = hashlib.sha256()
    for name in sorted(outputs):
        h.update(f"{name}=".encode())
        if not _feed(h, outputs[name]):
            return None
    return h.hexdigest()[:32]


def _kept(candidate: dict, outputs: dict) -> dict:
    """The outputs of a run that count: what it returned and the tensors it changed."""
    import torch

    namespace: dict = {"torch": torch, "math": math}
    exec(candidate["setup"], namespace)
    kept = {"result": outputs["result"]} if "result" in outputs else {}  # a launch: none
    for name in candidate["tensors"]:
        if name in outputs and _changed(namespace.get(name), outputs[name]):
            kept[name] = outputs[name]
    return kept


def _ship(kept: dict, room: int = SHIP_JOB_BYTES) -> dict | None:
    """The original's outputs exactly (dtype, shape, bytes as base64), to travel in a
    request; None where one is not a tensor or their text would pass ``room`` bytes."""
    import torch

    if not kept or not all(isinstance(v, torch.Tensor) for v in kept.values()):
        return None
    if sum(_text_bytes(v.numel() * v.element_size()) for v in kept.values()) > room:
        return None
    shipped = {}
    for name, t in kept.items():
        flat = t.detach().cpu().contiguous().reshape(-1)
        shipped[name] = {
            "dtype": _dtype_name(t.dtype),
            "shape": list(t.shape),
            "data": base64.b64encode(flat.view(torch.uint8).numpy().tobytes()).decode("ascii"),
        }
    return shipped


def _text_bytes(raw: int) -> int:
    return 4 * math.ceil(raw / 3)  # base64


def _unship(shipped: dict) -> dict:
    """``_ship``'s outputs back as tensors."""
    import torch

    outputs = {}
    for name, value in shipped.items():
        raw = bytearray(base64.b64decode(value["data"]))
        dtype = getattr(torch, value["dtype"].removeprefix("torch."))
        flat = (
            torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
        )
        outputs[name] = flat.view(dtype).reshape(value["shape"])
    return outputs


class _Originals:
    """The original's runs in this job: outputs kept per candidate (and checked against
    their digest before each reuse: a mutant's stray write cannot change what it is
    compared with), and what was learned, for the tool to share with later jobs."""

    def __init__(self, module: Any, known: dict, exact: bool, homes: _Homes | None = None) -> None:
        self.module = module
        #: the job's project modules against each mutant (project mode; none outside it)
        self.homes = homes if homes is not None else _Homes()
        #: cid -> {"digest", "kept", and maybe "outputs" (``_ship``)} from an earlier job
        self.known = known
        self.exact = exact  # same input, same bits (the interpreter on the CPU)
        #: bytes of outputs it may still send back whole (``_ship``): a job of the
        #: original alone, in the interpreter; none in any other
        self.ship = 0
        self.held: dict[str, tuple[dict, str | None]] = {}
        self.learned: dict[str, dict] = {}
        self.confirmed: set[str] = set()  # inputs the original agreed with itself on
        self.runs = 0

    def run(self, candidate: dict) -> tuple[dict | None, str]:
        """(the original's kept outputs, "") or (None, why it cannot be compared)."""
        cid = candidate["id"]
        if cid in self.held:
            outputs, sealed = self.held[cid]
            if sealed is not None and digest(outputs) == sealed:
                return outputs, ""
        elif cid in self.learned and self.learned[cid]["status"] != "ok":
            return None, self.learned[cid]["detail"]
        shipped = self._shipped(cid)
        if shipped is not None:
            return shipped, ""
        print(f"{MARKER} {cid} original", flush=True)
        self.runs += 1
        start = time.perf_counter()
        outputs, error, violation = _execute(self.module, candidate, self.homes, "original")
        seconds = time.perf_counter() - start
        if outputs is None:
            why = (error or (violation or {}).get("message", "bounds"))[:300]
            self.learned[cid] = {"status": "error", "detail": why}
            return None, why
        kept = _kept(candidate, outputs)
        sealed = digest(kept)
        before = self.known.get(cid)
        if (
            self.exact
            and before is not None
            and before.get("digest")
            and (sealed != before["digest"] or sorted(kept) != sorted(before.get("kept", ())))
        ):
            why = "the original's outputs on this input differ from one run to the next"
            self.learned[cid] = {"status": "unstable", "detail": why}
            return None, why
        self.held[cid] = (kept, sealed)
        self.learned[cid] = {
            "status": "ok",
            "digest": sealed,
            "kept": sorted(kept),
            "seconds": round(seconds, 4),
        }
        if self.ship and self.exact and sealed is not None:
            whole = _ship(kept, self.ship)
            if whole is not None and self._again(candidate, sealed):
                self.learned[cid]["outputs"] = whole
                self.ship -= sum(len(v["data"]) for v in whole.values())
            elif whole is not None:
                return None, self.learned[cid]["detail"]
        return kept, ""

    def _again(self, candidate: dict, sealed: str) -> bool:
        """Outputs sent whole stand for the original's run in later jobs, which then do
        not run it again (where a run again would show an original that varies on the
        input, unwritten output memory say): run it once more here, alike or unusable."""
        cid = candidate["id"]
        print(f"{MARKER} {cid} original", flush=True)
        self.runs += 1
        outputs, _, _ = _execute(self.module, candidate, self.homes, "original")
        if outputs is not None and digest(_kept(candidate, outputs)) == sealed:
            return True
        why = "the original's outputs on this input differ from one run to the next"
        self.learned[cid] = {"status": "unstable", "detail": why}
        self.held.pop(cid, None)
        return False

    def _shipped(self, cid: str) -> dict | None:
        """The original's outputs an earlier job sent whole (in the interpreter), where
        they are what its digest says: they stand for its run here."""
        before = self.known.get(cid) or {}
        if not self.exact or not before.get("outputs") or not before.get("digest"):
            return None
        try:
            kept = _unship(before["outputs"])
        except (KeyError, TypeError, ValueError, RuntimeError, AttributeError):
            return None
        sealed = digest(kept)
        if sealed != before["digest"] or sorted(kept) != sorted(before.get("kept", ())):
            return None
        self.held[cid] = (kept, sealed)
        return kept

    def confirm(self, candidate: dict, kept: dict) -> str:
        """Where bits may differ between runs (a GPU): before a hit is believed, the
        original runs once more on its input and must agree with ``kept`` within the
        compare's tolerance (outputs left unwritten hold whatever memory held, and
        differ). "" when it does; else why, and the input is unusable from then on."""
        cid = candidate["id"]
        if self.exact or cid in self.confirmed:
            return ""
        self.runs += 1
        again, error, violation = _execute(self.module, candidate, self.homes, "original")
        whys = (
            [error or (violation or {}).get("message", "")]
            if again is None
            else [
                f"{name}: {why}"
                for name in kept
                if (why := _difference(kept[name], again.get(name)))
            ]
        )
        whys = [w for w in whys if w]
        if whys:
            why = "the original's outputs on this input differ from one run to the next: "
            self.learned[cid] = {"status": "unstable", "detail": (why + whys[0])[:300]}
            return self.learned[cid]["detail"]
        self.confirmed.add(cid)
        return ""


def _against(
    originals: _Originals, candidate: dict, module: Any
) -> tuple[str, str, dict | None, dict | None]:
    """One candidate on one mutant: (status, detail, the original's kept outputs, the
    mutant's). The original runs only where its outputs are needed: not yet known, or
    the mutant's are not bit-identical to them (then compared with tolerance), or a hit
    (its outputs become the golden values)."""
    cid = candidate["id"]
    known = originals.known.get(cid)
    kept = None
    if known is None or not known.get("digest"):
        kept, why = originals.run(candidate)
        if kept is None:
            status = "original_unstable" if originals.learned[cid]["status"] == "unstable" else ""
            return status or "original_error", why, None, None
        names = list(kept)
    else:
        names = list(known.get("kept", ["result"]))
    print(f"{MARKER} {cid} {module.__name__}", flush=True)
    m_outputs, m_error, m_violation = _execute(module, candidate, originals.homes)
    if m_outputs is not None:
        m_outputs = {name: m_outputs.get(name) for name in names}
        if kept is None and known is not None and digest(m_outputs) == known["digest"]:
            return "same", "", None, m_outputs  # bit for bit the original's
    if kept is None:
        kept, why = originals.run(candidate)
        if kept is None:
            status = "original_unstable" if originals.learned[cid]["status"] == "unstable" else ""
            return status or "original_error", why, None, None
    if m_violation is not None:
        hit = ("bounds", m_violation.get("message", "out of bounds"), kept, None)
    elif m_error is not None:
        hit = ("mutant_error", f"the mutant raises {m_error}", kept, None)
    else:
        assert m_outputs is not None
        diffs = [
            f"{name}: {why}"
            for name in kept
            if (why := _difference(kept[name], m_outputs.get(name)))
        ]
        if not diffs:
            return "same", "", kept, m_outputs
        hit = ("differs", "; ".join(diffs), kept, m_outputs)
    unstable = originals.confirm(candidate, kept)
    return ("original_unstable", unstable, None, None) if unstable else hit


def _expected(found: dict | None, limit: int = MAX_GOLDEN_ELEMENTS) -> dict | None:
    """The golden entry for the chosen difference (``found``: id, outputs, mutant), of
    at most ``limit`` values."""
    if found is None:
        return None
    try:
        values = _golden_outputs(found["outputs"], found["mutant"], limit)
    except TypeError as exc:
        return {"id": found["id"], "error": str(exc)}
    size = sum(_elements(v) for v in values.values())
    if size > limit:
        return {"id": found["id"], "error": f"{size} expected values: too many"}
    return {"id": found["id"], "outputs": values}


def _probe_mutant(originals: _Originals, module: Any, candidates: list[dict], limit: int) -> dict:
    """A mutant's candidates in order, until the first hit whose outputs can be kept
    whole in ``limit`` values (a later hit cannot give a better test); hits that cannot
    are ranked as before: values before exceptions before bounds, then the first."""
    results: list[dict] = []
    best: tuple[int, int, dict] | None = None  # (rank, order, found)
    for order, candidate in enumerate(candidates):
        status, detail, kept, m_outputs = _against(originals, candidate, module)
        results.append({"id": candidate["id"], "status": status, "detail": detail[:600]})
        rank = RANK.get(status)
        if rank is None or kept is None:
            continue
        found = {"id": candidate["id"], "outputs": kept, "mutant": m_outputs}
        if _fits(kept, limit):
            best = (-1, order, found)
            break
        if best is None or (rank, order) < best[:2]:
            best = (rank, order, found)
    return {"results": results, "golden": _expected(best[2] if best else None, limit)}


def compare(request: dict, workdir: str) -> dict:
    """Candidates on the original and on each mutant of the request (``mutants``: module
    names, each with the ids of its candidates, in order). ``originals`` holds what
    earlier jobs learned of the original on some candidates (digest, kept outputs):
    there the original runs again only when needed (``_against``). Without mutants, the
    original runs on every candidate: what it learned comes back (``originals``), and
    with ``golden`` its outputs on the first one it accepts."""
    original = _definitions(request["module"], workdir)
    homes = _Homes(request["module"] if request.get("package") else "")
    by_id = {c["id"]: c for c in request["candidates"]}
    originals = _Originals(
        original, request.get("originals") or {}, bool(request.get("exact")), homes
    )
    originals.ship = SHIP_JOB_BYTES if request.get("ship") and not request.get("mutants") else 0
    answer: dict = {"version": VERSION, "mutants": {}}
    mutant_runs = 0
    # The mutants of a job share one budget of expected values: the answer stays far
    # below what a result may hold however many of them find a difference.
    limit = max(
        MIN_GOLDEN_ELEMENTS, MAX_GOLDEN_ELEMENTS // max(1, len(request.get("mutants") or ()))
    )
    for entry in request.get("mutants") or ():
        try:
            module = _definitions(entry["module"], workdir, request.get("package", ""))
        except BaseException as exc:  # noqa: BLE001 - this mutant's failure, not the job's
            answer["mutants"][entry["module"]] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        chosen = [by_id[cid] for cid in entry["candidates"]]
        found = _probe_mutant(originals, module, chosen, limit)
        answer["mutants"][entry["module"]] = found
        mutant_runs += sum(
            1
            for r in found["results"]
            if r["status"] not in ("original_error", "original_unstable")
        )
    if not request.get("mutants"):
        results, first = [], None
        for candidate in request["candidates"]:
            kept, why = originals.run(candidate)
            status = "original_only" if kept is not None else "original_error"
            results.append({"id": candidate["id"], "status": status, "detail": why})
            if kept is not None and first is None:
                first = {"id": candidate["id"], "outputs": kept, "mutant": None}
        answer["results"] = results
        answer["golden"] = _expected(first) if request.get("golden", True) else None
    answer["originals"] = originals.learned
    answer["runs"] = {"original": originals.runs, "mutant": mutant_runs}
    return answer
