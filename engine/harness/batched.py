"""Every program of an interpreted launch at once (``TRITON_INTERPRET=1``, tested with Triton 3.9).

Triton's interpreter runs a launch's programs one after another, each operation of each program
through its semantic layer on small numpy arrays, and patches its language again at every
device-function call (``tl.sum``, a kernel's own ``@jit`` helpers). ``install()`` replaces
``GridExecutor.__call__`` and ``InterpretedFunction.__call__``:

* ``"batched"``: a launch runs its programs together, a leading program axis on every value that
  differs between them (``batched_ops``), loads and stores as gathers and scatters over all
  programs' addresses (``batched_memory``), in chunks of programs where memory would grow too
  large. Control flow that differs between programs runs under masks (``batched_flow``): a
  top-level ``if cond: return`` stops the programs for which it holds (``if cond: ...;
  return`` after running its body for them), a loop whose bounds or
  condition differ runs the longest program's count with the finished ones masked off, an ``if``
  whose condition differs runs both branches, each for its own programs. Where a launch cannot
  run so (a ``return`` or ``break`` inside divergent flow, programs that talk through memory, an
  op without a batched form, a device function's own divergent branch, any error), what the
  failing chunk wrote is put back (``batched_memory``'s undo log) and Triton's own loop runs
  on from that chunk's first program, the chunks before it standing (their writes, prints and
  checks' records; beneath another tool's loop, from the launch's start, everything put
  back); ``launches()`` says which executor ran each launch, why, and where it resumed.
  A launch of one program runs so too, and a loop of it whose iterations do not depend on each
  other but through sums (``for row in range(start, end): ... dw += ...``, a norm's backward
  on a CPU) runs its iterations together (``batched_iterations``), the sums folded in the
  loop's order.
  The harness's own checks (bounds, poisoned lanes, race hints, the diff-oracle's lane digests)
  run batched too, through ``batched_checks``; another tool's load/store hooks need the loop.
* ``"triton"``: Triton's own loop, with its language patched once per launch.

Both give Triton's results bit for bit: a batched launch does each program's operations in the
same order on the same numpy kernels, and stores and atomics in program order. (One difference
is possible under a divergent loop: its variable is an int32 or int64 value, where Triton's
interpreter hands a Python int to the body; arithmetic with other Python ints before it meets a
tensor could wrap where the interpreter's would not, as compiled Triton's does.)

Switch it on with ``install()`` (the mode from ``MUTANT_GATE_INTERPRETER``, default batched) or
``install_from_env()`` (only where that variable is set). ``MUTANT_GATE_BATCH_ELEMENTS`` bounds
a chunk: programs times the most elements one program's load or store touches.
"""

from __future__ import annotations

import ast
import inspect
import os
import time
from typing import Any

import numpy as np

from . import batched_flow as flow
from . import batched_iterations as iterations
from . import batched_ops as ops
from .batched_checks import Checks, known_hooks
from .batched_memory import Memory

ENV = "MUTANT_GATE_INTERPRETER"
MODES = ("batched", "triton")
MAX_RECORDS = 10_000

_ORIGINALS: dict[str, Any] = {}
_MODE: list[str] = []
_RECORDS: list[dict] = []
_LAUNCH_LANGS: list[set] = []  # the language modules patched for the launch now running
_KERNELS: dict[tuple, Any] = {}  # (function, a kernel?) -> its rewrite, divergent flow as masks
_LANGS: dict[Any, frozenset] = {}
_ABSENT = object()


# --------------------------------------------------------------------------
# public


#: the Triton releases whose interpreter the executor is built on and tested with
SUPPORTED = ((3, 9),)


def unsupported() -> str | None:
    """Why this Triton's interpreter is left as it is (another release than the
    executor's), or None."""
    import triton

    version = tuple(int(p) for p in triton.__version__.split(".")[:2] if p.isdigit())
    if version in SUPPORTED:
        return None
    built = ", ".join(".".join(map(str, v)) for v in SUPPORTED)
    return f"Triton {triton.__version__}: the batched executor is built on Triton {built}"


