"""Probe inputs near the own check's, and the readable pytest test a hit becomes.

A captured call (``harness/probe.capture``) is a function name and its arguments:
tensors as shape, dtype and value range; scalars, tuples and dtypes as values. A
*size* is any tensor dimension above 1; changing one changes it everywhere it
appears (every tensor dimension, every equal int scalar or tuple element), so
related arguments stay consistent (``x`` of (M, N) and ``weight`` of (N,)).

Variations, each of a trigger kind (``Candidate.kind``, named in the report):
- ``size``, ``block``, ``small``, ``npot``: one off each captured size, one off each
  launch's block size, tiny and odd (1, 3), a size or a row width that is not a power
  of two;
- ``more-rows``: more rows than the launch had programs (a grid-stride or persistent
  loop then runs more than once per program);
- ``non-contiguous``: every input tensor a transposed or a sliced view (strides the
  own check's contiguous tensors never had); a wrapper that refuses them is dropped;
- ``special-values``: one row (a 1-D tensor: all of it) all zero (first: a norm that only
  an ``eps`` keeps finite there), all -inf (a masked-out row), all NaN, all +inf, or of a
  magnitude whose square overflows the dtype;
- ``boundary-values``: values drawn only from the exact boundaries (0, the call's float
  scalars, the captured range's ends): ties and values on a comparison's threshold;
- ``int-dtype``: integer inputs over the whole range of their dtype or of a wider or
  narrower one, float inputs as small int32 values;
- ``dtype``: the other float dtypes (float16, bfloat16, float32) for float tensors; for
  float32 and float64 ones first float16 with a row whose square overflows it (large
  magnitudes in a low precision: what a dropped ``.to(tl.float32)`` overflows in);
- ``magnitude``: float inputs of large magnitude, both signs (logits in the tens to
  hundreds), with and without a ``-inf`` lane in every row: a dropped max-subtraction
  or a dropped upcast before ``exp``/``sum`` overflows there, where the own check's
  values in [0, 1) hide it;
- ``values``: all zeros, all ones, all negative, wide (x100), tiny (x1e-3), constant.
Every family's first candidate is ``base``: the learned call itself with fresh random
values of the same dtypes and shapes (what a person tries first; never a constant or
all-zero fill unless the call had one). Then candidates are ordered by a fixed prior
per mutant family (``FAMILY_ORDER``: how often each kind separates that family's
mutants, the issue's study of real bugs for the new kinds) and taken round-robin: the
best candidate of every kind first, then each kind's second, so a budget smaller than
the list still tries every kind.
A candidate of more than ``SHRINK_ELEMENTS`` input elements (each probe runs twice in
the interpreter) has its sizes shrunk on top of its own change: a size
above twice a captured block size keeps one block plus its tail past the last full
block (the same remainder modulo the block size); other sizes shrink to about a
quarter, keeping their parity and not becoming a power of two. A size a variant set
one off the own check's shifts with it, so it stays one off the shrunk size.
Each candidate is a seeded setup snippet plus a call: the sandbox runs exactly that
text on the original and on the mutant, and the test a hit becomes contains it. An
output too big for a golden file keeps its values at a sample of positions (where the
mutant differs, and a seeded uniform sample: ``harness/probe.golden``), and the test
compares those.
"""

from __future__ import annotations

import hashlib
import json
import math
import textwrap
from dataclasses import dataclass

from ..harness.probe import GRAD_HELPER

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
PROBE_DTYPES = ("float16", "bfloat16", "float32")
MAX_ELEMENTS = 1 << 20  # per candidate, all tensors together
#: above this (all tensors together) a candidate's sizes shrink: probes stay quick, and
#: sizes of a few blocks keep more than one program per grid axis (a 512x512 matmul of
#: 128x256 blocks is not shrunk; smaller goldens would need one program per axis)
SHRINK_ELEMENTS = 1 << 19
#: a count of rows (``_rows``) shrinks to this many plus its remainder modulo this
ROWS = 16
#: value modes: (name, description)
MODES = (
    ("zeros", "all zeros"),
    ("ones", "all ones"),
    ("negative", "all negative values"),
    ("wide", "wide values (x100)"),
    ("tiny", "tiny values (x1e-3)"),
    ("constant", "constant values"),
)
#: the ``magnitude`` kind's values: both signs, tens to hundreds (exp overflows float32
#: past about 88, float16 past about 11)
MAGNITUDE = 100.0
#: trigger kinds, each family's prior order (most often separating first)
FAMILY_ORDER = {
    "masks": (
        "base", "size", "block", "small", "npot", "more-rows", "special-values",
        "non-contiguous", "dtype", "magnitude", "values", "boundary-values", "int-dtype",
    ),
    "boundaries": (
        "base", "size", "block", "small", "boundary-values", "npot", "more-rows",
        "non-contiguous", "values", "special-values", "magnitude", "dtype", "int-dtype",
    ),
    "indexing": (
        "base", "size", "block", "non-contiguous", "more-rows", "npot", "small",
        "int-dtype", "dtype", "values", "magnitude", "special-values", "boundary-values",
    ),
    "precision": (
        "base", "magnitude", "dtype", "special-values", "values", "int-dtype", "size",
        "block", "small", "npot", "more-rows", "non-contiguous", "boundary-values",
    ),
    "arith": (
        "base", "magnitude", "values", "special-values", "boundary-values", "size",
        "more-rows", "dtype", "int-dtype", "block", "small", "npot", "non-contiguous",
    ),
}  # fmt: skip
DEFAULT_ORDER = (
    "base", "size", "block", "npot", "more-rows", "magnitude", "special-values",
    "non-contiguous", "small", "boundary-values", "values", "dtype", "int-dtype",
)  # fmt: skip
TRIGGERS = frozenset(DEFAULT_ORDER)
INT_DTYPES = ("int8", "int16", "int32", "int64")
#: special values written into one row: (name, code with ``{v}`` for the tensor, describe)
#: (what a person tries first: a zero row, where an ``eps`` is all that keeps a norm finite)
SPECIAL = (
    ("zero", "0.0", "all zero"),
    ("neg_inf", 'float("-inf")', "all -inf"),  # a masked-out row of attention or softmax
    ("nan", 'float("nan")', "all NaN"),
    ("inf", 'float("inf")', "all +inf"),
    ("huge", "torch.finfo({v}.dtype).max ** 0.5 * 2", "of a magnitude whose square overflows"),
)
HUGE = SPECIAL[-1]


