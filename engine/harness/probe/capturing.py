"""The probe's ``capture``: the calls a kernel file's own check (or a project's tests)
makes of its public functions, recorded; and ``_definitions``, the kernel module (or a
mutant) loaded without its module-level check."""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import os
import sys
import time
import traceback
import types
from typing import Any

from ..main_guard import is_main_guard
from .values import VERSION, describe

MAX_CALLS = 64


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
            # CPU seconds, as the job's limit and the probe's budget count them: the
            # same estimate on a busy machine as on an idle one
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                recorder.depth, recorder.current = 0, None
                if record is not None:
                    record["duration_s"] = time.process_time() - start
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
        positional, keywords = _described_arguments(sig, bound, kwargs)
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
        key = _shapes_key(record)
        seen = self.keys.get(key)
        if seen is not None:  # the same shapes again: widen the value ranges
            _widen_record(seen, record)
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
        positional, keywords = _launch_arguments(raw, names, args, kwargs)
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
        record["_start"] = time.process_time()
        return record

    def launch_done(self, record: dict | None) -> None:
        if record is None:
            return
        record["duration_s"] = time.process_time() - record.pop("_start")
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


def _launch_arguments(
    raw: Any, names: list[str], args: tuple, kwargs: dict
) -> tuple[list[dict], dict[str, dict]]:
    """A launch's arguments described (positional, by keyword), named by the kernel's
    parameters (``names``), its constexprs marked (never varied); the launch options
    ``grid`` and ``warmup`` left out."""
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
    return positional, keywords


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
    return [name for name in _bound_names(node) if _wrappable(node, name, namespace.get(name))]


def _bound_names(node: ast.stmt) -> list[str]:
    """The names a function definition or a plain assignment binds (none for the rest)."""
    if isinstance(node, ast.FunctionDef):
        return [node.name]
    if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    return []


def _wrappable(node: ast.stmt, name: str, value: Any) -> bool:
    """Whether ``name``, bound to ``value`` by ``node``, is one ``_public_callables`` names."""
    if name.startswith(("_", "test")) or not callable(value):
        return False
    if isinstance(node, ast.FunctionDef):
        return inspect.isfunction(value)
    if inspect.isfunction(value) or inspect.ismethod(value):
        return True  # a lambda, or a bound method such as Function.apply
    if inspect.isclass(value) or inspect.ismodule(value):
        return False
    return type(value).__module__.split(".")[0] not in ("triton", "torch", "builtins")


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_check(node: ast.stmt, own: set[str]) -> bool:
    """A top-level call of the file's own functions (``test_layer_norm(1151, 8192, ...)``,
    ``y = softmax(x)``, ``benchmark.run(...)``): the module-level check, not a definition."""
    value = node.value if isinstance(node, ast.Expr | ast.Assign) else None
    return isinstance(value, ast.Call) and _root_name(value) in own


def _future_flags(tree: ast.Module) -> int:
    """The compiler flags of the file's ``from __future__ import ...`` statements."""
    future = importlib.import_module("__future__")
    flags = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                feature = getattr(future, alias.name, None)
                flags |= getattr(feature, "compiler_flag", 0)
    return flags


def _described_arguments(
    sig: inspect.Signature, bound: inspect.BoundArguments, kwargs: dict
) -> tuple[list[dict], dict[str, dict]]:
    """A call's bound arguments described (``describe``): the positional ones (named, but
    those of ``*args``) and the keyword ones (given by keyword, or through ``**kwargs``)."""
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
    return positional, keywords


def _shapes_key(record: dict) -> str:
    """A recorded call's function and argument shapes: calls alike in them are one call."""
    return repr(
        (
            record["function"],
            [_shape_key(a) for a in record["args"]],
            sorted((k, _shape_key(v)) for k, v in record["kwargs"].items()),
        )
    )


def _widen_record(seen: dict, record: dict) -> None:
    """``record`` merged into the call ``seen`` with the same shapes: each argument's value
    range widened, one call more counted."""
    for old, new in zip(
        seen["args"] + list(seen["kwargs"].values()),
        record["args"] + list(record["kwargs"].values()),
        strict=False,
    ):
        _widen(old, new)
    seen["count"] += 1


def _wrap_public(node: ast.stmt, namespace: dict, recorder: _Recorder) -> list[str]:
    """Bind each public callable ``node`` defined (``_public_callables``) to its wrapper
    recording its calls; their names."""
    names = _public_callables(node, namespace)
    for name in names:
        namespace[name] = recorder.wrap(name, namespace[name])
    return names


