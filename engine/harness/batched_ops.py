"""Builder operations over every program of a launch at once (see ``batched.py``).

A value that differs between programs is a ``BatchedHandle``: its numpy data carries a leading
program axis in front of what one program's ``TensorHandle`` holds (a scalar is ``(n, 1)``, a
block ``(n, *shape)``). The ``tl`` types stay one program's, so Triton's semantic layer checks
and broadcasts exactly as in its own loop; a value the same in every program stays a plain
``TensorHandle`` and is computed once. Elementwise builder methods need nothing but the flag
passed on (numpy broadcasts the leading axis); the rest are replaced here. Anything this module
cannot run for all programs at once raises ``Divergence``, and the launch falls back to Triton's
own loop.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import triton.language as tl
from triton.runtime import interpreter as interp

ENV_ELEMENTS = "MUTANT_GATE_BATCH_ELEMENTS"
DEFAULT_ELEMENTS = 1 << 20  # benchmarks/chunk_size.py: a 4M-element chunk runs out of the caches


def chunk_elements() -> int:
    """A chunk's budget: programs (or a loop's iterations) times the most elements one of
    them loads or stores at once (``MUTANT_GATE_BATCH_ELEMENTS``, default 1M)."""
    return int(os.environ.get(ENV_ELEMENTS) or DEFAULT_ELEMENTS)


FIRST_CHUNK = 256  # programs (or iterations) in a first chunk, before their blocks' sizes are known
GUESSED_ELEMENTS = 128  # elements a program, for the first chunk


def first_chunk(n: int) -> int:
    """How many of ``n`` programs (or iterations) the first chunk runs."""
    return min(n, FIRST_CHUNK, max(1, chunk_elements() // GUESSED_ELEMENTS))


def is_range(fn: Any) -> bool:
    """Python's range, or ``tl.range`` / ``tl.static_range`` (the interpreter's range while a
    launch runs)."""
    return fn is range or fn is tl.range or fn is tl.static_range


class Divergence(Exception):
    """This launch cannot run batched; ``reason`` says why (it goes into the launch record)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BatchedHandle(interp.TensorHandle):
    """A TensorHandle whose data has a leading program axis."""


