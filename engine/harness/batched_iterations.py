"""A single program's loop, its iterations together (see ``batched.py``).

A real library's norm backward kernels launch as many programs as the GPU has multiprocessors,
one on a CPU: ONE program that loops ``for row in range(row_start, row_end):`` over every row,
adding each row's share into a sum it stores after the loop. Running programs together cannot
speed that up; running the loop's iterations together can, as programs are run together: a
leading axis over iterations (chunks of them, bounded like a launch's chunks of programs), the
loop variable one value an iteration, the values from before the loop the same in every
iteration.

A loop runs so (``Iterations``) where the program runs alone (a batch of one program, none of
it masked off), its range has two steps or more, and its body qualifies, decided from the AST
when the kernel is rewritten (``plan``): no ``return``, ``break``, ``continue`` or ``yield``,
no atomics; the loop variable used only as an operand of arithmetic or a comparison; every name
the body reads before it sets it (a loop-carried name) only ever updated as ``x += e`` or
``x = x + e`` (``e`` not reading ``x``) and read nowhere else. Each update's ``e`` is kept per
iteration and folded into ``x`` in the loop's order, one ``x = x + e_i`` at a time by the
kernel's own operator (Triton's promotion and rounding, bit for bit). Every other name the body
sets ends with its last iteration's value. Else the loop runs as Python's loop, as before.

Iterations that touch each other's memory are caught as programs are (``Memory.check_chunk``,
the iterations of a chunk standing for programs), and the launch falls back to Triton's loop;
the harness's checks see each chunk of iterations as a chunk of one program's accesses in the
loop's order (bounds violations name the program; the race hint sees one program). An atomic
in the body falls back too.

The loop variable (``Counter``) is a Python int in Triton's interpreter: arithmetic with Python
ints stays exact per iteration, and where it meets a tensor its value takes part as a Python
scalar does in Triton's promotion (the tensor's type where that is a signed int or a float);
anything else (a float, an unsigned tensor, a condition that differs between iterations, the
variable handed to a function) raises ``Divergence``.
"""

from __future__ import annotations

import ast
import copy
import operator
from typing import Any

import numpy as np
import triton.language as tl
from triton.runtime import interpreter as interp

from . import batched_ast as build
from . import batched_ops as ops

PREFIX = build.PREFIX
ITERATIONS = PREFIX + "iterations"
#: what a launch record's ``masked`` names (``batched.launches``)
NOTE = "a single program's loop, its iterations together"
_LEAVING = (ast.Return, ast.Break, ast.Continue, ast.Yield, ast.YieldFrom, ast.Await)
_UNSUPPORTED = (
    *_LEAVING,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Global,
    ast.Nonlocal,
    ast.Delete,
    ast.Try,
    ast.NamedExpr,
    ast.AsyncFor,
    ast.AsyncWith,
)


# --------------------------------------------------------------------------
# the AST: which loops qualify