@dataclass(frozen=True)
class Candidate:
    id: str
    function: str
    setup: str  # seeded statements that build the tensors
    call: str  # the call expression, e.g. "add(x, y)"
    tensors: tuple[str, ...]  # tensor variables the setup defines
    describe: str  # what changed, for people
    slug: str  # the same, for a test name
    kind: str  # the trigger kind: one of TRIGGERS
    elements: int
    est_s: float  # expected seconds for one side
    case: str = ""  # the test case whose call this varies (project mode), for the test's words
    #: a kernel launch ``kernel[grid](...)`` (learned where no public function was on the
    #: path): a statement, whose outputs are the tensors it wrote
    launch: bool = False
    #: where the function is imported from when not the kernel module (project mode: a
    #: Function of another module of the package over the kernel module's functions)
    module: str = ""

    def request(self) -> dict:
        return {
            "id": self.id,
            "function": self.function,
            **({"module": self.module} if self.module else {}),
            "setup": self.setup,
            "call": self.call,
            "tensors": list(self.tensors),
            **({"launch": True} if self.launch else {}),
        }


def _nice(x: float, up: bool) -> float:
    """``x`` rounded outward to 3 significant digits (readable ranges in tests)."""
    if x == 0 or not math.isfinite(x):
        return 0.0
    exp = math.floor(math.log10(abs(x))) - 2
    scale = 10.0**exp
    value = (math.ceil if up else math.floor)(x / scale) * scale
    return float(f"{value:.3g}")


