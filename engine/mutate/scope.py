"""What an operator may ask about the jit function around a node: its parent,
what a name is assigned, and a static guess of an expression's element kind
(integer or float) and rank.

Most operators rewrite one node and need none of this. A few would plant code
Triton rejects without it: ``pid * BLOCK`` -> ``pid / BLOCK`` is a float offset
no pointer accepts (so ``mul-div`` writes ``pid // BLOCK`` there), ``tl.sum(x,
axis=1)`` of a 1-D block names an axis that does not exist (so ``sum-axis``
leaves 1-D reductions alone), an fp16 accumulator updated by fp32 values in a
loop changes a loop-carried type (so ``accumulator-fp16`` casts the updates).

The guesses are syntactic and answer None when unsure; an operator decides what
an unsure answer means for it. Nothing here runs or imports the kernel. A Scope
is built lazily, once per jit function, and only when an operator asks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from .syntax import int_value, tl_attr, tl_call

INT, FLOAT = "int", "float"

_INT_DTYPES = frozenset(f"{sign}int{bits}" for sign in ("", "u") for bits in (1, 8, 16, 32, 64)) - {
    "uint1"
}
_FLOAT_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64", "float8e4nv", "float8e5"})
_INT_CALLS = frozenset({"program_id", "num_programs", "arange", "cdiv"})
_FLOAT_CALLS = frozenset(
    {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "sigmoid", "softmax",
     "erf", "fdiv", "div_rn", "sqrt_rn", "dot"}
)  # fmt: skip
_SAME_KIND_CALLS = frozenset({"sum", "max", "min", "maximum", "minimum", "abs", "cumsum", "trans"})
_RANGES = frozenset({"range", "static_range"})
_REDUCTIONS = frozenset({"sum", "max", "min", "argmax", "argmin", "reduce", "xor_sum"})
_ELEMENTWISE_FIRST = _FLOAT_CALLS - {"dot", "softmax"} | {"abs", "where", "trans", "cumsum"}
#: calls whose rank is that of their widest positional argument
_ELEMENTWISE = _ELEMENTWISE_FIRST | {"maximum", "minimum", "cast", "clamp"}
#: calls whose rank does not depend on their arguments
_FIXED_RANK = {"program_id": 0, "num_programs": 0, "cdiv": 0, "arange": 1}
#: calls whose element kind does not depend on their arguments
_FIXED_KIND = dict.fromkeys(_FLOAT_CALLS, FLOAT) | dict.fromkeys(_INT_CALLS, INT)
#: literals' element kinds
_LITERAL_KINDS = {cst.Integer: INT, cst.Float: FLOAT}
_ARITH = (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo)
_ARITH = (*_ARITH, cst.BitAnd, cst.BitOr, cst.BitXor, cst.LeftShift, cst.RightShift)
#: where a call takes its ``dtype`` when passed positionally (9: never)
_DTYPE_POSITION = {"cast": 1, "zeros": 1, "full": 2, "zeros_like": 9, "full_like": 9}
#: where a call takes its ``shape`` when passed positionally
_SHAPE_POSITION = dict.fromkeys(("zeros", "full", "ones", "empty"), 0) | dict.fromkeys(
    ("reshape", "view", "broadcast_to"), 1
)


#: What a name's own value contributes while it is being worked out (``x = x - m``):
#: nothing either way.
_CYCLE = "cycle"


def _join(kinds: list) -> str | None:
    """float wins (Triton promotes), all int stays int, anything unknown is unknown."""
    kinds = [k for k in kinds if k != _CYCLE]
    if FLOAT in kinds:
        return FLOAT
    if kinds and all(k == INT for k in kinds):
        return INT
    return None


def dtype_kind(node: cst.CSTNode) -> str | None:
    """``tl.int64`` -> int, ``tl.float32`` -> float, else None."""
    name = tl_attr(node)
    if name in _INT_DTYPES:
        return INT
    if name in _FLOAT_DTYPES:
        return FLOAT
    return None


def _positional(call: cst.Call) -> list[cst.BaseExpression]:
    """The values of a call's plain positional arguments (no keyword, no star)."""
    return [a.value for a in call.args if a.keyword is None and not a.star]


def _arg(call: cst.Call, keyword: str, position: int) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = _positional(call)
    return positional[position] if position < len(positional) else None


def _dtype_arg_kind(call: cst.Call, position: int) -> str | None:
    """The kind of the ``dtype`` a call is given (by keyword or at ``position``)."""
    dtype = _arg(call, "dtype", position)
    return dtype_kind(dtype) if dtype is not None else None