def install(mode: str | None = None) -> None:
    """Patch Triton's interpreter (idempotent; a second call only changes the mode).
    On a Triton release the executor is not built on, nothing is patched: Triton's own
    loop runs every launch (``mode()`` says ``triton``)."""
    mode = mode or os.environ.get(ENV) or "batched"
    if mode not in MODES:
        raise ValueError(f"{ENV}={mode!r}: expected one of {', '.join(MODES)}")
    if unsupported() is not None:
        return
    _MODE[:] = [mode]
    if _ORIGINALS:
        return
    from triton.runtime import interpreter as interp

    from . import bounds

    if interp.GridExecutor.__call__ is bounds._grid_call:
        # beneath the bounds checker's launch context, which its checks need
        _ORIGINALS["grid"] = bounds.swap_launch(_grid_call)
        _ORIGINALS["under"] = "bounds"
    else:
        _ORIGINALS["grid"] = interp.GridExecutor.__call__
        interp.GridExecutor.__call__ = _grid_call
    _ORIGINALS["device"] = interp.InterpretedFunction.__call__
    interp.InterpretedFunction.__call__ = _device_call


def _watchers() -> list | None:
    """What a launch's failure must be told to on its way to Triton's own loop
    (``GridExecutor.__call__`` wrappers that only watch a launch fail, as the parity shims'
    failure record), or None where another tool's loop is in the way: a launch resumes in
    ``_resume_loop``, a copy of Triton's, only where there is none."""
    call, watchers = _ORIGINALS.get("grid"), []
    while hasattr(call, "on_failure") and hasattr(call, "wraps_loop"):
        watchers.append(call.on_failure)
        call = call.wraps_loop
    module = getattr(call, "__module__", "")
    own = module == "triton.runtime.interpreter" and call.__qualname__ == "GridExecutor.__call__"
    return watchers if own else None


def install_from_env() -> bool:
    """``install()`` where ``MUTANT_GATE_INTERPRETER`` is set; True if it was."""
    if not os.environ.get(ENV):
        return False
    install()
    return True


def uninstall() -> None:
    """Give Triton's interpreter back as it was."""
    if not _ORIGINALS:
        return
    from triton.runtime import interpreter as interp

    from . import bounds

    if _ORIGINALS.pop("under", None) and bounds.installed():
        bounds.swap_launch(_ORIGINALS.pop("grid"))
    elif interp.GridExecutor.__call__ is _grid_call:
        interp.GridExecutor.__call__ = _ORIGINALS.pop("grid")
    else:
        _ORIGINALS.pop("grid")
    interp.InterpretedFunction.__call__ = _ORIGINALS.pop("device")
    _MODE.clear()


def mode() -> str | None:
    return _MODE[0] if _ORIGINALS and _MODE else None


def launches() -> list[dict]:
    """One record a launch: kernel, programs, executor ("batched" | "triton"), reason, chunks,
    seconds, and for a batched launch ``masked``: the divergent flow it ran under masks."""
    return [dict(r) for r in _RECORDS]


def clear() -> None:
    _RECORDS.clear()


def summary() -> dict[str, dict]:
    """Per kernel: launches by executor, the reasons for Triton's loop, and (``masked``, where
    any) the divergent flow batched launches ran under masks, with their launch counts."""
    out: dict[str, dict] = {}
    for r in _RECORDS:
        k = out.setdefault(r["kernel"], {"batched": 0, "triton": 0, "reasons": {}})
        k[r["executor"]] += 1
        if r["reason"]:
            k["reasons"][r["reason"]] = k["reasons"].get(r["reason"], 0) + 1
        for kind in r.get("masked") or ():
            masked = k.setdefault("masked", {})
            masked[kind] = masked.get(kind, 0) + 1
    return out


def _record(kernel: str, programs: int, executor: str, reason: str | None, **extra: Any) -> None:
    if len(_RECORDS) < MAX_RECORDS:
        _RECORDS.append(
            {"kernel": kernel, "programs": programs, "executor": executor, "reason": reason} | extra
        )