def _shape(shape: list[int]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _tensor_code(
    spec: dict,
    shape: list[int],
    dtype: str,
    mode: str | None,
    layout: str | None = None,
    points: tuple[float, ...] = (),
) -> str:
    """Code for one input tensor of ``shape``; a ``layout`` builds it as a view: a
    transposed one (the last two dimensions, of a tensor allocated the other way round)
    or a sliced one (every other element of a 1-D tensor, a row of 3 more columns)."""
    store = list(shape)
    if layout == "transposed":
        store[-2], store[-1] = store[-1], store[-2]
    elif layout == "sliced":
        store[-1] = 2 * store[-1] if len(store) == 1 else store[-1] + 3
    code = _values_code(spec, store, dtype, mode, points)
    if layout == "transposed":
        code = f"({code}).transpose(-2, -1)"
    elif layout == "sliced":
        code = f"({code})[::2]" if len(shape) == 1 else f"({code})[..., :{shape[-1]}]"
    device = spec.get("device") or "cpu"
    return code if device == "cpu" else f"({code}).to({device!r})"


def _values_code(
    spec: dict, shape: list[int], dtype: str, mode: str | None, points: tuple[float, ...] = ()
) -> str:
    size = _shape(shape)
    lo, hi = spec.get("min"), spec.get("max")
    if dtype == "bool":
        return f"torch.rand({size}) < 0.5"
    if dtype not in FLOAT_DTYPES:
        if mode == "full-range":  # the dtype's whole range (randint's end is exclusive)
            return (
                f"torch.randint(torch.iinfo(torch.{dtype}).min, torch.iinfo(torch.{dtype}).max, "
                f"{size}, dtype=torch.{dtype})"
            )
        if spec.get("dtype") in FLOAT_DTYPES:
            # float inputs as integers: the captured range's integers, never a single one
            # (values in [0, 1) are all 0 as integers: x + y and x - y would agree)
            lo = math.floor(lo) if lo is not None else 0
            hi = max(math.ceil(hi) if hi is not None else 0, lo + 7)
            return f"torch.randint({lo}, {hi + 1}, {size}, dtype=torch.{dtype})"
        lo = int(lo) if lo is not None else 0
        hi = int(hi) if hi is not None else 8
        if lo == hi:
            return f"torch.full({size}, {lo}, dtype=torch.{dtype})"
        return f"torch.randint({lo}, {hi + 1}, {size}, dtype=torch.{dtype})"
    lo = -1.0 if lo is None else float(lo)
    hi = 1.0 if hi is None else float(hi)
    m = max(abs(lo), abs(hi), 1.0)
    cast = "" if dtype == "float32" else f".to(torch.{dtype})"
    if mode == "boundary" and points:
        values = ", ".join(repr(p) for p in points)
        return f"torch.tensor([{values}])[torch.randint(0, {len(points)}, {size})]{cast}"
    if mode == "magnitude":
        lo, hi = -max(MAGNITUDE, m), max(MAGNITUDE, m)
    elif mode == "negative":
        lo, hi = -2 * m, -m / 4
    elif mode == "wide":
        w = min(100 * m, 1e4 if dtype in ("float16", "bfloat16") else 1e6)
        lo, hi = -w, w
    elif mode == "tiny":
        lo, hi = -m * 1e-3, m * 1e-3
    elif mode == "constant":
        c = _nice((lo + hi) / 2, True) or 0.5
        return f"torch.full({size}, {c!r}){cast}"
    elif mode in ("zeros", "ones"):
        return f"torch.{mode}({size}){cast}"
    lo, hi = _nice(lo, False), _nice(hi, True)
    if lo == hi:
        return f"torch.full({size}, {lo!r}){cast}"
    return f"torch.empty({size}).uniform_({lo!r}, {hi!r}){cast}"


def _boundary_points(call: dict) -> tuple[float, ...]:
    """Exact boundary values of a call: 0, its float scalars (a threshold, an eps) and
    the ends of each float tensor's captured range, each as it is."""
    points: list[float] = [0.0]
    for spec in _all_args(call):
        value = spec.get("value")
        if spec["kind"] == "value" and isinstance(value, float) and math.isfinite(value):
            points.append(value)
        elif spec["kind"] == "tensor" and spec["dtype"] in FLOAT_DTYPES:
            points += [float(v) for v in (spec.get("min"), spec.get("max")) if v is not None]
    return tuple(dict.fromkeys(points))


def _sizes(call: dict) -> list[int]:
    dims: set[int] = set()
    for spec in _all_args(call):
        if spec["kind"] == "tensor":
            dims.update(d for d in spec["shape"] if d > 1)
    return sorted(dims, reverse=True)


def _all_args(call: dict) -> list[dict]:
    return list(call["args"]) + list(call["kwargs"].values())


def _elements(call: dict, sizes: dict[int, int]) -> int:
    total = 0
    for spec in _all_args(call):
        if spec["kind"] == "tensor":
            total += math.prod(sizes.get(d, d) for d in spec["shape"])
    return total


def _value_code(spec: dict, sizes: dict[int, int], dtypes: dict[str, str]) -> str:
    if spec["kind"] == "dtype":
        return f"torch.{dtypes.get(spec['value'], spec['value'])}"
    value = spec["value"]
    if isinstance(value, list):
        items = [sizes.get(v, v) if isinstance(v, int) else v for v in value]
        if spec.get("sequence") == "list":
            return repr(items)
        return repr(tuple(items))
    if isinstance(value, int) and not isinstance(value, bool):
        return repr(sizes.get(value, value))
    return repr(value)


def _variable(name: str | None, index: int, taken: set[str]) -> str:
    base = name if name and name.isidentifier() else f"arg{index}"
    var, n = base, 2
    while var in taken:
        var, n = f"{base}{n}", n + 1
    taken.add(var)
    return var


#: launch options recorded with the constexprs: not block sizes
LAUNCH_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg"})


def _blocks(call: dict) -> list[int]:
    """The call's captured power-of-two block sizes (integer constexprs of 8 or more)."""
    return sorted(
        {
            v
            for name, values in call.get("constexprs", {}).items()
            if name not in LAUNCH_OPTIONS
            for v in values
            if isinstance(v, int) and not isinstance(v, bool) and v >= 8 and v & (v - 1) == 0
        }
    )


def _rows(d: int, blocks: list[int]) -> bool:
    """A size far below every block size: not a block's extent but a count of rows, one
    program each (the layer-norm tutorial's 1151 rows of 8192): the interpreter runs
    programs one by one, so such a size is what makes a probe slow."""
    return bool(blocks) and all(b >= 2 * d for b in blocks)


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _smaller(d: int, blocks: list[int]) -> tuple[int, int | None] | None:
    """(a smaller size for ``d``, the block size whose remainder it keeps or None)."""
    if _rows(d, blocks) and d > 2 * ROWS:
        return ROWS + d % ROWS, None  # a few programs, the same remainder modulo 16
    for b in reversed(blocks):  # the largest block first: its remainder keeps the others'
        if d > 2 * b:
            return (b + d % b if d % b else 2 * b), b
    new = d // 4
    if new % 2 != d % 2:
        new += 1  # odd stays odd (and even even, so one-off neighbours shift alike)
    if not _pow2(d) and _pow2(new):
        new += 2
    new = max(new, 3)
    return (new, None) if new < d else None


def _shrink(
    call: dict, sizes: dict[int, int], limit: int
) -> tuple[dict[int, int], list[tuple[int, int, int | None]]]:
    """``sizes`` (the own check's size -> the variant's) shrunk until all tensors
    together hold at most ``limit`` elements, largest size first; and what changed:
    (variant's size, shrunk size, block size whose remainder it kept or None)."""
    dims = _sizes(call)
    current = {d: sizes.get(d, d) for d in dims}
    # the own check's size, shrunk alike, while the variant's size is still near it
    base: dict[int, int | None] = {d: d for d in dims}
    block: dict[int, int | None] = {}
    stuck: set[int] = set()
    blocks = _blocks(call)
    while _elements(call, current) > limit:
        live = [v for v in set(current.values()) if v > 3 and v not in stuck]
        if not live:
            break
        # rows first: fewer programs make a probe faster than smaller blocks do
        value = max(live, key=lambda v: (_rows(v, blocks), v))
        changed = False
        for d in dims:
            if current[d] != value:
                continue
            step = None
            related = base[d]
            if related is not None and related != value and abs(related - value) <= 2:
                # one off (or two) the own check's size: shift with the shrunk size
                smaller = _smaller(related, blocks)
                if smaller is not None and value - (related - smaller[0]) >= 1:
                    shift = related - smaller[0]
                    step = (value - shift, smaller[1])
                    base[d] = smaller[0]
            if step is None:
                smaller = _smaller(value, blocks)
                if smaller is None:
                    continue
                step = smaller
                base[d] = step[0] if related == value else None
            current[d] = step[0]
            if d not in block or block[d] is not None:
                block[d] = step[1]
            changed = True
        if not changed:
            stuck.add(value)
    steps = [
        (sizes.get(d, d), current[d], block.get(d)) for d in dims if current[d] != sizes.get(d, d)
    ]
    return current, steps


def _shrunk_text(steps: list[tuple[int, int, int | None]]) -> str:
    parts = []
    for old, new, b in steps:
        why = f" (same remainder modulo the block size {b})" if b else ""
        parts.append(f"{old} -> {new}{why}")
    return "sizes shrunk " + ", ".join(parts)


def _shrunk_slug(slug: str, steps: list[tuple[int, int, int | None]]) -> str:
    """The slug with each shrunk size's number replaced (or the largest appended)."""
    new = {str(old): str(size) for old, size, _ in steps}
    words = slug.split("_")
    if any(w in new for w in words):
        return "_".join(new.get(w, w) for w in words)
    return f"{slug}_size_{steps[0][1]}"


def build(
    call: dict,
    kind: str,
    seed: int,
    sizes: dict[int, int] | None = None,
    dtypes: dict[str, str] | None = None,
    mode: str | None = None,
    describe: str = "",
    slug: str = "",
    shrink_above: int | None = SHRINK_ELEMENTS,
    layout: str | None = None,
    special: tuple[str, str, str] | None = None,
    lane: bool = False,
    scalars: dict[str, int] | None = None,
) -> Candidate | None:
    """One candidate from a captured call with some sizes, dtypes or values changed;
    with more than ``shrink_above`` elements in all, its sizes shrink (``_shrink``).
    ``layout`` makes every input tensor a view of that layout (``_tensor_code``);
    ``special`` (an entry of ``SPECIAL``) fills one row of the largest float tensor
    (with ``lane``: one lane of every row). A launch (``call["launch"]``) keeps its
    tensors' sizes and its grid: only its values change, and ``scalars`` (an integer
    argument by name: its new value)."""
    sizes, dtypes, scalars = sizes or {}, dtypes or {}, scalars or {}
    if call.get("launch"):
        if sizes or dtypes or layout:
            return None  # its grid and extents are the recorded launch's
        shrink_above = None
    describe = describe or "the own check's shapes with fresh values"
    slug = slug or "fresh_values"
    if shrink_above is not None and _elements(call, sizes) > shrink_above:
        shrunk, steps = _shrink(call, sizes, shrink_above)
        if steps:
            sizes = shrunk
            describe = f"{describe}, {_shrunk_text(steps)}"
            slug = _shrunk_slug(slug, steps)
    function = call["function"]
    taken = {"torch", "math", function, function.split(".")[0], "result", "expected", "_mg_grad"}
    lines = [f"torch.manual_seed({seed})"]
    built = _arguments(call, taken, lines, sizes, dtypes, mode, layout, scalars)
    if built is None:
        return None
    tensors, positional, keywords, largest = built
    if special is not None:
        if largest is None:
            return None
        lines.append(_special_line(largest, special, lane))
    elements = _elements(call, sizes)
    if elements > MAX_ELEMENTS:
        return None
    old = max(1, _elements(call, {}))
    est = float(call.get("duration_s", 0.1)) * max(1.0, elements / old)
    setup = "\n".join(lines) + "\n"
    call_text = f"{function}({', '.join(positional + keywords)})"
    if call.get("launch"):
        call_text = f"{function}[{_grid(call)!r}]({', '.join(positional + keywords)})"
    if call.get("backward"):  # a Function whose backward launches kernels: run it too
        call_text = f"_mg_grad({', '.join([function, *positional, *keywords])})"
    # keyed by what runs: survivors planning the same input share the original's run
    home = [call["module"]] if call.get("module") else []
    content = json.dumps([*home, function, setup, call_text, tensors]).encode()
    return Candidate(
        id="p" + hashlib.sha256(content).hexdigest()[:12],
        function=function,
        setup=setup,
        call=call_text,
        tensors=tuple(tensors),
        describe=describe,
        slug=slug,
        kind=kind,
        elements=elements,
        est_s=est + 0.05,
        case=str(call.get("case", "")),
        module=str(call.get("module", "")),
        launch=bool(call.get("launch")),
    )


def _arguments(
    call: dict,
    taken: set[str],
    lines: list[str],
    sizes: dict[int, int],
    dtypes: dict[str, str],
    mode: str | None,
    layout: str | None,
    scalars: dict[str, int],
) -> tuple[list[str], list[str], list[str], tuple[int, str, int] | None] | None:
    """The call's arguments as code: each tensor's setup line into ``lines``; (its tensor
    variables, positional and keyword argument texts, the largest float tensor as
    (elements, variable, rank)); None where an argument cannot be written (opaque)."""
    tensors: list[str] = []
    positional: list[str] = []
    keywords: list[str] = []
    entries = [(a.get("name"), a, None) for a in call["args"]]
    entries += [(k, v, k) for k, v in call["kwargs"].items()]
    points = _boundary_points(call) if mode == "boundary" else ()
    largest: tuple[int, str, int] | None = None  # (elements, variable, rank)
    for index, (name, spec, keyword) in enumerate(entries):
        if spec["kind"] == "opaque":
            return None
        if spec["kind"] == "tensor":
            var = _variable(name, index, taken)
            shape = [sizes.get(d, d) if d > 1 else d for d in spec["shape"]]
            dtype = dtypes.get(spec["dtype"], spec["dtype"])
            view = layout if layout == "sliced" or len(shape) >= 2 else None
            if not shape or math.prod(shape) <= 1:
                view = None  # a scalar-like tensor has no layout to speak of
            lines.append(f"{var} = {_tensor_code(spec, shape, dtype, mode, view, points)}")
            tensors.append(var)
            text = var
            n = math.prod(shape)
            if dtype in FLOAT_DTYPES and shape and (largest is None or n > largest[0]):
                largest = (n, var, len(shape))
        elif name in scalars:
            text = repr(scalars[name])
        else:
            text = _value_code(spec, sizes, dtypes)
        if keyword is None:
            positional.append(text)
        else:
            keywords.append(f"{keyword}={text}")
    return tensors, positional, keywords, largest


def _special_line(largest: tuple[int, str, int], special: tuple, lane: bool) -> str:
    """The statement that writes ``special``'s value into one row of the largest float
    tensor (with ``lane``: one lane of every row, the first column; a 1-D tensor: its
    first element)."""
    _, var, rank = largest
    value = special[1].format(v=var)
    if lane:
        return f"{var}[..., 0] = {value}"
    return f"{var}[0] = {value}" if rank >= 2 else f"{var}.fill_({value})"


def _signature(call: dict) -> str:
    parts = []
    for spec in _all_args(call):
        if spec["kind"] == "tensor":
            parts.append(f"{_shape(spec['shape'])} {spec['dtype']}")
        elif spec["kind"] == "value":
            parts.append(repr(spec["value"]))
        else:
            parts.append(spec.get("value") or spec.get("type", "?"))
    grid = f"[{_grid(call)!r}]" if call.get("launch") else ""
    return f"{call['function']}{grid}({', '.join(parts)})"


def describe_call(call: dict) -> str:
    return _signature(call)


def _variants(call: dict) -> list[tuple[str, dict]]:
    """(kind, build keyword arguments) for one call, most promising first per kind."""
    if call.get("launch"):
        return _launch_variants(call)
    return _call_variants(call)


def _grid(call: dict) -> tuple[int, ...]:
    """A recorded launch's grid as its call writes it: trailing axes of 1 left out."""
    grid = [int(g) for g in call["grid"]]
    while len(grid) > 1 and grid[-1] == 1:
        grid.pop()
    return tuple(grid)


def _launch_variants(call: dict) -> list[tuple[str, dict]]:
    """A recorded launch's: its values changed (every kind that changes no size), and
    each integer argument that equals an extent of its tensors one short (its grid and
    tensors as recorded: the last lane masked off, where a bound is off by one)."""
    out = [
        (kind, kw)
        for kind, kw in _call_variants(call)
        if not {"sizes", "dtypes", "layout"} & set(kw)
    ]
    extents = {
        d
        for s in _all_args(call)
        if s["kind"] == "tensor"
        for d in [*s["shape"], math.prod(s["shape"])]
    }
    for spec in call["args"]:
        value = spec.get("value")
        if (
            spec["kind"] == "value"
            and not spec.get("constexpr")
            and spec.get("name")
            and isinstance(value, int)
            and not isinstance(value, bool)
            and value > 1
            and value in extents
        ):
            out.insert(
                1,
                (
                    "size",
                    {
                        "scalars": {spec["name"]: value - 1},
                        "describe": f"{spec['name']}={value - 1} instead of {value} (one short of the tensors' extent)",
                        "slug": f"{spec['name']}_{value - 1}",
                    },
                ),
            )
    return out


def _call_variants(call: dict) -> list[tuple[str, dict]]:
    dims = _sizes(call)
    floats = sorted(
        {s["dtype"] for s in _all_args(call) if s["kind"] == "tensor"} & set(FLOAT_DTYPES)
    )
    blocks = _blocks(call)
    out: list[tuple[str, dict]] = [("base", {})]
    out += _size_variants(call, dims, blocks)
    out += _dtype_variants(floats)
    out += _trigger_variants(call, dims, floats, blocks)
    if floats:
        for mode, text in MODES:
            out.append(("values", {"mode": mode, "describe": text, "slug": f"{mode}_values"}))
        if dims:
            d = dims[0]
            out.append(
                (
                    "values",
                    {
                        "mode": "negative",
                        "sizes": {d: d - 1},
                        "describe": f"all negative values, size {d - 1} instead of {d}",
                        "slug": f"negative_values_size_{d - 1}",
                    },
                )
            )
    return out


def _variant(kind: str, sizes: dict[int, int], describe: str, slug: str) -> tuple[str, dict]:
    return kind, {"sizes": sizes, "describe": describe, "slug": slug}


def _size_variants(call: dict, dims: list[int], blocks: list[int]) -> list[tuple[str, dict]]:
    """One off each size, one off each block size, tiny sizes, sizes not a power of two."""
    out = [
        _variant("size", {d: new}, f"size {new} instead of {d} (one off)", f"size_{new}")
        for d in dims
        for new in (d - 1, d + 1)
        if new >= 1
    ]
    for b in blocks:
        for d in dims[:2]:
            if b > 4 * d:
                continue
            for new in (b - 1, b + 1, 2 * b + 1):
                if new != d and new >= 1 and abs(new - d) > 1:
                    text = f"size {new} instead of {d} (one off the block size {b})"
                    out.append(_variant("block", {d: new}, text, f"size_{new}"))
    if not dims:
        return out
    for small in (1, 3):
        text = f"every size {small} (tiny)"
        out.append(_variant("small", dict.fromkeys(dims, small), text, f"sizes_{small}"))
    d = dims[0]
    npot = d + d // 2 + 1 if d > 2 else 7
    if npot & (npot - 1) == 0:
        npot += 2
    text = f"size {npot} instead of {d} (not a power of two)"
    out.append(_variant("npot", {d: npot}, text, f"size_{npot}"))
    for w in _widths(call):
        if w != d and _pow2(w):  # a row width that is a power of two: one that is not
            new = w + w // 2 + 1 if w > 2 else 3
            text = f"row width {new} instead of {w} (not a power of two)"
            out.append(_variant("npot", {w: new}, text, f"width_{new}"))
    return out


def _dtype_variants(floats: list[str]) -> list[tuple[str, dict]]:
    """The other float dtypes; for float32 and float64 first float16 with a row whose
    square overflows it (large magnitudes in a low precision: what a dropped upcast
    overflows in)."""
    out: list[tuple[str, dict]] = []
    for dtype in floats:
        if dtype in ("float32", "float64"):
            out.append(
                (
                    "dtype",
                    {
                        "dtypes": {dtype: "float16"},
                        "special": HUGE,
                        "describe": f"float16 instead of {dtype}, one row {HUGE[2]} float16",
                        "slug": "float16_huge_row",
                    },
                )
            )
        out += [
            ("dtype", {"dtypes": {dtype: other}, "describe": f"{other} instead of {dtype}",
                       "slug": other})
            for other in PROBE_DTYPES
            if other != dtype
        ]  # fmt: skip
    return out


def _widths(call: dict) -> list[int]:
    """The last dimension of each input tensor of two or more dimensions (a row width)."""
    found = {
        s["shape"][-1]
        for s in _all_args(call)
        if s["kind"] == "tensor" and len(s["shape"]) >= 2 and s["shape"][-1] > 1
    }
    return sorted(found, reverse=True)


def _programs(call: dict) -> int:
    """The most programs any launch of the call had along the grid's first axis (0: not
    captured)."""
    return max((int(g[0]) for g in call.get("grids", ()) if g), default=0)


def _rows_dims(call: dict) -> list[int]:
    """The leading dimension of each input tensor of two or more dimensions (its rows)."""
    found = {
        s["shape"][0]
        for s in _all_args(call)
        if s["kind"] == "tensor" and len(s["shape"]) >= 2 and s["shape"][0] >= 1
    }
    return sorted(found)


def _trigger_variants(
    call: dict, dims: list[int], floats: list[str], blocks: list[int]
) -> list[tuple[str, dict]]:
    """The layouts, special values, boundaries and integer inputs of the real bugs."""
    out = _more_rows_variants(call, dims, blocks)
    tensors = [s for s in _all_args(call) if s["kind"] == "tensor"]
    if any(math.prod(s["shape"]) > 1 for s in tensors):
        out.append(
            (
                "non-contiguous",
                {"layout": "sliced", "describe": "sliced (strided) input views", "slug": "sliced"},
            )
        )
        if any(len(s["shape"]) >= 2 for s in tensors):
            out.append(
                (
                    "non-contiguous",
                    {
                        "layout": "transposed",
                        "describe": "transposed input views",
                        "slug": "transposed",
                    },
                )
            )
    if floats:
        out.append(
            (
                "magnitude",
                {
                    "mode": "magnitude",
                    "describe": f"values of magnitude up to {MAGNITUDE:g}, both signs",
                    "slug": "large_magnitude",
                },
            )
        )
        out.append(
            (
                "magnitude",
                {
                    "mode": "magnitude",
                    "special": ("neg_inf_lane", 'float("-inf")', "-inf"),
                    "lane": True,
                    "describe": f"values of magnitude up to {MAGNITUDE:g}, both signs, and "
                    "a -inf lane in every row",
                    "slug": "large_magnitude_inf_lane",
                },
            )
        )
        for name, code, text in SPECIAL:
            out.append(
                (
                    "special-values",
                    {
                        "special": (name, code, text),
                        "describe": f"one row {text}",
                        "slug": f"{name}_row",
                    },
                )
            )
        out.append(
            (
                "boundary-values",
                {
                    "mode": "boundary",
                    "describe": "values only at exact boundaries (0, the call's float "
                    "scalars, the ends of the captured range)",
                    "slug": "boundary_values",
                },
            )
        )
    out += _int_variants(tensors, floats)
    return out


def _more_rows_variants(call: dict, dims: list[int], blocks: list[int]) -> list[tuple[str, dict]]:
    """More rows (or blocks of a 1-D tensor) than the launch had programs: a grid-stride or
    persistent loop then runs more than once per program."""
    out: list[tuple[str, dict]] = []
    programs = _programs(call)
    # more rows than programs: a row count at most the grid's first axis grows past it
    for d in _rows_dims(call):
        if programs and d <= programs:
            new = 2 * programs + 1
            if _elements(call, {d: new}) <= SHRINK_ELEMENTS:
                out.append(
                    (
                        "more-rows",
                        {
                            "sizes": {d: new},
                            "describe": f"{new} rows instead of {d} (more rows than the "
                            f"{programs} programs the launch had)",
                            "slug": f"rows_{new}",
                            "shrink_above": None,
                        },
                    )
                )
    # a 1-D tensor no longer than the launch's programs times a block: past that
    if programs and blocks:
        for d in dims:
            if d > 1 and all(
                len(s["shape"]) == 1 for s in _all_args(call) if s["kind"] == "tensor"
            ):
                b = blocks[-1]
                if d <= programs * b:
                    new = 2 * programs * b + 1
                    if _elements(call, {d: new}) <= SHRINK_ELEMENTS:
                        out.append(
                            (
                                "more-rows",
                                {
                                    "sizes": {d: new},
                                    "describe": f"size {new} instead of {d} (more blocks "
                                    f"of {b} than the {programs} programs the launch had)",
                                    "slug": f"size_{new}",
                                    "shrink_above": None,
                                },
                            )
                        )
    return out


def _int_variants(tensors: list[dict], floats: list[str]) -> list[tuple[str, dict]]:
    """Integer inputs over the whole range of their dtype or another width; float inputs
    as int32."""
    out: list[tuple[str, dict]] = []
    ints = sorted(
        {s["dtype"] for s in tensors if s["dtype"] not in FLOAT_DTYPES and s["dtype"] != "bool"}
    )
    for dtype in ints:
        wider = [t for t in INT_DTYPES if t not in (dtype,)]
        for other in (dtype, *wider[::-1]):
            out.append(
                (
                    "int-dtype",
                    {
                        "dtypes": {dtype: other},
                        "mode": "full-range",
                        "describe": f"{other} values over its whole range"
                        + ("" if other == dtype else f" instead of {dtype}"),
                        "slug": f"{other}_full_range",
                    },
                )
            )
    for dtype in floats:
        out.append(
            (
                "int-dtype",
                {
                    "dtypes": {dtype: "int32"},
                    "describe": f"int32 instead of {dtype}",
                    "slug": "int32",
                },
            )
        )
    return out


def kinds(calls: list[dict], family: str, triggers: tuple[str, ...] = ()) -> list[str]:
    """The trigger kinds the calls offer a mutant of ``family``, in its order: what a
    search with an unlimited budget would try (``candidates`` stops at its budget)."""
    order = FAMILY_ORDER.get(family, DEFAULT_ORDER)
    offered = {kind for c in calls if c.get("launches") for kind, _ in _variants(c)}
    return [k for k in order if k in offered and (not triggers or k in triggers)]


def candidates(
    calls: list[dict],
    family: str,
    budget: int,
    seed: int = 0,
    triggers: tuple[str, ...] = (),
) -> list[Candidate]:
    """Up to ``budget`` distinct candidates over all captured calls: the trigger kinds in
    the order the mutant's family makes most promising (``FAMILY_ORDER``), taken
    round-robin (every kind's best candidate, then every kind's second, ...); within a
    kind, smaller calls first. ``triggers`` (when given) keeps only those kinds."""
    order = FAMILY_ORDER.get(family, DEFAULT_ORDER)
    if triggers:
        order = tuple(k for k in order if k in triggers)
    usable = sorted((c for c in calls if c.get("launches")), key=lambda c: _elements(c, {}))
    per_call = [_variants(c) for c in usable]
    queues: dict[str, list[tuple[int, int, dict, dict]]] = {kind: [] for kind in order}
    for ci, (call, variants) in enumerate(zip(usable, per_call, strict=True)):
        for vi, (kind, kwargs) in enumerate(variants):
            if kind in queues:
                queues[kind].append((ci, vi, call, kwargs))
    out: list[Candidate] = []
    seen: set[tuple[str, str]] = set()
    position = dict.fromkeys(order, 0)
    while len(out) < budget and any(position[k] < len(queues[k]) for k in order):
        for kind in order:
            queue = queues[kind]
            while position[kind] < len(queue):  # this kind's next distinct candidate
                ci, vi, call, kwargs = queue[position[kind]]
                position[kind] += 1
                candidate = build(call, kind, seed, **kwargs)
                if candidate is None:
                    continue
                key = (candidate.setup, candidate.call)
                if key in seen:
                    continue
                seen.add(key)
                out.append(candidate)
                break
            if len(out) >= budget:
                break
    return out


# -- the test a hit becomes ------------------------------------------------------------------
def _importable(module: str) -> bool:
    """``from MODULE import ...`` can name it (a dotted path of identifiers)."""
    return all(part.isidentifier() for part in module.split("."))


def _import_line(module: str, function: str) -> str:
    function = function.split(".")[0]  # ``XFunction.apply``: the class is imported
    if _importable(module):
        return f"from {module} import {function}"
    return f"{function} = importlib.import_module({module!r}).{function}"


def render_test(
    *,
    module: str,
    kernel_name: str,
    candidate: Candidate,
    outputs: dict,
    golden_name: str,
    test_name: str,
    why: str,
) -> str:
    """A plain pytest file: the probe input, the call, the original's outputs as expected."""
    varies = f"It varies the call made by {candidate.case}. " if candidate.case else ""
    about = (
        f"Input: {candidate.call} with {candidate.describe}. {varies}The expected values are "
        f"the original kernel's outputs for this input (in {golden_name}). {why}"
    )
    about = about.replace("\\", "/").replace('"""', "'''")
    lines = [
        f'"""Probe test written by mutant-gate for {kernel_name}.',
        "",
        *textwrap.wrap(about, width=88),
        '"""',
        "",
    ]
    if not _importable(module):
        lines.append("import importlib")
    lines += ["import json", "import pathlib", "", "import torch", ""]
    lines += [_import_line(candidate.module or module, candidate.function), "", ""]
    lines += [
        f"EXPECTED = json.loads(pathlib.Path(__file__).with_name({json.dumps(golden_name)}).read_text())",
        "",
        "",
        "def _load(value):",
        '    if value["kind"] == "tensor":',
        '        data = torch.tensor(value["values"], dtype=getattr(torch, value["dtype"]))',
        '        return data.reshape(value["shape"])',
        '    if value["kind"] == "sequence":',
        '        return tuple(_load(v) for v in value["items"])',
        '    if value["kind"] == "none":',
        "        return None",
        '    return value["value"]',
        "",
        "",
        "def _check(actual, value):",
        "    if isinstance(actual, torch.Tensor):  # the expected values are on the CPU",
        "        actual = actual.detach().cpu()",
        '    if value["kind"] == "sample":  # a big output: its values at the recorded positions',
        '        assert list(actual.shape) == value["shape"]',
        '        where = torch.tensor(value["indices"], dtype=torch.long)',
        '        expected = torch.tensor(value["values"], dtype=getattr(torch, value["dtype"]))',
        "        torch.testing.assert_close(actual.reshape(-1)[where], expected, equal_nan=True)",
        '    elif value["kind"] == "sequence":',
        '        assert len(actual) == len(value["items"])',
        '        for item, expected in zip(actual, value["items"]):',
        "            _check(item, expected)",
        "    else:",
        "        torch.testing.assert_close(actual, _load(value), equal_nan=True)",
        "",
        "",
    ]
    if "_mg_grad(" in candidate.call:  # the call, then its backward: the gradients too
        lines += [*GRAD_HELPER.strip().splitlines(), "", ""]
    lines += [f"def {test_name}():"]
    lines += ["    " + line for line in candidate.setup.strip().splitlines()]
    lines.append(f"    {candidate.call}" if candidate.launch else f"    result = {candidate.call}")
    for name, value in outputs.items():
        if value.get("kind") == "none":
            lines.append(f"    assert {name} is None")
        else:
            lines.append(f'    _check({name}, EXPECTED["{name}"])')
    return "\n".join(lines) + "\n"


def golden_text(outputs: dict) -> str:
    return json.dumps(outputs, separators=(",", ":")) + "\n"
