"""Control flow that differs between the programs of a batched launch, run under masks
(see ``batched.py``).

Triton's interpreter runs a kernel's Python ``for``, ``while`` and ``if`` as Python, so a loop
bound or a branch condition that differs between programs (``for row in tl.range(pid, n,
step)``, ``if pid == 0:``, a bound loaded from memory) cannot be one Python decision for all
of them. The kernel is rewritten once (``rewrite``) so that each such statement asks this
module first:

* a top-level ``if cond: return`` stops the programs for which ``cond`` holds (``guard``);
  a top-level ``if cond: ...; return`` runs its body with only those programs, which then
  stop, every name the body sets given back to the others (``Guarded``); "top-level" takes
  in the branches of an ``if`` that leaves (a ``return`` inside it), which runs as Python:
  ``if HAS_LABEL: ... if label == ignore: ...; return`` (a condition that differs there
  falls back);
* a ``for`` over a range whose bounds differ runs as many times as the longest program's
  range, each time with only the programs still in their own range running (their loop
  variable a per-program value), and every name the body sets merged back per program,
  so a program past its range keeps the values it left the loop with (``Loop``);
* a ``while`` whose condition differs keeps running while any program's holds, the others
  masked off and their names kept alike (``While``);
* an ``if`` whose condition differs runs both branches, each with only its own programs
  running, and every name either branch sets is joined per program (``Branch``).

Where a condition or bound is the same in every running program, the statement runs as
Python as before, with no mask. A masked-off program's values in a branch it does not take are
computed but never kept, and its loads, stores, atomics and prints are masked off
(``Batch.active``), so each program's kept values come from its own operations, in its own
order. What cannot be run so (a ``return``, ``break`` or ``continue`` in a divergent loop or
branch, names that hold values of different kinds in different programs) raises
``Divergence`` and the launch runs in Triton's loop.
"""

from __future__ import annotations

import ast
import copy
from typing import Any

import numpy as np
import triton.language as tl

from . import batched_ast as build
from . import batched_iterations as iterations
from . import batched_ops as ops

PREFIX = build.PREFIX
GUARD = PREFIX + "guard"
GUARDED = PREFIX + "guarded"
PICK = PREFIX + "pick"
LOOP = PREFIX + "loop"
WHILE = PREFIX + "while"
BRANCH = PREFIX + "branch"
KEPT = PREFIX + "kept"
ALL = PREFIX + "all"
ANY = PREFIX + "any"


# --------------------------------------------------------------------------
# runtime: the statements' helpers


def _scalars(value: Any, n: int) -> np.ndarray | None:
    """One integer a program for a range bound (None: not an integer scalar)."""
    if isinstance(value, tl.constexpr):
        value = value.value
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return np.full(n, int(value), dtype=np.int64)
    if isinstance(value, tl.core.tensor) and value.dtype.is_int():
        per = ops.lift(value.handle, n).reshape(n, -1)
        if per.shape[1] == 1:
            return per[:, 0].astype(np.int64)
    return None


def _truth(cond: Any) -> np.ndarray | None:
    """One bool a program for a condition that differs between programs (None: alike in every
    running program, or not a per-program scalar)."""
    if not ops.STATE or not isinstance(cond, tl.core.tensor) or not ops.is_batched(cond.handle):
        return None
    b = ops.current()
    per = cond.handle.data.reshape(b.n, -1)
    if per.shape[1] != 1:
        return None
    truth = per[:, 0].astype(bool)
    running = b.running()
    if (truth[running] == truth[running][0]).all() if running.any() else True:
        return None
    return truth


def _merge(keep: np.ndarray, new: Any, old: Any) -> Any:
    """Per program: ``new`` where ``keep``, else ``old``."""
    if new is old:
        return new
    if isinstance(new, tl.core.tensor) and isinstance(old, tl.core.tensor):
        if new.type != old.type:
            raise ops.Divergence("a name holds values of different types in different programs")
        b = ops.current()
        a, o = ops.lift(new.handle, b.n), ops.lift(old.handle, b.n)
        data = np.where(keep.reshape((b.n,) + (1,) * (a.ndim - 1)), a, o)
        return tl.core.tensor(ops.batched(data, new.handle.dtype), new.type)
    if isinstance(new, tl.core.tensor) or isinstance(old, tl.core.tensor):
        raise ops.Divergence("a name holds values of different kinds in different programs")
    try:
        same = bool(new == old)
    except Exception:  # noqa: BLE001 - values Python cannot compare cannot be joined
        same = False
    if not same:
        raise ops.Divergence("a name holds different Python values in different programs")
    return new