def _is_to_tensor(node: ast.AST) -> bool:
    """Triton's rewrite of ``x = v``: ``interpreter_semantic.to_tensor(v, False)``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "to_tensor"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "interpreter_semantic"
        and len(node.args) == 2
    )


def _names(node: ast.AST, ctx: type) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _reads(node: ast.AST, definite: set[str], early: set[str]) -> None:
    early |= _names(node, ast.Load) - definite


def _walk(stmts: list[ast.stmt], definite: set[str], early: set[str]) -> None:
    """Names read before the body surely set them (``early``); ``definite`` grows with the
    names every path through ``stmts`` sets."""
    for s in stmts:
        _flow(s, definite, early)


def _flow(s: ast.stmt, definite: set[str], early: set[str]) -> None:
    if isinstance(s, ast.If):
        _reads(s.test, definite, early)
        then, other = set(definite), set(definite)
        _walk(s.body, then, early)
        _walk(s.orelse, other, early)
        definite |= then & other
    elif isinstance(s, (ast.For, ast.While)):
        head = s.iter if isinstance(s, ast.For) else s.test
        _reads(head, definite, early)
        inner = set(definite) | (_names(s.target, ast.Store) if isinstance(s, ast.For) else set())
        _walk(s.body, inner, early)  # it may run no time: sets nothing for sure
    elif isinstance(s, ast.AugAssign):
        _reads(s.value, definite, early)
        early |= _names(s.target, ast.Store) - definite  # x += e reads x
        definite |= _names(s.target, ast.Store)
    elif isinstance(s, ast.Assign):
        _reads(s.value, definite, early)
        for t in s.targets:
            _reads(t, definite, early)
            definite |= _names(t, ast.Store)
    else:
        _reads(s, definite, early)


def _update(node: ast.AST, carried: set[str]) -> tuple[str, str, ast.expr] | None:
    """(name, kind, e) where ``node`` is ``x += e`` or ``x = x + e`` for a carried ``x``."""
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
        if isinstance(node.target, ast.Name) and node.target.id in carried:
            return node.target.id, "aug", node.value
        return None
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
        return None
    target, value, kind = node.targets[0], node.value, "plain"
    if _is_to_tensor(value):
        value, kind = value.args[0], "assign"
    if not (isinstance(target, ast.Name) and target.id in carried):
        return None
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
        left = value.left
        if isinstance(left, ast.Name) and left.id == target.id:
            return target.id, kind, value.right
    return None


def _sites(body: list[ast.stmt], carried: set[str]) -> dict[int, tuple] | None:
    """Every update of a carried name: id(node) -> (name, kind, e); None where a carried
    name is used any other way (read elsewhere, set otherwise, its update reading it)."""
    sites: dict[int, tuple] = {}
    allowed = 0
    for node in (n for s in body for n in ast.walk(s)):
        found = _update(node, carried)
        if found is None:
            continue
        if found[0] in _names(found[2], ast.Load):
            return None
        sites[id(node)] = found
        allowed += 1 if found[1] == "aug" else 2
    uses = sum(1 for s in body for n in ast.walk(s) if isinstance(n, ast.Name) and n.id in carried)
    return sites if uses == allowed else None


def _counter_uses_ok(body: list[ast.stmt], var: str) -> bool:
    """The loop variable used only as an operand of arithmetic or a comparison, never set."""
    for s in body:
        for parent in ast.walk(s):
            for child in ast.iter_child_nodes(parent):
                if not (isinstance(child, ast.Name) and child.id == var):
                    continue
                if isinstance(child.ctx, ast.Store):
                    return False
                if not isinstance(parent, (ast.BinOp, ast.Compare, ast.UnaryOp)):
                    return False
    return True


def _unsupported(body: list[ast.stmt]) -> bool:
    for node in (n for s in body for n in ast.walk(s)):
        if isinstance(node, _UNSUPPORTED):
            return True
        if isinstance(node, ast.Attribute) and node.attr.startswith("atomic_"):
            return True
    return False


class Plan:
    """A qualifying loop's names: ``var``, the updates (``sites``, by node), the carried
    names, the names the body sets (``assigned``; ``unset``: not on every path), the names
    it reads."""

    def __init__(
        self,
        s: ast.For,
        sites: dict[int, tuple],
        carried: set[str],
        definite: set[str],
        stored: set[str],
    ) -> None:
        self.var: str = s.target.id
        self.sites = sites
        self.carried = tuple(sorted(carried))
        self.assigned = tuple(sorted(stored - carried - {self.var}))
        self.unset = tuple(n for n in self.assigned if n not in definite)
        reads = set().union(*(_names(b, ast.Load) for b in s.body))
        self.reads = tuple(sorted(reads | carried))


def plan(s: ast.For) -> Plan | None:
    """The loop's plan where its iterations may run together, else None."""
    if s.orelse or not isinstance(s.target, ast.Name) or not isinstance(s.iter, ast.Call):
        return None
    if _unsupported(s.body) or not _counter_uses_ok(s.body, s.target.id):
        return None
    definite, early = {s.target.id}, set()
    _walk(s.body, definite, early)
    stored = set().union(*(_names(b, ast.Store) for b in s.body))
    carried = early & stored
    sites = _sites(s.body, carried)
    return None if sites is None else Plan(s, sites, carried, definite, stored)


# --------------------------------------------------------------------------
# the rewrite