def _is_to_method(call: cst.Call) -> bool:
    """``x.to(...)``: a cast by method, not a ``tl.to`` call."""
    func = call.func
    return type(func) is cst.Attribute and func.attr.value == "to" and tl_attr(func) is None


def _is_triton_cdiv(func: cst.CSTNode) -> bool:
    """``triton.cdiv``."""
    return (
        type(func) is cst.Attribute
        and type(func.value) is cst.Name
        and func.value.value == "triton"
        and func.attr.value == "cdiv"
    )


def _is_builtin_min_max(call: cst.Call) -> bool:
    """Python's own ``min(...)`` / ``max(...)``."""
    return type(call.func) is cst.Name and call.func.value in ("min", "max")


def _callee(node: cst.CSTNode) -> str | None:
    """The X of ``tl.X(...)`` or of a plain ``X(...)`` call, else None."""
    name = tl_call(node)
    if name:
        return name
    if type(node) is cst.Call and type(node.func) is cst.Name:
        return node.func.value
    return None


class Scope:
    """Questions about one jit function, answered from its syntax."""

    def __init__(self, function: cst.FunctionDef) -> None:
        self.function = function
        self._parents: dict[int, cst.CSTNode] | None = None
        self._assigned: dict[str, list[tuple[str, cst.CSTNode]]] | None = None
        self._params: dict[str, cst.Param] = {
            p.name.value: p for p in (*function.params.params, *function.params.kwonly_params)
        }
        self._kinds: dict[str, str | None] = {}  # per name, worked out from its bindings
        self._ranks: dict[str, int | None] = {}
        self._busy: set[str] = set()

    # -- structure -------------------------------------------------------------

    def _index(self) -> None:
        parents: dict[int, cst.CSTNode] = {}
        assigned: dict[str, list[tuple[str, cst.CSTNode]]] = {}
        stack: list[cst.CSTNode] = [self.function.body]
        while stack:
            node = stack.pop()
            for child in node.children:
                parents[id(child)] = node
                stack.append(child)
            for name, binding in _bindings(node):
                assigned.setdefault(name, []).append(binding)
        self._parents, self._assigned = parents, assigned

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        if self._parents is None:
            self._index()
        return self._parents.get(id(node))

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        parent = self.parent(node)
        while parent is not None:
            yield parent
            parent = self.parent(parent)

    def assignments(self, name: str) -> list[tuple[str, cst.CSTNode]]:
        """How ``name`` is bound in the function body: ("=", value), ("+=", the
        AugAssign), ("for", the loop) or ("?", an unpacked value)."""
        if self._assigned is None:
            self._index()
        return self._assigned.get(name, [])

    def is_param(self, name: str) -> bool:
        return name in self._params and not self.assignments(name)

    def in_loop(self, node: cst.CSTNode) -> bool:
        return any(type(a) in (cst.For, cst.While) for a in self.ancestors(node))

    # -- element kind ----------------------------------------------------------

    def kind(self, node: cst.CSTNode) -> str | None:
        """ "int", "float" or None (unknown) for the elements of an expression.

        Integer sources: integer literals, program ids, ``tl.arange``, ``tl.cdiv``,
        casts to an integer dtype, ``range`` loop variables and ``tl.constexpr``
        parameters; other scalar parameters combine with an integer as integers
        (strides, sizes). A loaded value is unknown unless cast."""
        found = self._kind(node)
        return None if found == _CYCLE else found

    def _kind(self, node: cst.CSTNode) -> str | None:
        kind = type(node)
        if kind in _LITERAL_KINDS:
            return _LITERAL_KINDS[kind]
        if kind is cst.Name:
            return self._name_kind(node.value)
        if kind is cst.UnaryOperation:
            return self._kind(node.expression)
        if kind is cst.Subscript:
            return self._kind(node.value)
        if kind is cst.IfExp:
            return _join([self._kind(node.body), self._kind(node.orelse)])
        if kind is cst.BinaryOperation:
            return self._binary_kind(node)
        if kind is cst.Call:
            return self._call_kind(node)
        return None

    def _binary_kind(self, node: cst.BinaryOperation) -> str | None:
        """``/`` gives a float; other arithmetic combines its operands' kinds."""
        if type(node.operator) is cst.Divide:
            return FLOAT
        if not isinstance(node.operator, _ARITH):
            return None
        return self._combine(node.left, node.right)

    def _combine(self, left: cst.CSTNode, right: cst.CSTNode) -> str | None:
        """An integer with an integer, or with a plain scalar parameter, is an integer."""
        kinds = [self._kind(left), self._kind(right)]
        if FLOAT in kinds:
            return FLOAT
        if _CYCLE in kinds:
            return _join(kinds)
        if INT not in kinds:
            return None
        other = right if kinds[0] == INT else left
        if kinds == [INT, INT] or (type(other) is cst.Name and self.is_param(other.value)):
            return INT
        return None

    def _name_kind(self, name: str) -> str | None:
        if name in self._params and not self.assignments(name):
            return self._param_kind(name)
        return self._worked_out(name, self._kinds, self._bound_kind)

    def _param_kind(self, name: str) -> str | None:
        """A ``tl.constexpr`` parameter is an integer; any other parameter is unknown."""
        annotation = self._params[name].annotation
        is_constexpr = annotation is not None and tl_attr(annotation.annotation) == "constexpr"
        return INT if is_constexpr else None

    def _worked_out(self, name: str, cache: dict, work: Callable[[str, list], object]) -> object:
        """``work(name, bindings)`` for a name bound in the body, guarded against
        cycles (a name being worked out is ``_CYCLE``) and kept in ``cache`` when
        worked out from the top."""
        if name in self._busy:
            return _CYCLE
        if name in cache:
            return cache[name]
        bindings = self.assignments(name)
        if not bindings:
            return None
        top = not self._busy
        self._busy.add(name)
        try:
            found = work(name, bindings)
            if top:  # worked out without a cycle cut short: worth keeping
                cache[name] = found
            return found
        finally:
            self._busy.discard(name)

    def _bound_kind(self, name: str, bindings: list[tuple[str, cst.CSTNode]]) -> str | None:
        """The kind a local name's bindings give it together (float wins)."""
        kinds = [self._binding_kind(how, value) for how, value in bindings]
        if name in self._params:
            return None  # a parameter rebound (``X += row * stride``): a pointer, maybe
        return _join(kinds) if any(k != _CYCLE for k in kinds) else None

    def _binding_kind(self, how: str, value: cst.CSTNode) -> str | None:
        """The kind one binding gives its name (see :meth:`assignments`)."""
        if how == "=":
            return self._kind(value)
        if how == "+=":
            if type(value.operator) is cst.DivideAssign:
                return FLOAT
            return self._kind(value.value)
        if how == "for":
            return INT if _callee(value.iter) in _RANGES else None
        return None

    def _call_kind(self, call: cst.Call) -> str | None:
        if _is_to_method(call):
            return _dtype_arg_kind(call, 0)
        name = tl_call(call)
        if name is None:
            return self._plain_call_kind(call)
        return self._tl_call_kind(call, name)

    def _tl_call_kind(self, call: cst.Call, name: str) -> str | None:
        """The kind of a ``tl.<name>(...)`` call's elements."""
        if name in _FIXED_KIND:
            return _FIXED_KIND[name]
        if name in _DTYPE_POSITION:
            return _dtype_arg_kind(call, _DTYPE_POSITION[name])
        if name in _SAME_KIND_CALLS and call.args:
            return _join([self._kind(a.value) for a in call.args if a.keyword is None])
        if name == "where" and len(call.args) >= 3:
            return _join([self._kind(call.args[1].value), self._kind(call.args[2].value)])
        return None

    # -- rank ------------------------------------------------------------------

    def rank(self, node: cst.CSTNode) -> int | None:
        """The number of dimensions of an expression's block (0 for a scalar),
        or None when it cannot be told from the syntax."""
        found = self._rank(node)
        return None if found == _CYCLE else found

    def _rank(self, node: cst.CSTNode) -> int | None:
        kind = type(node)
        if kind in _LITERAL_KINDS:
            return 0
        if kind is cst.Name:
            return self._name_rank(node.value)
        if kind is cst.UnaryOperation:
            return self._rank(node.expression)
        if kind is cst.Subscript:
            return self._subscript_rank(node)
        if kind is cst.BinaryOperation:
            return _max_rank([self._rank(node.left), self._rank(node.right)])
        if kind is cst.Comparison:
            return self._widest([node.left, *(c.comparator for c in node.comparisons)])
        if kind is cst.Call:
            return self._call_rank(node)
        return None

    def _subscript_rank(self, node: cst.Subscript) -> int | None:
        """The base's rank, plus one per ``None`` index, less one per integer index."""
        base = self._rank(node.value)
        if base is None or base == _CYCLE:
            return base
        added = sum(1 for e in node.slice if _is_none(e))
        dropped = sum(1 for e in node.slice if int_value(_index_of(e)) is not None)
        return base + added - dropped

    def _name_rank(self, name: str) -> int | None:
        if name in self._params and not self.assignments(name):
            return 0
        return self._worked_out(name, self._ranks, self._bound_rank)

    def _bound_rank(self, name: str, bindings: list[tuple[str, cst.CSTNode]]) -> int | None:
        """The rank a local name's bindings give it together (the widest)."""
        ranks = [self._binding_rank(how, value) for how, value in bindings]
        if name in self._params:
            ranks.append(0)
        found = _max_rank(ranks)
        return None if found == _CYCLE else found

    def _binding_rank(self, how: str, value: cst.CSTNode) -> int | None:
        """The rank one binding gives its name (see :meth:`assignments`)."""
        if how == "=":
            return self._rank(value)
        if how == "+=":
            return self._rank(value.value)
        return 0 if how == "for" else None

    def _plain_call_kind(self, call: cst.Call) -> str | None:
        """A call not into ``tl``: ``triton.cdiv`` is an integer, Python's
        ``min``/``max`` take their arguments' kind, anything else is unknown."""
        if _is_triton_cdiv(call.func):
            return INT
        if _is_builtin_min_max(call):
            return _join([self._kind(a.value) for a in call.args])
        return None

    def _call_rank(self, call: cst.Call) -> int | None:
        if _is_to_method(call):
            return self._rank(call.func.value)
        name = tl_call(call)
        if name is None:  # Python's min/max take their arguments' rank
            return self._widest(_positional(call)) if _is_builtin_min_max(call) else None
        return self._tl_call_rank(call, name)

    def _tl_call_rank(self, call: cst.Call, name: str) -> int | None:
        """The rank of a ``tl.<name>(...)`` call's block."""
        if name in _FIXED_RANK:
            return _FIXED_RANK[name]
        if name in _SHAPE_POSITION:
            return _shape_rank(call, _SHAPE_POSITION[name])
        if name == "load":
            pointer = _arg(call, "pointer", 0)
            return self._rank(pointer) if pointer is not None else None
        positional = _positional(call)
        if name == "dot":
            return self._widest(positional[:2])
        if name in _REDUCTIONS and positional:
            return self._reduction_rank(call, positional[0])
        if name in _ELEMENTWISE:
            return self._widest(positional)
        return None

    def _widest(self, nodes: list[cst.CSTNode]) -> int | None:
        """The highest rank among expressions (see :func:`_max_rank`)."""
        return _max_rank([self._rank(v) for v in nodes])

    def _reduction_rank(self, call: cst.Call, source_node: cst.CSTNode) -> int | None:
        """A reduction over all axes is a scalar; over one axis it drops a
        dimension unless ``keep_dims=True``."""
        axis = _arg(call, "axis", 1)
        keep = _arg(call, "keep_dims", 9)
        source = self._rank(source_node)
        if axis is None or type(axis) is cst.Name and axis.value == "None":
            return 0
        if source is None or source == _CYCLE:
            return source
        kept = type(keep) is cst.Name and keep.value == "True"
        return source if kept else source - 1