def _kept(scope: dict, names: tuple[str, ...]) -> dict[str, Any]:
    return {k: scope[k] for k in names if k in scope}


#: what a launch record's ``masked`` names (``batched.launches``)
LOOP_BOUNDS = "a loop whose bounds differ between programs"
WHILE_CONDITION = "a while loop whose condition differs between programs"
BRANCH_CONDITION = "a branch whose condition differs between programs"


class _Region:
    """A stretch of a kernel run with some programs masked off: ``narrow`` narrows the running
    programs, ``leave`` gives back the ones the region started with (less those that stopped
    for good inside it: a bounds violation)."""

    def __init__(self, kind: str) -> None:
        self.batch = ops.current()
        self.batch.masked.add(kind)
        self.outer = self.batch.running().copy()
        # a masked-off program computes on values it will not keep (a row of -inf's max
        # taken from -inf): numpy's warnings about them are not the program's
        self.errors = np.seterr(all="ignore")

    def narrow(self, mask: np.ndarray) -> np.ndarray:
        b = self.batch
        active = self.outer & mask & ~b.stopped
        b.active = active
        return active

    def leave(self) -> None:
        b = self.batch
        active = self.outer & ~b.stopped
        b.active = None if active.all() else active
        np.seterr(**self.errors)

    def merged(self, keep: np.ndarray, saved: dict[str, Any], scope: dict) -> dict[str, Any]:
        return {k: _merge(keep, scope[k], v) for k, v in saved.items() if k in scope}