class _Body(ast.NodeTransformer):
    """A copy of the body for its iterations together: each update ``x += e`` as
    ``it.add(site, e)``, each ``x = v`` as ``x = it.assigned(v)``."""

    def __init__(self, it: str, sites: dict[int, tuple], order: list[tuple]) -> None:
        self.it, self.sites, self.order = it, sites, order

    def _site(self, node: ast.stmt) -> ast.AST:
        name, kind, e = self.sites[id(node)]
        self.order.append((name, kind))
        call = build.method(self.it, "add", ast.Constant(len(self.order) - 1), self.visit(e))
        return ast.copy_location(ast.Expr(call), node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        return self._site(node) if id(node) in self.sites else self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        return self._site(node) if id(node) in self.sites else self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        node = self.generic_visit(node)
        if _is_to_tensor(node):
            return ast.copy_location(build.method(self.it, "assigned", node.args[0]), node)
        return node


def rewrite(rw: Any, s: ast.For) -> list[ast.stmt] | None:
    """``s`` as its iterations together where it qualifies, else None: ``rw`` is the flow
    rewrite (``batched_flow.Rewrite``): its variables, and the rewrite of the body."""
    body = copy.deepcopy(s.body)
    p = plan(ast.For(target=s.target, iter=s.iter, body=body, orelse=[]))
    if p is None:
        return None
    rw.found += 1
    it, entry, merged = rw._var("iterations"), rw._var("entry"), rw._var("merged")
    order: list[tuple] = []
    transformer = _Body(it, p.sites, order)
    body = rw._inner([transformer.visit(b) for b in body])
    reads = tuple(n for n in p.reads if n in rw.locals)  # a global's name set would be local
    described = (p.var, reads, p.carried, tuple(order), p.unset, p.assigned)
    call = s.iter
    start = build.assign(
        it,
        build.call(
            build.name(ITERATIONS),
            ast.Constant(described),
            call.func,
            *call.args,
            keywords=call.keywords,
        ),
    )
    chunk = [
        build.assign(p.var, build.attr(it, "counter")),
        *(build.assign(n, build.attr(it, "unset")) for n in p.unset),
        *body,
        build.assign(merged, build.method(it, "end", build.locals_call())),
        *build.take_back(merged, (*p.assigned, *p.carried, p.var)),
    ]
    together = [
        *build.take_back(entry, reads),
        ast.While(test=build.method(it, "next"), body=chunk, orelse=[]),
    ]
    s.iter = ast.Call(
        func=build.attr(it, "fn"),
        args=[ast.Starred(value=build.attr(it, "args"), ctx=ast.Load())],
        keywords=[ast.keyword(arg=None, value=build.attr(it, "kwargs"))],
    )
    test = ast.Compare(left=build.name(entry), ops=[ast.IsNot()], comparators=[ast.Constant(None)])
    return [
        start,
        build.assign(entry, build.method(it, "start", build.locals_call())),
        ast.If(test=test, body=together, orelse=rw._for(s, plain=True)),
    ]


# --------------------------------------------------------------------------
# runtime: the loop variable


def _int_type(lo: int, hi: int) -> Any:
    """The type Triton gives a Python int of every value from ``lo`` to ``hi`` (None where
    they differ, or it is not a signed int)."""
    for dtype in (tl.int32, tl.int64):
        if dtype.get_int_min_value() <= lo and hi <= dtype.get_int_max_value():
            return dtype
    return None


_NP = {"int32": np.int32, "int64": np.int64, "fp16": np.float16, "fp32": np.float32,
       "fp64": np.float64}  # fmt: skip
_PYTHON = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
}
_COMPARE = {
    "lt": (operator.lt, "gt"),
    "gt": (operator.gt, "lt"),
    "le": (operator.le, "ge"),
    "ge": (operator.ge, "le"),
    "eq": (operator.eq, "eq"),
    "ne": (operator.ne, "ne"),
}
_DIV = ("truediv", "floordiv", "mod")


def _exact(values: list[int]) -> np.ndarray:
    if min(values) < -(2**63) or max(values) >= 2**63:
        raise ops.Divergence("the loop variable's arithmetic leaves int64")
    return np.array(values, dtype=np.int64)