# --------------------------------------------------------------------------
# the language, patched once per launch


def _langs_of(fn: Any) -> frozenset:
    if fn not in _LANGS:
        import triton.language as tl

        mods = (tl, tl.core)
        _LANGS[fn] = frozenset(
            v for v in fn.__globals__.values() if inspect.ismodule(v) and v in mods
        )
    return _LANGS[fn]


def _device_call(self: Any, *args: Any, **kwargs: Any) -> Any:
    """A device-function call: Triton patches its language at every one; within a launch that
    has patched it, once is enough."""
    if not _LAUNCH_LANGS:
        return _ORIGINALS["device"](self, *args, **kwargs)
    from triton.runtime import interpreter as interp

    langs = _langs_of(self.fn)
    if not langs <= _LAUNCH_LANGS[-1]:
        interp._patch_lang(self.fn)  # left patched, as Triton leaves it
        _LAUNCH_LANGS[-1].update(langs)
    fn = self.rewrite()
    if ops.STATE:  # a batched launch: the function's divergent flow as masks too
        fn = _kernel_for(fn, kernel=False)
    try:
        return fn(*args, **kwargs)
    except Exception as e:
        raise interp.InterpreterError(repr(e)) from e


def _kernel_name(fn: Any) -> str:
    return getattr(fn, "__name__", "?")


def _triton_loop(self: Any, args_dev: tuple, kwargs: dict, hooks: bool = True) -> Any:
    """Triton's own loop (whatever ``GridExecutor.__call__`` was before us), patching once."""
    saved_hooks = self.pre_run_hooks
    if not hooks:
        self.pre_run_hooks = []
    _LAUNCH_LANGS.append(set(_langs_of(self.fn)))
    try:
        return _ORIGINALS["grid"](self, *args_dev, **kwargs)
    finally:
        _LAUNCH_LANGS.pop()
        self.pre_run_hooks = saved_hooks


def _resume_loop(
    ex: Any, args_dev: tuple, kwargs: dict, hst: tuple, first: int, watchers: list
) -> None:
    """Triton's loop (``GridExecutor.__call__`` of the Triton the executor is built on) from
    program ``first`` in its order, on the host arguments the batched chunks before it wrote
    (``hst``), then those copied back as Triton's loop does; a failure told to ``watchers``
    as the wrappers they come from would."""
    import triton
    from triton.runtime import interpreter as interp

    args_hst, kwargs_hst = hst
    scope = interp._patch_lang(ex.fn)
    _LAUNCH_LANGS.append(set(_langs_of(ex.fn)))
    try:
        args = inspect.getcallargs(ex.fn, *args_hst, **kwargs_hst)
        args = {k: v if k in ex.constexprs else interp._implicit_cvt(v) for k, v in args.items()}
        grid = ex.grid(args) if callable(ex.grid) else ex.grid
        grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
        interp.interpreter_builder.set_grid_dim(*grid)
        try:
            for linear in range(first, grid[0] * grid[1] * grid[2]):
                x, rest = divmod(linear, grid[1] * grid[2])
                interp.interpreter_builder.set_grid_idx(x, *divmod(rest, grid[2]))
                ex.fn(**args)
        except Exception as e:
            if triton.knobs.compilation.front_end_debugging:
                raise
            error = interp.InterpreterError(repr(e))
            error.__cause__ = e
            for watch in watchers:
                watch(ex, error)
            raise error from e
    finally:
        _LAUNCH_LANGS.pop()
        scope.restore()
    ex._restore_args_dev(args_dev, args_hst, kwargs, kwargs_hst)