class Loop:
    """``for x in tl.range(a, b, c)`` (or ``range``, ``tl.static_range``): Python's loop
    where the range is the same in every running program, else one pass a step of the
    longest program's range, the others masked off."""

    def __init__(self, fn: Any, *args: Any, **kwargs: Any) -> None:
        self.region: _Region | None = None
        try:
            self.values: Any = fn(*args, **kwargs)
            return
        except ops.Divergence as e:
            if not ops.STATE or not ops.is_range(fn):
                raise
            why = e
        b = ops.current()
        if len(args) == 1:
            bounds = [0, args[0], kwargs.get("step", 1)]
        else:
            bounds = [args[0], args[1], args[2] if len(args) > 2 else kwargs.get("step", 1)]
        start, stop, step = (_scalars(v, b.n) for v in bounds)
        if start is None or stop is None or step is None:
            raise why
        if (step[b.running()] == 0).any():
            raise ValueError("range() arg 3 must not be zero")
        step = np.where(step == 0, 1, step)
        up = np.maximum(0, (stop - start + step - 1) // np.where(step > 0, step, 1))
        down = np.maximum(0, (start - stop - step - 1) // np.where(step < 0, -step, 1))
        self.count = np.where(step > 0, up, down)
        self.start, self.step = start, step
        self.region = _Region(LOOP_BOUNDS)
        wide = np.concatenate([start, start + step * np.maximum(self.count - 1, 0)])
        small = np.iinfo(np.int32)
        self.dtype = (
            tl.int32 if (wide >= small.min).all() and (wide <= small.max).all() else tl.int64
        )

    def __iter__(self) -> Any:
        if self.region is None:
            yield from self.values
            return
        region = self.region
        longest = int(self.count[region.outer].max()) if region.outer.any() else 0
        try:
            for k in range(longest):
                if not region.narrow(self.count > k).any():
                    break
                values = (self.start + self.step * k).astype(np.int64)
                np_dtype = np.int32 if self.dtype == tl.int32 else np.int64
                yield tl.core.tensor(
                    ops.batched(values.astype(np_dtype).reshape(-1, 1), self.dtype), self.dtype
                )
        finally:
            region.leave()

    def save(self, scope: dict, names: tuple[str, ...]) -> dict[str, Any] | None:
        return None if self.region is None else _kept(scope, names)

    def merge(self, saved: dict[str, Any], scope: dict) -> dict[str, Any]:
        region = self.region
        assert region is not None
        return region.merged(region.batch.running(), saved, scope)


class While:
    """``while cond:``: Python's loop while ``cond`` is alike in every running program;
    once it differs, the programs whose condition failed are masked off, and the loop goes
    on while any program's holds."""

    def __init__(self) -> None:
        self.region: _Region | None = None

    def test(self, cond: Any) -> bool:
        truth = _truth(cond)
        if truth is None:  # alike in every running program
            holds = bool(cond)
            if not holds and self.region is not None:
                self.region.leave()
                self.region = None
            return holds
        if self.region is None:
            self.region = _Region(WHILE_CONDITION)
        return self._still(truth)

    def _still(self, truth: np.ndarray) -> bool:
        region = self.region
        assert region is not None
        if region.narrow(region.batch.running() & truth).any():
            return True
        region.leave()
        self.region = None
        return False

    def save(self, scope: dict, names: tuple[str, ...]) -> dict[str, Any] | None:
        return None if self.region is None else _kept(scope, names)

    def merge(self, saved: dict[str, Any], scope: dict) -> dict[str, Any]:
        region = self.region
        if region is None:
            return {}
        return region.merged(region.batch.running(), saved, scope)


class Branch:
    """``if cond: ... else: ...``: Python's ``if`` where ``cond`` is alike in every running
    program (``uniform``, ``value``); else both branches run, each with its own programs."""

    def __init__(self, cond: Any) -> None:
        self.truth = _truth(cond)
        self.uniform = self.truth is None
        self.value = bool(cond) if self.uniform else True
        self.region: _Region | None = None

    def then(self) -> None:
        self.region = _Region(BRANCH_CONDITION)
        self.taken = self.region.narrow(self.truth)

    def otherwise(self) -> None:
        region = self.region
        assert region is not None and self.truth is not None
        region.narrow(~self.truth)

    def join(self, after_then: dict[str, Any], scope: dict) -> dict[str, Any]:
        region = self.region
        assert region is not None
        region.leave()
        return region.merged(~self.taken, after_then, scope)  # the else branch's own, else then's


class Guarded:
    """``if cond: ...; return`` at a kernel's top level: Python's ``if`` where ``cond`` is
    alike in every running program (``uniform``, ``value``); else the body runs with only the
    programs whose ``cond`` holds (``enter``), and they stop at its end (``leave``)."""

    def __init__(self, cond: Any) -> None:
        self.truth = _truth(cond)
        self.uniform = self.truth is None
        self.value = bool(cond) if self.uniform else True
        self.region: _Region | None = None

    def enter(self) -> None:
        self.region = _Region(ops.EARLY_RETURN)
        self.taken = self.region.narrow(self.truth)

    def leave(self) -> None:
        region = self.region
        assert region is not None
        region.batch.stop(self.taken)
        region.leave()


def _bools(*operands: Any, every: bool) -> Any:
    """``a and b`` (``every``) or ``a or b`` in a branch or loop condition, its operands as
    thunks: Python's short circuit while they are alike in every running program; where one
    differs, the rest are taken for every program and the truth is joined per program."""
    joined: np.ndarray | None = None
    for thunk in operands:
        value = thunk()
        truth = _truth(value)
        if truth is None:
            if bool(value) != every:  # decides it for every running program
                return value
            continue
        joined = truth if joined is None else (joined & truth if every else joined | truth)
    return every if joined is None else _as_tensor(joined)


def _as_tensor(truth: np.ndarray) -> Any:
    data = truth.astype(bool).reshape(-1, 1)
    return tl.core.tensor(ops.batched(data, tl.int1), tl.int1)


def install(globals_: dict) -> None:
    """Put the statements' helpers in a rewritten kernel's globals."""
    globals_[GUARD] = ops.guard
    globals_[GUARDED] = Guarded
    globals_[PICK] = ops.pick
    globals_[LOOP] = Loop
    globals_[WHILE] = While
    globals_[BRANCH] = Branch
    globals_[iterations.ITERATIONS] = iterations.Iterations
    globals_[KEPT] = _kept
    globals_[ALL] = lambda *thunks: _bools(*thunks, every=True)
    globals_[ANY] = lambda *thunks: _bools(*thunks, every=False)


# --------------------------------------------------------------------------
# the rewrite of a kernel's statements


def _assigned(stmts: list[ast.stmt]) -> tuple[str, ...]:
    """The names the statements set (not inside nested functions), in order of first set."""
    seen: dict[str, None] = {}
    todo: list[ast.AST] = list(stmts)
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            if not node.id.startswith(PREFIX):
                seen.setdefault(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return tuple(seen)


def _leaves(stmts: list[ast.stmt]) -> bool:
    """Whether the statements leave their block early (return, break, continue, yield)."""
    for node in (n for s in stmts for n in ast.walk(s)):
        if isinstance(node, (ast.Return, ast.Break, ast.Continue, ast.Yield, ast.YieldFrom)):
            return True
    return False


class Rewrite:
    """A kernel's statements with divergent control flow as masks (see the module's text)."""

    def __init__(self, guards: bool = True) -> None:
        self.found = 0
        self.serial = 0
        self.guards = guards  # a kernel's top-level bare returns as guards (not a helper's)
        self.loops = 0  # loops around the statement being rewritten
        self.locals: set[str] = set()  # the function's local names

    def kernel(self, tree: ast.Module) -> ast.Module:
        fn = tree.body[0]
        if isinstance(fn, ast.FunctionDef):
            self.locals = _local_names(fn)
            fn.body = self._block(fn.body, top=self.guards)
            _Picks(self).visit(fn)
        return tree

    def _var(self, kind: str) -> str:
        self.serial += 1
        return f"{PREFIX}{kind}_{self.serial}"

    def _block(self, stmts: list[ast.stmt], top: bool = False) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in stmts:
            out.extend(self._stmt(s, top))
        return out

    def _stmt(self, s: ast.stmt, top: bool) -> list[ast.stmt]:
        if isinstance(s, ast.If) and top and _bare_return(s):
            self.found += 1
            s.test = ast.copy_location(build.call(build.name(GUARD), _joined_test(s.test)), s.test)
            return [s]
        if isinstance(s, ast.If) and top and _returns_after(s):
            return self._guarded(s)
        if isinstance(s, ast.For) and not s.orelse:
            return self._for(s)
        if isinstance(s, ast.While) and not s.orelse:
            return self._while(s)
        if isinstance(s, ast.If):
            return self._if(s, top)
        for field in ("body", "orelse", "finalbody"):
            if isinstance(getattr(s, field, None), list):
                setattr(s, field, self._block(getattr(s, field)))
        return [s]

    def _for(self, s: ast.For, plain: bool = False) -> list[ast.stmt]:
        """A loop (where ``plain`` is False and no loop is around it, its iterations together
        where it qualifies: ``batched_iterations``) whose bounds may differ between programs."""
        if not plain and not self.loops:
            together = iterations.rewrite(self, s)
            if together is not None:
                return together
        s.body = self._inner(s.body)
        if not isinstance(s.iter, ast.Call) or _leaves(s.body):
            return [s]
        self.found += 1
        loop = self._var("loop")
        call = s.iter
        start = build.assign(
            loop, build.call(build.name(LOOP), call.func, *call.args, keywords=call.keywords)
        )
        s.iter = build.name(loop)
        s.body = self._merging(loop, s.body)
        return [start, s]

    def _inner(self, body: list[ast.stmt]) -> list[ast.stmt]:
        """A loop's body, its own loops inside one."""
        self.loops += 1
        try:
            return self._block(body)
        finally:
            self.loops -= 1

    def _while(self, s: ast.While) -> list[ast.stmt]:
        s.body = self._inner(s.body)
        if _leaves(s.body):
            return [s]
        self.found += 1
        loop = self._var("while")
        s.test = _joined_test(s.test)
        start = build.assign(loop, build.call(build.name(WHILE)))
        s.test = build.method(loop, "test", s.test)
        s.body = self._merging(loop, s.body)
        return [start, s]

    def _merging(self, loop: str, body: list[ast.stmt]) -> list[ast.stmt]:
        """A loop's body between ``saved = loop.save(...)`` and, where the loop runs masked,
        every name it sets merged back per program."""
        saved, merged = self._var("saved"), self._var("merged")
        names = _assigned(body)
        if not names:
            return body
        ran = ast.Compare(
            left=build.name(saved), ops=[ast.IsNot()], comparators=[ast.Constant(None)]
        )
        back = [
            build.assign(
                merged, build.method(loop, "merge", build.name(saved), build.locals_call())
            )
        ]
        return [
            build.assign(
                saved, build.method(loop, "save", build.locals_call(), ast.Constant(names))
            ),
            *body,
            ast.If(test=ran, body=back + build.take_back(merged, names), orelse=[]),
        ]

    def _guarded(self, s: ast.If) -> list[ast.stmt]:
        """``if cond: ...; return`` at the top level (``Guarded``)."""
        self.found += 1
        body = self._block(s.body[:-1])
        guarded, before = self._var("guarded"), self._var("before")
        names = _assigned(body)
        uniform = ast.If(test=build.attr(guarded, "value"), body=[*body, s.body[-1]], orelse=[])
        divergent = [
            build.assign(
                before, build.call(build.name(KEPT), build.locals_call(), ast.Constant(names))
            ),
            ast.Expr(build.method(guarded, "enter")),
            *copy.deepcopy(body),
            ast.Expr(build.method(guarded, "leave")),
            *build.take_back(before, names),
        ]
        return [
            build.assign(guarded, build.call(build.name(GUARDED), _joined_test(s.test))),
            ast.If(test=build.attr(guarded, "uniform"), body=[uniform], orelse=divergent),
        ]

    def _if(self, s: ast.If, top: bool = False) -> list[ast.stmt]:
        """An ``if`` whose condition may differ between programs (``Branch``); one whose
        branches leave runs as Python, its branches at the top level where it is."""
        s.test = _joined_test(s.test)
        top = top and (_leaves(s.body) or _leaves(s.orelse))
        then, other = self._block(s.body, top), self._block(s.orelse, top)
        if _leaves(then) or _leaves(other):
            s.body, s.orelse = then, other or s.orelse
            return [s]
        self.found += 1
        br, before, after, joined = (self._var(k) for k in ("branch", "before", "then", "joined"))
        names = _assigned(then + other)
        uniform = ast.If(
            test=ast.Attribute(value=build.name(br), attr="value", ctx=ast.Load()),
            body=then or [ast.Pass()],
            orelse=other,
        )
        divergent = [
            build.assign(
                before, build.call(build.name(KEPT), build.locals_call(), ast.Constant(names))
            ),
            ast.Expr(build.method(br, "then")),
            *copy.deepcopy(then),
            build.assign(
                after, build.call(build.name(KEPT), build.locals_call(), ast.Constant(names))
            ),
            ast.Expr(build.method(br, "otherwise")),
            *build.take_back(before, names),
            *copy.deepcopy(other),
            build.assign(joined, build.method(br, "join", build.name(after), build.locals_call())),
            *build.take_back(joined, names),
        ]
        return [
            build.assign(br, build.call(build.name(BRANCH), s.test)),
            ast.If(
                test=ast.Attribute(value=build.name(br), attr="uniform", ctx=ast.Load()),
                body=[uniform],
                orelse=divergent,
            ),
        ]


def _local_names(fn: ast.FunctionDef) -> set[str]:
    """A function's parameters and every name it sets (not inside nested functions)."""
    args = fn.args
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {a.arg for a in params if a is not None} | set(_assigned(fn.body))


def _joined_test(test: ast.expr) -> ast.expr:
    """``a and b`` / ``a or b`` in a condition -> ``ALL(lambda: a, lambda: b)`` (``ANY``)."""
    if not isinstance(test, ast.BoolOp):
        return test
    fn = ALL if isinstance(test.op, ast.And) else ANY
    none = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
    thunks = [ast.Lambda(args=none, body=_joined_test(v)) for v in test.values]
    return ast.copy_location(build.call(build.name(fn), *thunks), test)


def _returns_after(s: ast.If) -> bool:
    """``if cond: ...; return``: statements that do not leave, then a bare return."""
    body = s.body
    last = body[-1]
    bare = isinstance(last, ast.Return) and last.value is None
    return not s.orelse and len(body) > 1 and bare and not _leaves(body[:-1])


def _bare_return(s: ast.If) -> bool:
    return (
        not s.orelse
        and len(s.body) == 1
        and isinstance(s.body[0], ast.Return)
        and s.body[0].value is None
    )


class _Picks(ast.NodeTransformer):
    """``min(a, b)`` and ``max(a, b)`` anywhere in the kernel -> ``ops.pick`` (a select where
    programs differ)."""

    def __init__(self, rewrite: Rewrite) -> None:
        self.rewrite = rewrite

    def visit_Call(self, node: ast.Call) -> ast.AST:
        node = self.generic_visit(node)
        two = len(node.args) == 2 and not node.keywords
        if two and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
            self.rewrite.found += 1
            args = [*node.args, ast.Constant(value=node.func.id)]
            return ast.copy_location(build.call(build.name(PICK), *args), node)
        return node