class Counter(tl.core.tensor):
    """The loop variable over a chunk of iterations: one Python int an iteration."""

    def __init__(self, values: np.ndarray) -> None:
        dtype = _int_type(int(values.min()), int(values.max()))
        if dtype is None:
            raise ops.Divergence("the loop variable's values differ in type between iterations")
        data = values.astype(_NP[dtype.name]).reshape(-1, 1)
        super().__init__(ops.batched(data, dtype), dtype)
        self.values = values

    def plain(self) -> Any:
        """The variable as Triton's assignment makes it: a tensor of its type."""
        return tl.core.tensor(self.handle, self.type)

    def _as(self, dtype: Any) -> Any:
        """The values as scalars of ``dtype`` (Triton's constant of a Python int)."""
        if dtype.name not in _NP:
            raise ops.Divergence(f"the loop variable meets a {dtype} tensor")
        if dtype.is_int():
            lo, hi = int(self.values.min()), int(self.values.max())
            if lo < dtype.get_int_min_value() or hi > dtype.get_int_max_value():
                raise ops.Divergence(f"the loop variable out of range for {dtype}")
            data = self.values.astype(_NP[dtype.name])
        else:
            data = np.array(self.values.tolist(), dtype=_NP[dtype.name])
        return tl.core.tensor(ops.batched(data.reshape(-1, 1), dtype), dtype)

    def _python(self, name: str, other: Any, reflected: bool) -> Any:
        mine = self.values.tolist()
        theirs = other.values.tolist() if isinstance(other, Counter) else [int(other)] * len(mine)
        pairs = zip(theirs, mine, strict=True) if reflected else zip(mine, theirs, strict=True)
        if name in _COMPARE:
            truth = {bool(_COMPARE[name][0](a, b)) for a, b in pairs}
            if len(truth) > 1:
                raise ops.Divergence("a condition on the loop variable differs between iterations")
            return truth.pop()
        if name not in _PYTHON:
            raise ops.Divergence(f"the loop variable in Python's {name}")
        return Counter(_exact([_PYTHON[name](a, b) for a, b in pairs]))

    def _tensor(self, name: str, t: Any, reflected: bool) -> Any:
        """``int OP t`` (``t OP int`` where ``reflected``) as Triton's interpreter does it."""
        dt = t.dtype
        if dt.is_ptr() and name in ("add", "sub"):
            plain = self.plain()
        elif not dt.is_ptr() and (dt.is_int_signed() or dt.is_floating()):
            semantic = interp.interpreter_semantic
            ret = semantic.computation_type_impl(self.dtype, True, dt, False, name in _DIV)
            plain = self._as(ret)
        else:
            raise ops.Divergence(f"the loop variable in {name} with a {dt} tensor")
        if name in _COMPARE:
            return getattr(tl.core.tensor, f"__{_COMPARE[name][1]}__")(t, plain)
        return getattr(tl.core.tensor, f"__{name}__" if reflected else f"__r{name}__")(t, plain)

    def _op(self, name: str, other: Any, reflected: bool = False) -> Any:
        other = other.value if isinstance(other, tl.constexpr) else other
        if isinstance(other, (Counter, int, np.integer)):
            return self._python(name, other, reflected)
        if isinstance(other, tl.core.tensor):
            return self._tensor(name, other, reflected)
        raise ops.Divergence(f"the loop variable in {name} with {type(other).__name__}")

    def _uniform(self) -> int:
        if (self.values != self.values[0]).any():
            raise ops.Divergence("the loop variable used as one value")
        return int(self.values[0])

    def __bool__(self) -> bool:
        return bool(self._uniform())

    def __index__(self) -> int:
        return self._uniform()

    __int__ = __index__

    def __neg__(self) -> Any:
        return Counter(_exact([-v for v in self.values.tolist()]))

    def __pos__(self) -> Any:
        return self

    def __invert__(self) -> Any:
        return Counter(~self.values)

    __hash__ = object.__hash__


def _binary(name: str, reflected: bool) -> Any:
    def method(self: Counter, other: Any) -> Any:
        return self._op(name, other, reflected)

    return method


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod"):
    setattr(Counter, f"__{_name}__", _binary(_name, False))
    setattr(Counter, f"__r{_name}__", _binary(_name, True))