def _shape_rank(call: cst.Call, position: int) -> int | None:
    """The length of the literal ``shape`` a call is given, else None."""
    shape = _arg(call, "shape", position)
    return len(shape.elements) if type(shape) in (cst.Tuple, cst.List) else None


def _max_rank(ranks: list) -> int | None:
    known = [r for r in ranks if r != _CYCLE]
    if not known:
        return _CYCLE if ranks else None
    return None if None in known else max(known)


def _index_of(element: cst.SubscriptElement) -> cst.CSTNode:
    return element.slice.value if type(element.slice) is cst.Index else element.slice


def _is_none(element: cst.SubscriptElement) -> bool:
    value = _index_of(element)
    return type(value) is cst.Name and value.value == "None"


def _bindings(node: cst.CSTNode) -> Iterator[tuple[str, tuple[str, cst.CSTNode]]]:
    """The names one node binds, each with how (see :meth:`Scope.assignments`)."""
    kind = type(node)
    if kind is cst.Assign:
        yield from _assign_bindings(node)
    elif kind is cst.AnnAssign and type(node.target) is cst.Name and node.value:
        yield node.target.value, ("=", node.value)
    elif kind is cst.AugAssign and type(node.target) is cst.Name:
        yield node.target.value, ("+=", node)
    elif kind is cst.For:
        for name in _names(node.target):
            yield name, ("for", node)


def _assign_bindings(node: cst.Assign) -> Iterator[tuple[str, tuple[str, cst.CSTNode]]]:
    """``x = ...`` binds ``x`` to the value; an unpacked name's value is unknown."""
    for target in node.targets:
        if type(target.target) is cst.Name:
            yield target.target.value, ("=", node.value)
        else:  # tuple unpacking: unknown
            for name in _names(target.target):
                yield name, ("?", node.value)


def _names(target: cst.CSTNode) -> list[str]:
    if type(target) is cst.Name:
        return [target.value]
    if type(target) in (cst.Tuple, cst.List):
        return [n for e in target.elements for n in _names(e.value)]
    return []