class Batch:
    """The programs of one chunk of a launch: their ids, which are still running, their prints."""

    def __init__(self, linear: np.ndarray, grid: tuple[int, int, int], memory: Any) -> None:
        self.n = int(linear.size)
        gy, gz = grid[1], grid[2]
        self.pids = (
            (linear // (gy * gz)).astype(np.int32),
            ((linear // gz) % gy).astype(np.int32),
            (linear % gz).astype(np.int32),
        )
        self.grid = grid
        self.memory = memory
        self.active: np.ndarray | None = None  # None: every program runs here
        self.stopped = np.zeros(self.n, dtype=bool)  # programs that ended (a return, a fault)
        self.prints: list[list[str]] = [[] for _ in range(self.n)]
        self.largest = 1  # most elements one program's load or store touched
        self.masked: set[str] = set()  # the divergent flow run under masks (batched_flow)
        self.iterations = False  # a single program's loop iterations, not programs

    def running(self) -> np.ndarray:
        """One bool a program: still running."""
        return np.ones(self.n, dtype=bool) if self.active is None else self.active

    def stop(self, programs: np.ndarray) -> None:
        """``programs`` end here for good: no mask a region lifts brings them back."""
        self.stopped |= programs
        self.active = self.running() & ~programs

    def lanes(self, ndim: int) -> np.ndarray | None:
        """The active mask shaped to broadcast against a batched array of ``ndim`` dims."""
        if self.active is None:
            return None
        return self.active.reshape((self.n,) + (1,) * (ndim - 1))


STATE: list[Batch] = []  # the batch now running (at most one)


def current() -> Batch:
    return STATE[-1]


def is_batched(h: Any) -> bool:
    return isinstance(h, BatchedHandle)


def batched(data: np.ndarray, dtype: Any) -> BatchedHandle:
    return BatchedHandle(data, dtype)


def lift(h: interp.TensorHandle, n: int) -> np.ndarray:
    """``h``'s data with the program axis (a view for a value the same in every program)."""
    if is_batched(h):
        return h.data
    return np.broadcast_to(h.data, (n,) + h.data.shape)


def per_program(h: interp.TensorHandle, n: int) -> np.ndarray:
    """``h``'s data as (n, elements of one program)."""
    return lift(h, n).reshape(n, -1)


def _axis(axis: int) -> int:
    """A per-program axis on batched data (negative axes count from the end alike)."""
    return axis if axis < 0 else axis + 1


# --------------------------------------------------------------------------
# builder methods that only pass the flag on (numpy broadcasts the program axis)

PASS_THROUGH = frozenset(
    name
    for name in dir(interp.InterpreterBuilder)
    if name.startswith("create_")
    and (
        name[7:]
        in {
            "add",
            "and",
            "approx_divf",
            "ashr",
            "bitcast",
            "ceil",
            "clampf",
            "cos",
            "dot",
            "erf",
            "exp",
            "exp2",
            "fabs",
            "fadd",
            "fdiv",
            "floor",
            "fma",
            "fmul",
            "fneg",
            "fp_ext",
            "fp_to_fp",
            "fp_to_si",
            "fp_to_ui",
            "fp_trunc",
            "frem",
            "fsub",
            "iabs",
            "idiv",
            "int_cast",
            "int_to_ptr",
            "log",
            "log2",
            "lshr",
            "maximumf",
            "maxnumf",
            "maxsi",
            "maxui",
            "minimumf",
            "minnumf",
            "minsi",
            "minui",
            "mul",
            "or",
            "precise_divf",
            "precise_sqrt",
            "ptr_to_int",
            "rsqrt",
            "sdiv",
            "select",
            "shl",
            "si_to_fp",
            "sin",
            "split",
            "sqrt",
            "srem",
            "sub",
            "udiv",
            "ui_to_fp",
            "umulhi",
            "urem",
            "xor",
            "barrier",
            "make_range",
            "extern_elementwise",
        }  # fmt: skip
        or name.startswith(("create_icmp", "create_fcmp"))
    )
)


def _any_batched(args: tuple) -> bool:
    for a in args:
        if isinstance(a, BatchedHandle):
            return True
        if isinstance(a, (list, tuple)) and any(isinstance(x, BatchedHandle) for x in a):
            return True
    return False


def _mark(out: Any) -> Any:
    if isinstance(out, interp.TensorHandle):
        out.__class__ = BatchedHandle
    elif isinstance(out, tuple):
        for o in out:
            _mark(o)
    return out


def pass_through(original: Any) -> Any:
    def method(*args: Any) -> Any:
        out = original(*args)
        return _mark(out) if _any_batched(args) else out

    return method


#: Builder methods a batched launch never runs, even on values alike in every program: each
#: program's call has an effect of its own (a compare-and-swap is a program's own turn).
ALWAYS_LOOP = frozenset({"create_atomic_cas"})


def unsupported(name: str, original: Any) -> Any:
    def method(*args: Any, **kwargs: Any) -> Any:
        if name in ALWAYS_LOOP:
            raise Divergence(f"{name[7:]} runs program by program")
        if _any_batched(args) or _any_batched(tuple(kwargs.values())):
            raise Divergence(f"{name[7:]} on values that differ between programs")
        return original(*args, **kwargs)

    return method


# --------------------------------------------------------------------------
# builder methods with batched versions


def make_methods(builder: Any, original: dict[str, Any]) -> dict[str, Any]:
    """The batched builder methods, as instance attributes for ``builder``: the values'
    shapes (``original``: the builder's own, for values the same in every program), the
    memory, and what a program says (prints, asserts)."""
    return {
        **_shape_methods(original),
        **_joining_methods(original),
        **_memory_methods(builder),
        **_saying_methods(),
    }


def _shape_methods(original: dict[str, Any]) -> dict[str, Any]:
    """Program ids and the block shapes of per-program values."""
    np_dtype = interp._get_np_dtype

    def get_program_id(axis: int) -> Any:
        b = current()
        if b.grid[axis] == 1:
            return original["create_get_program_id"](axis)
        return batched(b.pids[axis].reshape(b.n, 1), tl.int32)

    def splat(ret_ty: Any, arg: Any) -> Any:
        if not is_batched(arg):
            return original["create_splat"](ret_ty, arg)
        n, shape = current().n, tuple(ret_ty.shape)
        v = arg.data.reshape(n, -1)[:, :1].astype(np_dtype(arg.dtype), copy=False)
        data = np.broadcast_to(v.reshape((n,) + (1,) * len(shape)), (n,) + shape)
        return batched(data, arg.dtype.scalar)

    def unsplat(arg: Any) -> Any:
        if not is_batched(arg):
            return original["create_unsplat"](arg)
        n = current().n
        v = arg.data.reshape(n, -1)[:, :1].astype(np_dtype(arg.dtype))
        return batched(v, arg.dtype.scalar)

    def broadcast(arg: Any, shape: Any) -> Any:
        if not is_batched(arg):
            return original["create_broadcast"](arg, shape)
        n = current().n
        return batched(np.broadcast_to(arg.data, (n,) + tuple(shape)), arg.dtype.scalar)

    def expand_dims(arg: Any, axis: int) -> Any:
        if not is_batched(arg):
            return original["create_expand_dims"](arg, axis)
        return batched(np.expand_dims(arg.data, _axis(axis)), arg.dtype.scalar)

    def reshape(arg: Any, shape: Any, allow_reorder: bool) -> Any:
        if not is_batched(arg):
            return original["create_reshape"](arg, shape, allow_reorder)
        n = current().n
        return batched(arg.data.reshape((n,) + tuple(shape)), arg.dtype.scalar)

    def trans(arg: Any, perm: Any) -> Any:
        if not is_batched(arg):
            return original["create_trans"](arg, perm)
        axes = (0,) + tuple(int(p) + 1 for p in perm)
        return batched(np.transpose(arg.data, axes), arg.dtype.scalar)

    return {
        "create_get_program_id": get_program_id,
        "create_splat": splat,
        "create_unsplat": unsplat,
        "create_broadcast": broadcast,
        "create_expand_dims": expand_dims,
        "create_reshape": reshape,
        "create_trans": trans,
    }


def _joining_methods(original: dict[str, Any]) -> dict[str, Any]:
    """Blocks made of two blocks (cat, join) or of another's elements (gather)."""

    def cat(lhs: Any, rhs: Any) -> Any:
        if not (is_batched(lhs) or is_batched(rhs)):
            return original["create_cat"](lhs, rhs)
        n = current().n
        return batched(np.concatenate([lift(lhs, n), lift(rhs, n)], axis=1), lhs.dtype.scalar)

    def join(lhs: Any, rhs: Any) -> Any:
        if not (is_batched(lhs) or is_batched(rhs)):
            return original["create_join"](lhs, rhs)
        n = current().n
        return batched(np.stack([lift(lhs, n), lift(rhs, n)], axis=-1), lhs.dtype.scalar)

    def gather(src: Any, indices: Any, axis: int) -> Any:
        if not (is_batched(src) or is_batched(indices)):
            return original["create_gather"](src, indices, axis)
        n = current().n
        data = np.take_along_axis(lift(src, n), lift(indices, n), axis=_axis(axis))
        return batched(data, src.dtype.scalar)

    return {
        "create_cat": cat,
        "create_join": join,
        "create_gather": gather,
    }


def _memory_methods(builder: Any) -> dict[str, Any]:
    """Loads, stores and atomics over every program's addresses (``batched_memory``)."""
    np_dtype = interp._get_np_dtype

    def masked_load(ptrs: Any, mask: Any, other: Any, cache_policy: Any, is_volatile: Any) -> Any:
        b = current()
        dtype_tt = ptrs.get_element_ty()
        return b.memory.load(b, ptrs, mask, other, dtype_tt, np_dtype(dtype_tt))

    def load(ptr: Any, cache_policy: Any, is_volatile: Any) -> Any:
        return masked_load(ptr, None, None, cache_policy, is_volatile)

    def masked_store(ptrs: Any, value: Any, mask: Any, cache_policy: Any) -> None:
        b = current()
        b.memory.store(b, ptrs, value, mask)

    def store(ptr: Any, val: Any, cache_policy: Any) -> None:
        masked_store(ptr, val, None, cache_policy)

    def atomic_rmw(rmw_op: Any, ptr: Any, val: Any, mask: Any, sem: Any, scope: Any) -> Any:
        b = current()
        if b.iterations:
            raise Divergence("an atomic in a loop whose iterations run together")
        if rmw_op not in builder.ir_rmw_op_to_interpreter_rmw_op:
            raise ValueError(f"unsupported rmwOp {rmw_op}")
        if sem not in builder.ir_sem_to_interpreter_sem:
            raise ValueError(f"unsupported semantic {sem}")
        op = builder.ir_rmw_op_to_interpreter_rmw_op[rmw_op]
        return b.memory.atomic(b, op, ptr, val, mask, builder.ir_sem_to_interpreter_sem[sem])

    def addptr(ptr: Any, offset: Any) -> Any:
        """Triton's ``ptr + element_bytes * offset`` in uint64, its arithmetic done in
        place in one array (the same bits: modular sums in another order): over a whole
        launch's millions of lanes, the interpreter's two temporaries cost more than the
        arithmetic."""
        width = max(1, ptr.get_element_ty().primitive_bitwidth // 8)
        off = offset.data
        if np.broadcast_shapes(ptr.data.shape, off.shape) == off.shape:
            data = off.astype(np.uint64)
            if width != 1:
                np.multiply(data, np.uint64(width), out=data)
            np.add(data, ptr.data, out=data)
        else:
            data = ptr.data + width * off.astype(np.uint64)
        out = interp.TensorHandle(data, ptr.dtype)
        return _mark(out) if _any_batched((ptr, offset)) else out

    return {
        "create_masked_load": masked_load,
        "create_load": load,
        "create_masked_store": masked_store,
        "create_store": store,
        "create_atomic_rmw": atomic_rmw,
        "create_addptr": addptr,
    }


def _holds_in_every_active_program(condition: Any) -> bool:
    b = current()
    ok = per_program(condition, b.n).all(axis=1)
    if b.active is not None:
        ok = ok | ~b.active
    return bool(ok.all())


def _saying_methods() -> dict[str, Any]:
    """Prints (kept per program, written in program order) and asserts."""

    def print_(prefix: str, hex: bool, values: Any, is_signed: Any) -> None:
        b = current()
        if hex:
            np.set_printoptions(formatter={"all": _to_hex})
        try:
            for i in range(b.n):
                if b.active is not None and not b.active[i]:
                    continue
                msg = f"({b.pids[0][i]}, {b.pids[1][i]}, {b.pids[2][i]})"
                if prefix:
                    msg += f" {prefix}"
                for value in values:
                    data = value.data[i] if is_batched(value) else value.data
                    b.prints[i].append(msg + f" {data}")
        finally:
            if hex:
                np.set_printoptions(formatter=None)

    def assert_(condition: Any, message: Any) -> None:
        assert _holds_in_every_active_program(condition), f"{message}"

    def assume(condition: Any) -> None:
        assert _holds_in_every_active_program(condition), "Assume failed"

    return {
        "create_print": print_,
        "create_assert": assert_,
        "create_assume": assume,
    }


def _to_hex(x: Any) -> str:
    if isinstance(x, np.floating):
        return float(x).hex()
    width = x.dtype.itemsize * 2
    return f"0x{int(x):0{width}x}"


# --------------------------------------------------------------------------
# tl.tensor: a Python branch or loop on a value, a transpose


def _uniform(t: Any) -> np.ndarray | None:
    """The per-program scalar values of ``t`` among the running programs (None: not a scalar)."""
    b = current()
    per = t.handle.data.reshape(b.n, -1)
    if per.shape[1] != 1:
        return None
    vals = per[:, 0]
    return vals if b.active is None else vals[b.active]


def make_tensor_attrs(stock_bool: Any, stock_index: Any, stock_t: Any) -> dict[str, Any]:
    def bool_(self: Any) -> bool:
        if not is_batched(self.handle):
            return stock_bool(self)
        vals = _uniform(self)
        if vals is None:
            return True  # a block is truthy in Triton's interpreter too
        truth = vals.astype(bool)
        if truth.all():
            return True
        if not truth.any():
            return False
        raise Divergence("a branch or loop condition differs between programs")

    def index(self: Any) -> int:
        if not is_batched(self.handle):
            return stock_index(self)
        vals = _uniform(self)
        if vals is None:
            raise Divergence("a block used as an index")
        if (vals == vals[0]).all():
            return int(vals[0])
        raise Divergence("a loop bound or index differs between programs")

    def transpose(self: Any) -> Any:
        if not is_batched(self.handle):
            return stock_t.fget(self)
        data = np.swapaxes(self.handle.data, -1, -2)
        shape = list(self.type.shape)
        shape[-1], shape[-2] = shape[-2], shape[-1]
        return tl.core.tensor(
            batched(data, self.handle.dtype), tl.core.block_type(self.dtype, shape)
        )

    return {"__bool__": bool_, "__index__": index, "T": property(transpose)}


EARLY_RETURN = "an early return some programs take"


def guard(cond: Any) -> bool:
    """``if cond: return`` at a kernel's top level: programs whose ``cond`` holds stop here
    (their later loads, stores and prints are masked off); the rest go on."""
    if not STATE or not isinstance(cond, tl.core.tensor) or not is_batched(cond.handle):
        return bool(cond)
    b = current()
    per = cond.handle.data.reshape(b.n, -1)
    if per.shape[1] != 1:
        return bool(cond)
    stop = per[:, 0].astype(bool)
    running = np.ones(b.n, dtype=bool) if b.active is None else b.active
    if (stop | ~running).all():
        return True
    if not (stop & running).any():
        return False
    b.stop(stop & running)
    b.masked.add(EARLY_RETURN)
    return False


def pick(a: Any, b: Any, which: str) -> Any:
    """Python's ``min(a, b)`` / ``max(a, b)`` in a kernel: ``b`` where ``b < a`` (``b > a``),
    else ``a``. Where programs differ on that, a select gives each program the value it would
    have picked; allowed only where the two are alike in type (or an int beside an int32)."""
    builtin = min if which == "min" else max
    if not STATE or not any(isinstance(v, tl.core.tensor) and is_batched(v.handle) for v in (a, b)):
        return builtin(a, b)
    cond = b < a if which == "min" else b > a
    try:
        return b if cond else a
    except Divergence:
        pass
    if not _selectable(a, b):
        raise Divergence(f"{which}() of values of different types differs between programs")
    return tl.where(cond, b, a)


def _selectable(a: Any, b: Any) -> bool:
    """Whether a select may stand for ``pick``'s choice between ``a`` and ``b``: tensors
    alike in type, or an int32 tensor beside a Python int."""
    ta, tb = (getattr(v, "type", None) for v in (a, b))
    ints = (int, tl.constexpr)
    alike = ta is not None and ta == tb
    return alike or ({ta, tb} - {None} == {tl.int32} and any(isinstance(v, ints) for v in (a, b)))


# --------------------------------------------------------------------------
# tl.reduce / tl.associative_scan over the block axes


def _to_tensor(data: np.ndarray, dtype: Any) -> Any:
    """A batched tl.tensor from (n, *shape) data; shape () is one program's scalar."""
    n = data.shape[0]
    data = np.asarray(data).astype(interp._get_np_dtype(dtype))
    if data.ndim == 1:
        return tl.core.tensor(batched(data.reshape(n, 1), dtype.scalar), dtype)
    return tl.core.tensor(batched(data, dtype.scalar), tl.block_type(dtype, list(data.shape[1:])))


class BatchedReduce(interp.ReduceOps):
    """Triton's ReduceOps with the program axis kept apart."""

    def _axes(self, data: np.ndarray) -> Any:
        if self.axis is None:
            return tuple(range(1, data.ndim))
        return _axis(self.axis)

    def _finish(self, out: np.ndarray, ndim: int) -> np.ndarray:
        # keep_dims with axis=None gives one program's every axis of length 1
        if self.keep_dims and self.axis is None:
            return out.reshape((out.shape[0],) + (1,) * (ndim - 1))
        return out

    def _flat_arg(self, data: np.ndarray, op: Any) -> np.ndarray:
        if self.axis is None:
            return op(data.reshape(data.shape[0], -1), axis=1)
        return op(data, axis=_axis(self.axis), keepdims=self.keep_dims)

    def min_max(self, input: Any, val_reduce_op: Any, idx_reduce_op: Any = None) -> Any:
        input = input[0] if isinstance(input, tuple) else input
        data = lift(input.handle, current().n)
        val = idx = None
        if val_reduce_op:
            out = val_reduce_op(data, axis=self._axes(data), keepdims=self.keep_dims)
            val = _to_tensor(self._finish(out, data.ndim), input.dtype)
        if idx_reduce_op:
            idx = _to_tensor(self._finish(self._flat_arg(data, idx_reduce_op), data.ndim), tl.int32)
        if val is not None and idx is not None:
            return val, idx
        return val if val is not None else idx

    def sum(self, input: Any) -> Any:
        data = lift(input.handle, current().n)
        if self.axis is None:
            out = np.sum(data.reshape(data.shape[0], -1), axis=1)
            return _to_tensor(self._finish(out, data.ndim), input.dtype)
        return _to_tensor(np.sum(data, axis=_axis(self.axis), keepdims=self.keep_dims), input.dtype)

    def generic_reduce(self, input: Any) -> Any:
        n = current().n
        datas = [lift(t.handle, n) for t in input]
        if self.axis is None:
            datas = [d.reshape(n, -1) for d in datas]
        axis = 0 if self.axis is None else self.axis
        shape = datas[0].shape[1:]
        out_shape = shape[:axis] + shape[axis + 1 :]
        outs = [np.zeros((n,) + out_shape, dtype=d.dtype) for d in datas]
        for index in np.ndindex(*shape):
            at = (slice(None),) + index
            out_at = (slice(None),) + index[:axis] + index[axis + 1 :]
            vals = tuple(_to_tensor(d[at], t.dtype) for d, t in zip(datas, input, strict=True))
            if index[axis] == 0:
                _put(outs, out_at, vals, n)
            else:
                _combine_into(self.combine_fn, outs, out_at, out_at, vals, input, n)
        return [self._kept_dims(o, t, axis) for o, t in zip(outs, input, strict=True)]

    def _kept_dims(self, out: np.ndarray, t: Any, axis: int) -> Any:
        """The tensor of one reduced input ``t``'s result ``out``, its reduced axis (every
        axis for ``axis=None``) kept at length 1 where ``keep_dims`` asks."""
        if self.keep_dims:
            out = np.expand_dims(out, _axis(axis)) if self.axis is not None else out
            out = self._finish(out, len(t.shape) + 1)
        return _to_tensor(out, t.dtype)


def _scalars(r: Any, n: int) -> Any:
    if isinstance(r, tl.core.tensor):
        return lift(r.handle, n).reshape(n)
    return r


def _put(outs: list, at: tuple, vals: tuple, n: int) -> None:
    """Write each of ``vals`` (one scalar a program) into its array of ``outs`` at ``at``."""
    for o, v in zip(outs, vals, strict=True):
        o[at] = v.handle.data.reshape(n)


def _combine_into(
    combine_fn: Any, outs: list, acc_at: tuple, at: tuple, vals: tuple, input: Any, n: int
) -> None:
    """One step of a reduce or scan for every program at once: ``combine_fn`` of the
    accumulated values in ``outs`` at ``acc_at`` and ``vals``, written into ``outs`` at
    ``at``."""
    acc = tuple(_to_tensor(o[acc_at], t.dtype) for o, t in zip(outs, input, strict=True))
    ret = combine_fn.fn(*acc, *vals)
    ret = ret if isinstance(ret, tuple) else (ret,)
    for o, r in zip(outs, ret, strict=True):
        o[at] = _scalars(r, n)


class BatchedScan(interp.ScanOps):
    """Triton's ScanOps with the program axis kept apart."""

    def apply_impl(self, input: Any) -> Any:
        n = current().n
        datas = [lift(t.handle, n) for t in input]
        ax = _axis(self.axis)
        if self.reverse:
            datas = [np.ascontiguousarray(np.flip(d, axis=ax)) for d in datas]
        outs = self._forward(datas, input, n, ax)
        if self.reverse:
            outs = [np.ascontiguousarray(np.flip(o, axis=ax)) for o in outs]
        return [_to_tensor(o, t.dtype) for o, t in zip(outs, input, strict=True)]

    def _forward(self, datas: list, input: Any, n: int, ax: Any) -> list:
        """The scan's results from the first element on along ``ax``: numpy's for a sum or
        a product, else ``_generic``'s."""
        if self.combine_fn == tl.standard._sum_combine:
            return [np.cumsum(datas[0], axis=ax)]
        if self.combine_fn == tl.standard._prod_combine:
            return [np.cumprod(datas[0], axis=ax)]
        return self._generic(datas, input, n)

    def _generic(self, datas: list, input: Any, n: int) -> list:
        shape = datas[0].shape[1:]
        outs = [np.zeros_like(d) for d in datas]
        for index in np.ndindex(*shape):
            at = (slice(None),) + index
            vals = tuple(_to_tensor(d[at], t.dtype) for d, t in zip(datas, input, strict=True))
            if index[self.axis] == 0:
                _put(outs, at, vals, n)
                continue
            prev = list(index)
            prev[self.axis] -= 1
            prev_at = (slice(None),) + tuple(prev)
            _combine_into(self.combine_fn, outs, prev_at, at, vals, input, n)
        return outs


def _any_batched_input(input: Any) -> bool:
    items = input if isinstance(input, tuple) else (input,)
    return any(isinstance(t, tl.core.tensor) and is_batched(t.handle) for t in items)


def new_reduce(input: Any, axis: Any, combine_fn: Any, keep_dims: bool = False, **kw: Any) -> Any:
    if not STATE or not _any_batched_input(input):
        return interp.ReduceOps(axis, combine_fn, keep_dims).apply(input)
    return BatchedReduce(axis, combine_fn, keep_dims).apply(input)


def new_scan(input: Any, axis: Any, combine_fn: Any, reverse: bool = False, **kw: Any) -> Any:
    if not STATE or not _any_batched_input(input):
        return interp.ScanOps(axis, combine_fn, reverse).apply(input)
    return BatchedScan(axis, combine_fn, reverse).apply(input)