for _name in _COMPARE:
    setattr(Counter, f"__{_name}__", _binary(_name, False))
for _name in ("and", "or", "xor", "lshift", "rshift"):
    setattr(Counter, f"__{_name}__", _binary(_name, False))
    setattr(Counter, f"__r{_name}__", _binary(_name, True))


def _checked(original: Any) -> Any:
    def method(*args: Any, **kwargs: Any) -> Any:
        if any(type(a) is Counter for a in args):
            raise ops.Divergence("the loop variable handed to a function")
        return original(*args, **kwargs)

    return method


_GUARDED = (
    "binary_op_type_checking_impl",
    "ternary_op_type_checking_impl",
    "to_tensor",
    "make_scalar",
)


def guard() -> None:
    """Triton's semantic layer refuses a loop variable of iterations together (it would see a
    tensor where the loop hands it a Python int)."""
    semantic = interp.interpreter_semantic
    for name in _GUARDED:
        if name not in vars(semantic):
            vars(semantic)[name] = _checked(getattr(semantic, name))


def unguard() -> None:
    semantic = interp.interpreter_semantic
    for name in _GUARDED:
        vars(semantic).pop(name, None)


# --------------------------------------------------------------------------
# runtime: the loop


class _Unset:
    def __repr__(self) -> str:
        return "<not set in this iteration>"


UNSET = _Unset()


def _at(value: Any, i: int) -> Any:
    """Iteration ``i``'s value of ``value`` (a value the same in every iteration as it is)."""
    if isinstance(value, Counter):
        return int(value.values[i])
    if isinstance(value, tl.core.tensor) and ops.is_batched(value.handle):
        data = np.ascontiguousarray(value.handle.data[i])
        return tl.core.tensor(interp.TensorHandle(data, value.handle.dtype), value.type)
    if type(value) is tuple:
        return tuple(_at(v, i) for v in value)
    return value


def _holds_batched(value: Any) -> bool:
    if isinstance(value, tl.core.tensor):
        return ops.is_batched(value.handle)
    if isinstance(value, (tuple, list)):
        return any(_holds_batched(v) for v in value)
    return False


def _entry(scope: dict, names: tuple[str, ...]) -> dict[str, Any] | None:
    """The names' values as the same in every iteration (a batch of one program's values
    without its program axis); None where one cannot be."""
    out: dict[str, Any] = {}
    for n in names:
        v = scope.get(n)
        if isinstance(v, tl.core.tensor) and ops.is_batched(v.handle):
            out[n] = _at(v, 0)
        elif _holds_batched(v):
            return None
    return out


def _fold_assign(x: Any, e: Any) -> Any:
    return interp.interpreter_semantic.to_tensor(x + e, False)


_FOLD = {"aug": operator.iadd, "plain": operator.add, "assign": _fold_assign}


#: ``Memory.check_chunk``'s words for iterations that talked through memory
_TALK = {
    "reads": "an iteration of a single program's loop reads what another iteration writes",
    "stores": (
        "iterations of a single program's loop store to the same element in different operations"
    ),
}