def _grid_call(self: Any, *args_dev: Any, **kwargs: Any) -> Any:
    from triton.runtime import interpreter as interp

    reason = "interpreter=triton" if mode() != "batched" else None
    if reason is None and _LAUNCH_LANGS:
        reason = "a launch inside a launch"
    hooks = known_hooks() if reason is None else None
    if reason is None and (hooked := _hooked(interp.interpreter_builder, self, hooks)):
        reason = f"memory hooks of another tool need Triton's loop ({hooked})"
    if reason is None:
        return _Launch(self, args_dev, kwargs, hooks).run()
    start = time.perf_counter()
    try:
        return _triton_loop(self, args_dev, kwargs)
    finally:
        programs = _programs(self, args_dev, kwargs)
        _record(_kernel_name(self.fn), programs, "triton", reason,
                seconds=time.perf_counter() - start)  # fmt: skip


def _programs(self: Any, args_dev: tuple, kwargs: dict) -> int:
    grid = self.grid
    if callable(grid):
        return -1  # not evaluated twice: a grid function may have effects
    return int(np.prod(list(grid) or [1]))


# --------------------------------------------------------------------------
# a batched launch


class _Both:
    """Stands for a function that sees both ``triton.language`` and its ``core``."""

    def __init__(self) -> None:
        import triton.language as tl

        self.__globals__ = {"tl": tl, "core": tl.core}