def _exec_statements(
    body: list[ast.stmt], path: str, flags: int, namespace: dict, errors: list[str], cap: int
) -> bool:
    """Execute ``body`` in ``namespace``; a SystemExit is ignored and any other error is
    appended to ``errors`` (while it holds fewer than ``cap``). Whether it ran through."""
    code = compile(ast.Module(body=body, type_ignores=[]), path, "exec", flags, True)
    try:
        exec(code, namespace)
    except SystemExit:
        return False
    except BaseException:  # noqa: BLE001 - keep what was captured, go on
        if len(errors) < cap:
            errors.append(traceback.format_exc(limit=-3))
        return False
    return True


def _top_statements(tree: ast.Module, checks: bool) -> tuple[list[ast.stmt], ast.stmt | None]:
    """The file's top-level statements to run one by one: all but its ``__main__`` block
    (the last one, returned apart) and, without ``checks``, its module-level check."""
    own = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    statements: list[ast.stmt] = []
    guard = None
    for node in tree.body:
        if is_main_guard(node):
            guard = node
        elif checks or not _is_check(node, own):
            statements.append(node)
    return statements, guard


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
    flags = _future_flags(tree)
    module = types.ModuleType(module_name)
    module.__file__ = path
    sys.modules[module_name] = module
    namespace = vars(module)
    wrapped: list[str] = []
    errors: list[str] = []
    statements, guard = _top_statements(tree, checks)
    saved = sys.argv[:]
    sys.argv = [path]
    try:
        for node in statements:
            ran = _exec_statements([node], path, flags, namespace, errors, cap=5)
            if ran and recorder is not None:
                wrapped += _wrap_public(node, namespace, recorder)
        if main and guard is not None:
            _exec_statements(guard.body, path, flags, namespace, errors, cap=sys.maxsize)
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

    errors: list[str] = []
    rebound.scan()
    try:
        code = pytest.main(
            [*_pytest_args(project), "--rootdir", project["root"]], plugins=[Cases()]
        )
        if int(code) not in (0, 1):
            errors.append(f"pytest exit code {int(code)}")
    finally:
        rebound.undo()
        _unwrap_entries(entries)
    _note_homes_and_backward(recorder, module.__name__)
    return names, errors


def _pytest_args(project: dict) -> list[str]:
    """pytest's arguments for the project's selected test cases (and its -k / -m)."""
    targets = [f"{p}::{c}" for p, cases in project["tests"] for c in cases] + [
        p for p, cases in project["tests"] if not cases
    ]
    args = [*targets, "-q", "-p", "no:cacheprovider", "-p", "no:unraisableexception"]
    for flag in ("keyword", "marker"):  # the run's -k / -m selection
        if project.get(flag):
            args += ["-k" if flag == "keyword" else "-m", project[flag]]
    return args


def _unwrap_entries(entries: list[tuple[Any, dict]]) -> None:
    """Put back what each Function class held as ``apply`` and ``backward``
    (``_function_entries``): what it inherited is inherited again."""
    for cls, held in entries:
        for attr, had in held.items():
            if had is None:
                delattr(cls, attr)
            else:
                setattr(cls, attr, had)


def _note_homes_and_backward(recorder: _Recorder, module: str) -> None:
    """Each recorded call of a Function of another module than ``module``: where it is
    imported from; of one whose backward launched kernels: those kernels too."""
    for call in recorder.calls:  # a Function's call reaches what its backward launched too
        if recorder.homes.get(call["function"], module) != module:
            call["module"] = recorder.homes[call["function"]]  # imported from there
        kernels = recorder.backward.get(call["function"])
        if kernels:
            call["backward"] = kernels
            call["kernels"] = call["kernels"] + [k for k in kernels if k not in call["kernels"]]


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
        if not _own_public_function_class(name, value, module, torch.autograd.Function):
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


def _own_public_function_class(name: str, value: Any, module: Any, function: type) -> bool:
    """Whether ``value`` (bound to ``name``) is a public subclass of ``function`` (torch's
    autograd ``Function``) defined in ``module``."""
    if name.startswith("_") or not inspect.isclass(value):
        return False
    return issubclass(value, function) and value.__module__ == module.__name__


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
    from .. import bounds

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


def _definitions(module: str, workdir: str, package: str = "") -> Any:
    """The kernel module (or its mutant) without its module-level check; a module that
    is not a file of the job (a package's) is imported as it is. ``package`` (project
    mode): a mutant's file is loaded as a module of the kernel's package, so that its
    relative imports resolve as the original's do."""
    path = os.path.join(workdir, module + ".py")
    if package and "." not in module and os.path.isfile(path):
        from ..project import load_as

        return load_as(f"{package}.{module}", path)
    if "." not in module and os.path.isfile(path):
        return _run_wrapped(module, path, None, main=False, checks=False)[0]
    return importlib.import_module(module)