class Iterations:
    """A qualifying loop (``plan``) at run time: ``start`` decides whether its iterations run
    together; ``next`` starts a chunk of them, ``end`` finishes it (see the module's text)."""

    def __init__(self, described: tuple, fn: Any, *args: Any, **kwargs: Any) -> None:
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.var, self.reads, self.carried, self.sites, unset, self.set_names = described
        self.unset_names = unset
        self.unset = UNSET

    def _steps(self) -> range | None:
        if not ops.STATE or not ops.is_range(self.fn):
            return None
        b = ops.current()
        if b.n != 1 or b.active is not None or b.iterations:
            return None
        try:
            steps = self.fn(*self.args, **self.kwargs)
        except Exception:  # noqa: BLE001 - Python's loop meets it again and says what it is
            return None
        if not isinstance(steps, range) or len(steps) < 2:
            return None
        lo, hi = min(steps[0], steps[-1]), max(steps[0], steps[-1])
        return steps if _int_type(lo, hi) is not None else None

    def start(self, scope: dict) -> dict[str, Any] | None:
        """The values to rebind before the iterations run together, or None: Python's loop."""
        steps = self._steps()
        if steps is None:
            return None
        entry = _entry(scope, self.reads)
        if entry is None:
            return None
        self.steps, self.done = steps, 0
        self.outer = ops.current()
        # a carried name not set yet: its update must not run (Python's loop would fail)
        self.sums = {n: entry.get(n, scope[n]) for n in self.carried if n in scope}
        self.prior = {n: entry.get(n, scope[n]) for n in self.unset_names if n in scope}
        self.size = ops.first_chunk(len(steps))
        self.outer.masked.add(NOTE)
        checks = self.outer.memory.checks
        if checks is not None:
            checks.end_chunk(self.outer)  # the program's accesses before the loop, in order
        return entry

    def next(self) -> bool:
        """Start the next chunk of iterations (False: none left)."""
        outer = self.outer
        if self.done >= len(self.steps):
            if outer.memory.checks is not None:
                outer.memory.checks.start_chunk(outer)
            return False
        k = min(self.size, len(self.steps) - self.done)
        chunk = self.steps[self.done : self.done + k]
        b = ops.Batch(np.zeros(k, dtype=np.int64), outer.grid, outer.memory)
        b.pids = tuple(np.full(k, p[0], dtype=np.int32) for p in outer.pids)
        b.iterations = True
        memory = outer.memory
        self.outside = (memory.reads, memory.writes)
        memory.reads, memory.writes = [], []
        self.batch, self.records = b, []
        self.counter = Counter(np.arange(chunk.start, chunk.stop, chunk.step, dtype=np.int64))
        self.done += k
        ops.STATE[:] = [b]
        guard()
        if memory.checks is not None:
            memory.checks.start_chunk(b)
        return True

    def add(self, site: int, e: Any) -> None:
        """An update ``x += e`` of this chunk's iterations, kept for ``end`` to fold."""
        if self.sites[site][0] not in self.sums:
            raise ops.Divergence("a loop-carried name updated before it is set")
        active = self.batch.active
        self.records.append((site, e, None if active is None else active.copy()))

    def assigned(self, value: Any) -> Any:
        """``x = value`` in the body, as Triton's rewrite makes it."""
        if isinstance(value, Counter):
            return value.plain()
        return interp.interpreter_semantic.to_tensor(value, False)

    def end(self, scope: dict) -> dict[str, Any]:
        """Finish the chunk: prove its iterations apart, hand its checks' findings on in the
        loop's order, fold the updates; the names to rebind (last iteration's values)."""
        b, outer = self.batch, self.outer
        memory = outer.memory
        unguard()
        ops.STATE[:] = [outer]
        try:
            memory.check_chunk(_TALK)
        except ops.Divergence as e:
            if e.reason in _TALK.values():
                raise
            raise ops.Divergence(f"{NOTE}: {e.reason}") from e
        memory.reads, memory.writes = self.outside
        if memory.checks is not None:
            memory.checks.end_chunk(b)
        for lines in b.prints:
            outer.prints[0].extend(lines)
        outer.masked |= b.masked
        self._fold(b.n)
        self.size = max(1, ops.chunk_elements() // max(1, b.largest))
        return self._last(scope, b.n - 1)

    def _fold(self, n: int) -> None:
        """Every update in the loop's order: iteration after iteration, each its own in the
        order they ran, by the kernel's own operator."""
        for i in range(n):
            for site, e, active in self.records:
                if active is None or active[i]:
                    name, kind = self.sites[site]
                    self.sums[name] = _FOLD[kind](self.sums[name], _at(e, i))
        self.records = []

    def _last(self, scope: dict, i: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for n in self.set_names:
            if n not in scope:
                continue
            v = scope[n]
            if v is UNSET:  # no iteration of this chunk set it
                if n in self.prior:
                    out[n] = self.prior[n]
                continue
            out[n] = _at(v, i)
            if n in self.unset_names:
                self.prior[n] = out[n]
        out.update(self.sums)
        out[self.var] = int(self.counter.values[i])
        return out