class _Launch:
    def __init__(self, executor: Any, args_dev: tuple, kwargs: dict, hooks: Any) -> None:
        self.ex, self.args_dev, self.kwargs = executor, args_dev, kwargs
        self.hooks = hooks
        self.checks: Checks | None = None
        self.name = _kernel_name(executor.fn)
        self.programs = 0
        self.chunks = 0
        self.memory: Memory | None = None
        self.masked: set[str] = set()
        #: programs whose chunks passed, their writes committed: Triton's loop resumes after
        #: them (0 where it cannot, ``watchers`` None: it runs the whole launch, the memory
        #: put back as it was before it)
        self.done = 0
        self.watchers = _watchers()

    def run(self) -> Any:
        start = time.perf_counter()
        ex = self.ex
        argspec = inspect.getfullargspec(ex.fn)
        kwargs = {k: v for k, v in self.kwargs.items() if k in argspec.args + argspec.kwonlyargs}
        args_hst, kwargs_hst = ex._init_args_hst(self.args_dev, kwargs)
        for hook in ex.pre_run_hooks:
            hook(*args_hst, **kwargs_hst)
        prints: list[str] = []
        from triton.runtime import interpreter as interp

        from .bounds import BoundsViolation

        self.checks = Checks.for_launch(ex.fn, self.hooks)
        try:
            reason = self._batched(args_hst, kwargs_hst, prints)
        except BoundsViolation as e:  # found for all programs at once, raised as the loop does
            for line in prints:
                print(line)
            _record(self.name, self.programs, "batched", None, chunks=self.chunks,
                    seconds=time.perf_counter() - start, masked=sorted(self.masked))  # fmt: skip
            raise interp.InterpreterError(repr(e)) from e
        except Exception as e:  # noqa: BLE001 - Triton's loop runs it and says what is wrong
            reason = _reason(e)
        if reason is not None:
            if self.memory is not None:
                self.memory.restore()
            if self.checks is not None:
                self.checks.put_back()
            first = self.done
            resumed = {"batched_programs": first} if first else {}
            for line in prints if first else ():  # the chunks that stand, in program order
                print(line)
            try:
                if first:
                    hst = (args_hst, kwargs_hst)
                    return _resume_loop(ex, self.args_dev, kwargs, hst, first, self.watchers)
                return _triton_loop(ex, self.args_dev, self.kwargs, hooks=False)
            finally:
                _record(self.name, self.programs, "triton", reason,
                        seconds=time.perf_counter() - start, **resumed)  # fmt: skip
        for line in prints:
            print(line)
        ex._restore_args_dev(self.args_dev, args_hst, kwargs, kwargs_hst)
        _record(self.name, self.programs, "batched", None, chunks=self.chunks,
                seconds=time.perf_counter() - start, masked=sorted(self.masked))  # fmt: skip
        return None

    def _batched(self, args_hst: list, kwargs_hst: dict, prints: list[str]) -> str | None:
        from triton.runtime import interpreter as interp

        ex = self.ex
        lang = interp._patch_lang(_Both())
        own = interp._LangPatchScope()
        errors = np.geterr()  # a masked region that raised leaves numpy's settings as found
        builder = interp.interpreter_builder
        added: dict[str, Any] = {}
        _LAUNCH_LANGS.append(set(_Both().__globals__.values()))
        try:
            args = inspect.getcallargs(ex.fn, *args_hst, **kwargs_hst)
            args = {
                k: v if k in ex.constexprs else interp._implicit_cvt(v) for k, v in args.items()
            }
            grid = ex.grid(args) if callable(ex.grid) else ex.grid
            assert len(grid) <= 3, "grid must have at most 3 dimensions"
            grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
            self.programs = grid[0] * grid[1] * grid[2]
            storages = _storages(list(args_hst) + list(kwargs_hst.values()))
            if isinstance(storages, str):
                return storages
            builder.set_grid_dim(*grid)
            builder.grid_idx = (0, 0, 0)
            _patch_batched(own, builder, added)
            self.memory = Memory(storages, self.checks)
            kernel = _kernel_for(ex.fn)
            if self.checks is not None:
                self.checks.add_code(getattr(kernel, "__code__", None))
            self._chunks(kernel, args, grid, prints)
            return None
        finally:
            for name, prior in added.items():
                if prior is _ABSENT:
                    builder.__dict__.pop(name, None)
                else:
                    builder.__dict__[name] = prior
            own.restore()
            lang.restore()
            _LAUNCH_LANGS.pop()
            ops.STATE.clear()
            iterations.unguard()
            np.seterr(**errors)

    def _chunks(self, fn: Any, args: dict, grid: tuple, prints: list[str]) -> None:
        budget = ops.chunk_elements()
        start, size = 0, ops.first_chunk(self.programs)
        while start < self.programs:
            linear = np.arange(start, min(self.programs, start + size), dtype=np.int64)
            batch = ops.Batch(linear, grid, self.memory)
            ops.STATE[:] = [batch]
            if self.checks is not None:
                self.checks.start_chunk(batch)
            try:
                fn(**args)
            finally:
                self.masked |= batch.masked  # a bounds violation's launch record says it too
            ops.STATE.clear()
            self.memory.check_chunk()
            if self.checks is not None:
                self.checks.end_chunk(batch)  # raises a bounds violation found in the chunk
            for lines in batch.prints:
                prints.extend(lines)
            self.chunks += 1
            start += batch.n
            if self.watchers is not None:  # the chunk stands: a fallback resumes after it
                self.memory.commit()
                if self.checks is not None:
                    self.checks.commit()
                self.done = start
            size = max(1, budget // max(1, batch.largest))


#: Methods whose replacement by another tool sees one program at a time: a launch with any of
#: them replaced runs in Triton's loop, where they work. The harness's own (the bounds checker,
#: the launch tracer) have batched counterparts (``batched_checks``).
PER_PROGRAM_HOOKS = (
    ("InterpreterBuilder", "create_masked_load"),
    ("InterpreterBuilder", "create_masked_store"),
    ("InterpreterBuilder", "create_load"),
    ("InterpreterBuilder", "create_store"),
    ("InterpreterBuilder", "create_atomic_rmw"),
    ("InterpreterBuilder", "create_atomic_cas"),
    ("GridExecutor", "_init_args_hst"),
    ("GridExecutor", "_restore_args_dev"),
)


def _hooked(builder: Any, executor: Any, hooks: Any) -> str:
    """The per-program hooks another tool has put in, comma-separated ('' for none)."""
    from . import bounds

    if isinstance(hooks, str):
        return hooks
    owners = {"InterpreterBuilder": builder, "GridExecutor": executor}
    ours = {"triton.runtime.interpreter", bounds.__name__}
    names = []
    for owner, name in PER_PROGRAM_HOOKS:
        if name in ("create_masked_load", "create_masked_store"):
            continue  # known_hooks() walked them
        fn = getattr(getattr(owners[owner], name), "__func__", None)
        if getattr(fn, "__module__", "") not in ours:
            names.append(f"{owner}.{name}")
    if bounds.installed() and bounds.current(executor.fn) is None and "bounds" in hooks[0]:
        names.append("the bounds checker's launch context")
    return ", ".join(names)


def _reason(e: BaseException) -> str:
    seen = e
    while seen is not None:
        if isinstance(seen, ops.Divergence):
            return seen.reason
        seen = seen.__cause__ or seen.__context__
    text = repr(e)
    return f"error in the batched run: {text[:200]}"


def _storages(values: list) -> list[tuple[int, int]] | str:
    """(address, bytes) of every argument's storage, or why the launch cannot run batched."""
    from triton.runtime import interpreter as interp

    out: list[tuple[int, int]] = []
    todo = list(values)
    while todo:
        v = todo.pop()
        if isinstance(v, tuple):
            todo.extend(v)
        elif isinstance(v, interp.TensorDescriptor):
            return "a tensor descriptor argument"
        elif hasattr(v, "data_ptr"):
            storage = interp._unwrap_tensor(v).untyped_storage()
            out.append((storage.data_ptr(), storage.nbytes()))
    return out


def _patch_batched(scope: Any, builder: Any, added: dict[str, Any]) -> None:
    """Batched reduce/scan, tensor truth and index, and builder methods (as attributes of the
    builder instance, ``added`` keeps what they shadowed: the harness's own shims included)."""
    import triton.language as tl

    for target in (tl, tl.core):
        scope.set_attr(target, "reduce", ops.new_reduce)
        scope.set_attr(target, "associative_scan", ops.new_scan)
    tensor = tl.core.tensor
    attrs = ops.make_tensor_attrs(tensor.__bool__, tensor.__index__, tensor.__dict__["T"])
    for name, value in attrs.items():
        scope.set_attr(tensor, name, value)
    originals = {n: getattr(builder, n) for n in dir(type(builder)) if n.startswith("create_")}
    special = ops.make_methods(builder, originals)
    for name, method in originals.items():
        if name in special:
            fn = special[name]
        elif name in ops.PASS_THROUGH:
            fn = ops.pass_through(method)
        else:
            fn = ops.unsupported(name, method)
        added[name] = builder.__dict__.get(name, _ABSENT)
        builder.__dict__[name] = fn


# --------------------------------------------------------------------------
# the kernel, with its divergent control flow as masks (``batched_flow``)


def _kernel_for(rewritten: Any, kernel: bool = True) -> Any:
    """The kernel (or, ``kernel`` False, a device function: its bare ``return`` ends only the
    call, so it is no guard) with divergent flow as masks (Triton's own rewrite where it has
    none)."""
    from triton.runtime import interpreter as interp

    original = next((k for k, v in interp.InterpretedFunction.rewritten_fn.items()
                     if v is rewritten), None)  # fmt: skip
    if original is None:
        return rewritten
    if (original, kernel) not in _KERNELS:
        _KERNELS[original, kernel] = _rewrite_flow(original, kernel) or rewritten
    return _KERNELS[original, kernel]


def _rewrite_flow(original: Any, kernel: bool) -> Any:
    from triton.runtime import interpreter as interp

    guards = flow.Rewrite(guards=kernel)

    class Rewriter(interp.FunctionRewriter):
        def _transform_ast(self, src: str) -> Any:
            tree = guards.kernel(super()._transform_ast(src))
            return ast.fix_missing_locations(tree)

    try:
        rewriter = Rewriter(original)
        lines, _ = inspect.getsourcelines(original)
        rewriter.filename, rewriter.def_file_lineno = rewriter._get_jit_fn_file_line()
        rewriter.def_lineno = rewriter._find_def(lines)
        tree = rewriter._transform_ast(rewriter._prepare_source(lines))
    except (OSError, TypeError, SyntaxError):
        return None
    if not guards.found:
        return None
    flow.install(original.__globals__)
    return rewriter._compile_and_exec(tree)
