"""Probe inputs: a trigger kind's variant of a captured call, as code the sandbox runs.

A variant (``kinds.Variant``) changes a captured call (``calls``): a size changes
everywhere it appears (every tensor dimension, every equal int scalar or tuple
element), so related arguments stay consistent (``x`` of (M, N) and ``weight`` of
(N,)). ``candidates`` plans a survivor's inputs: the trigger kinds in the order its
family makes most promising (``kinds.order``), taken round-robin: the best candidate
of every kind first, then each kind's second, so a budget smaller than the list still
tries every kind.
A candidate of more than ``SHRINK_ELEMENTS`` input elements (each probe runs twice in
the interpreter) has its sizes shrunk on top of its own change: a size
above twice a captured block size keeps one block plus its tail past the last full
block (the same remainder modulo the block size); other sizes shrink to about a
quarter, keeping their parity and not becoming a power of two. A size a variant set
one off the own check's shifts with it, so it stays one off the shrunk size.
Each candidate is a seeded setup snippet plus a call: the sandbox runs exactly that
text on the original and on the mutant, and the test a hit becomes (``text``)
contains it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from . import calls as C
from .kinds import MAGNITUDE, SHRINK_ELEMENTS, Special, Variant, order, variants

FLOAT_DTYPES = C.FLOAT_DTYPES
MAX_ELEMENTS = 1 << 20  # per candidate, all tensors together
#: a count of rows (``_rows``) shrinks to this many plus its remainder modulo this
ROWS = 16


@dataclass(frozen=True)
class Candidate:
    id: str
    function: str
    setup: str  # seeded statements that build the tensors
    call: str  # the call expression, e.g. "add(x, y)"
    tensors: tuple[str, ...]  # tensor variables the setup defines
    describe: str  # what changed, for people
    slug: str  # the same, for a test name
    kind: str  # the trigger kind: a name of ``kinds.KINDS``
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
    code = _values_code(spec, _stored_shape(shape, layout), dtype, mode, points)
    code = _view_code(code, shape, layout)
    device = spec.get("device") or "cpu"
    return code if device == "cpu" else f"({code}).to({device!r})"


def _stored_shape(shape: list[int], layout: str | None) -> list[int]:
    """The shape a tensor of ``shape`` is allocated with, so that ``layout``'s view of it
    (``_view_code``) has ``shape``: the last two dimensions swapped for a transposed view,
    twice the elements (1-D) or 3 more columns for a sliced one."""
    store = list(shape)
    if layout == "transposed":
        store[-2], store[-1] = store[-1], store[-2]
    elif layout == "sliced":
        store[-1] = 2 * store[-1] if len(store) == 1 else store[-1] + 3
    return store


def _view_code(code: str, shape: list[int], layout: str | None) -> str:
    """``code`` (a tensor allocated with ``_stored_shape``) as ``layout``'s view of
    ``shape``: transposed back, or sliced to every other element or the first columns."""
    if layout == "transposed":
        return f"({code}).transpose(-2, -1)"
    if layout == "sliced":
        return f"({code})[::2]" if len(shape) == 1 else f"({code})[..., :{shape[-1]}]"
    return code


def _values_code(
    spec: dict, shape: list[int], dtype: str, mode: str | None, points: tuple[float, ...] = ()
) -> str:
    """Code for the values of a tensor of ``shape`` and ``dtype``, drawn from the captured
    range of ``spec`` or as the value ``mode`` asks."""
    size = _shape(shape)
    if dtype == "bool":
        return f"torch.rand({size}) < 0.5"
    if dtype not in FLOAT_DTYPES:
        return _int_values_code(spec, size, dtype, mode)
    return _float_values_code(spec, size, dtype, mode, points)


def _int_values_code(spec: dict, size: str, dtype: str, mode: str | None) -> str:
    lo, hi = spec.get("min"), spec.get("max")
    if mode == "full-range":  # the dtype's whole range (randint's end is exclusive)
        return (
            f"torch.randint(torch.iinfo(torch.{dtype}).min, torch.iinfo(torch.{dtype}).max, "
            f"{size}, dtype=torch.{dtype})"
        )
    if spec.get("dtype") in FLOAT_DTYPES:
        lo, hi = _integers_of_floats(lo, hi)
        return f"torch.randint({lo}, {hi + 1}, {size}, dtype=torch.{dtype})"
    lo = int(lo) if lo is not None else 0
    hi = int(hi) if hi is not None else 8
    if lo == hi:
        return f"torch.full({size}, {lo}, dtype=torch.{dtype})"
    return f"torch.randint({lo}, {hi + 1}, {size}, dtype=torch.{dtype})"


def _integers_of_floats(lo: float | None, hi: float | None) -> tuple[int, int]:
    """The integer range (both ends included) that float inputs drawn as integers take:
    the captured range's integers, never a single one (values in [0, 1) are all 0 as
    integers: x + y and x - y would agree)."""
    low = math.floor(lo) if lo is not None else 0
    return low, max(math.ceil(hi) if hi is not None else 0, low + 7)


def _float_values_code(
    spec: dict, size: str, dtype: str, mode: str | None, points: tuple[float, ...]
) -> str:
    lo = -1.0 if spec.get("min") is None else float(spec["min"])
    hi = 1.0 if spec.get("max") is None else float(spec["max"])
    cast = "" if dtype == "float32" else f".to(torch.{dtype})"
    fixed = _fixed_float_code(size, mode, points, (lo + hi) / 2)
    if fixed is not None:
        return fixed + cast
    lo, hi = _float_range(mode, lo, hi, dtype)
    lo, hi = _nice(lo, False), _nice(hi, True)
    if lo == hi:
        return f"torch.full({size}, {lo!r}){cast}"
    return f"torch.empty({size}).uniform_({lo!r}, {hi!r}){cast}"


def _fixed_float_code(
    size: str, mode: str | None, points: tuple[float, ...], middle: float
) -> str | None:
    """Code for float values ``mode`` fixes (before the cast): drawn from the boundary
    ``points``, a constant near the range's ``middle``, zeros or ones; None for a range."""
    if mode == "boundary" and points:
        values = ", ".join(repr(p) for p in points)
        return f"torch.tensor([{values}])[torch.randint(0, {len(points)}, {size})]"
    if mode == "constant":
        c = _nice(middle, True) or 0.5
        return f"torch.full({size}, {c!r})"
    if mode in ("zeros", "ones"):
        return f"torch.{mode}({size})"
    return None


def _float_range(mode: str | None, lo: float, hi: float, dtype: str) -> tuple[float, float]:
    """The range float values are drawn from: the captured one (``lo``, ``hi``), or the
    one ``mode`` asks, scaled by the captured magnitude."""
    m = max(abs(lo), abs(hi), 1.0)
    if mode == "magnitude":
        return -max(MAGNITUDE, m), max(MAGNITUDE, m)
    if mode == "negative":
        return -2 * m, -m / 4
    if mode == "wide":
        w = min(100 * m, 1e4 if dtype in ("float16", "bfloat16") else 1e6)
        return -w, w
    if mode == "tiny":
        return -m * 1e-3, m * 1e-3
    return lo, hi


def _boundary_points(call: dict) -> tuple[float, ...]:
    """Exact boundary values of a call: 0, its float scalars (a threshold, an eps) and
    the ends of each float tensor's captured range, each as it is."""
    points: list[float] = [0.0]
    for spec in C.all_args(call):
        value = spec.get("value")
        if spec["kind"] == "value" and isinstance(value, float) and math.isfinite(value):
            points.append(value)
        elif spec["kind"] == "tensor" and spec["dtype"] in FLOAT_DTYPES:
            points += [float(v) for v in (spec.get("min"), spec.get("max")) if v is not None]
    return tuple(dict.fromkeys(points))


def _value_code(spec: dict, sizes: dict[int, int], dtypes: Mapping[str, str]) -> str:
    if spec["kind"] == "dtype":
        return f"torch.{dtypes.get(spec['value'], spec['value'])}"
    value = spec["value"]
    if isinstance(value, list):
        return _sequence_code(value, spec.get("sequence"), sizes)
    if isinstance(value, int) and not isinstance(value, bool):
        return repr(sizes.get(value, value))
    return repr(value)


def _sequence_code(value: list, sequence: str | None, sizes: dict[int, int]) -> str:
    """Code for a captured list or tuple of scalars (``sequence``: which), each int in
    it a size that changes with ``sizes``."""
    items = [sizes.get(v, v) if isinstance(v, int) else v for v in value]
    if sequence == "list":
        return repr(items)
    return repr(tuple(items))


def _variable(name: str | None, index: int, taken: set[str]) -> str:
    base = name if name and name.isidentifier() else f"arg{index}"
    var, n = base, 2
    while var in taken:
        var, n = f"{base}{n}", n + 1
    taken.add(var)
    return var


def _rows(d: int, blocks: list[int]) -> bool:
    """A size far below every block size: not a block's extent but a count of rows, one
    program each (the layer-norm tutorial's 1151 rows of 8192): the interpreter runs
    programs one by one, so such a size is what makes a probe slow."""
    return bool(blocks) and all(b >= 2 * d for b in blocks)


def _smaller(d: int, blocks: list[int]) -> tuple[int, int | None] | None:
    """(a smaller size for ``d``, the block size whose remainder it keeps or None)."""
    if _rows(d, blocks) and d > 2 * ROWS:
        return ROWS + d % ROWS, None  # a few programs, the same remainder modulo 16
    for b in reversed(blocks):  # the largest block first: its remainder keeps the others'
        if d > 2 * b:
            return (b + d % b if d % b else 2 * b), b
    new = _quarter(d)
    return (new, None) if new < d else None


def _quarter(d: int) -> int:
    """About a quarter of ``d``, at least 3: as odd as ``d`` and a power of two only
    where ``d`` is one."""
    new = d // 4
    if new % 2 != d % 2:
        new += 1  # odd stays odd (and even even, so one-off neighbours shift alike)
    if not C.pow2(d) and C.pow2(new):
        new += 2
    return max(new, 3)


def _shrink_step(
    value: int, related: int | None, blocks: list[int]
) -> tuple[tuple[int, int | None], int | None] | None:
    """A size's next step down in ``_shrink``: (its smaller size, the block size whose
    remainder it keeps or None), and the own check's size it stays near after it (None:
    no longer near it); None where it shrinks no more. ``related``: the own check's size
    while still near ``value``."""
    if related is not None and related != value and abs(related - value) <= 2:
        # one off (or two) the own check's size: shift with the shrunk size
        smaller = _smaller(related, blocks)
        if smaller is not None and value - (related - smaller[0]) >= 1:
            shift = related - smaller[0]
            return (value - shift, smaller[1]), smaller[0]
    smaller = _smaller(value, blocks)
    if smaller is None:
        return None
    return smaller, (smaller[0] if related == value else None)


def _next_to_shrink(current: dict[int, int], stuck: set[int], blocks: list[int]) -> int | None:
    """The size ``_shrink`` shrinks next: a count of rows (``_rows``) first, the largest
    first; None where every size is at its smallest."""
    live = [v for v in set(current.values()) if v > 3 and v not in stuck]
    if not live:
        return None
    # rows first: fewer programs make a probe faster than smaller blocks do
    return max(live, key=lambda v: (_rows(v, blocks), v))


def _shrink_value(
    value: int,
    dims: list[int],
    current: dict[int, int],
    base: dict[int, int | None],
    block: dict[int, int | None],
    blocks: list[int],
) -> bool:
    """One step of ``_shrink``: every size now at ``value`` a step down (``_shrink_step``),
    into ``current``, ``base`` and ``block``; whether any of them changed."""
    changed = False
    for d in dims:
        shrunk = _shrink_step(value, base[d], blocks) if current[d] == value else None
        if shrunk is None:
            continue
        step, base[d] = shrunk
        current[d] = step[0]
        if d not in block or block[d] is not None:
            block[d] = step[1]
        changed = True
    return changed


def _shrink(
    call: dict, sizes: dict[int, int], limit: int
) -> tuple[dict[int, int], list[tuple[int, int, int | None]]]:
    """``sizes`` (the own check's size -> the variant's) shrunk until all tensors
    together hold at most ``limit`` elements, largest size first; and what changed:
    (variant's size, shrunk size, block size whose remainder it kept or None)."""
    dims = C.sizes(call)
    current = {d: sizes.get(d, d) for d in dims}
    # the own check's size, shrunk alike, while the variant's size is still near it
    base: dict[int, int | None] = {d: d for d in dims}
    block: dict[int, int | None] = {}
    stuck: set[int] = set()
    blocks = C.blocks(call)
    while C.elements(call, current) > limit:
        value = _next_to_shrink(current, stuck, blocks)
        if value is None:
            break
        if not _shrink_value(value, dims, current, base, block, blocks):
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


def _shrunk_variant(call: dict, variant: Variant) -> tuple[dict[int, int], str, str]:
    """The variant's sizes, words and slug, its sizes shrunk (``_shrink``) where it has
    more than ``SHRINK_ELEMENTS`` elements in all, unless it says not or is a launch."""
    sizes, describe, slug = dict(variant.sizes), variant.describe, variant.slug
    shrink = variant.shrink and not call.get("launch")
    if shrink and C.elements(call, sizes) > SHRINK_ELEMENTS:
        shrunk, steps = _shrink(call, sizes, SHRINK_ELEMENTS)
        if steps:
            sizes = shrunk
            describe = f"{describe}, {_shrunk_text(steps)}"
            slug = _shrunk_slug(slug, steps)
    return sizes, describe, slug


def _call_text(call: dict, positional: list[str], keywords: list[str]) -> str:
    """The candidate's call expression: the function's call, a launch with its grid, or
    through ``_mg_grad`` (a Function whose backward launches kernels: run it too)."""
    function = call["function"]
    call_text = f"{function}({', '.join(positional + keywords)})"
    if call.get("launch"):
        call_text = f"{function}[{C.grid(call)!r}]({', '.join(positional + keywords)})"
    if call.get("backward"):  # a Function whose backward launches kernels: run it too
        call_text = f"_mg_grad({', '.join([function, *positional, *keywords])})"
    return call_text


def build(call: dict, variant: Variant, seed: int) -> Candidate | None:
    """The candidate of one variant of a captured call; with more than ``SHRINK_ELEMENTS``
    elements in all, its sizes shrink (``_shrink``) unless the variant says not. Its
    ``layout`` makes every input tensor a view of that layout (``_tensor_code``); its
    ``special`` fills one row of the largest float tensor (with ``lane``: one lane of every
    row). A launch (``call["launch"]``) keeps its tensors' sizes and its grid: only its
    values change, and its ``scalars`` (an integer argument by name: its new value)."""
    if call.get("launch") and variant.reshapes:
        return None  # its grid and extents are the recorded launch's
    sizes, describe, slug = _shrunk_variant(call, variant)
    function = call["function"]
    taken = {"torch", "math", function, function.split(".")[0], "result", "expected", "_mg_grad"}
    lines = [f"torch.manual_seed({seed})"]
    built = _arguments(call, taken, lines, sizes, variant)
    if built is None:
        return None
    tensors, positional, keywords, largest = built
    if variant.special is not None:
        if largest is None:
            return None
        lines.append(_special_line(largest, variant.special, variant.lane))
    elements = C.elements(call, sizes)
    if elements > MAX_ELEMENTS:
        return None
    old = max(1, C.elements(call, {}))
    est = float(call.get("duration_s", 0.1)) * max(1.0, elements / old)
    setup = "\n".join(lines) + "\n"
    call_text = _call_text(call, positional, keywords)
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
        kind=variant.kind,
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
    variant: Variant,
) -> tuple[list[str], list[str], list[str], tuple[int, str, int] | None] | None:
    """The call's arguments as code (with ``sizes``, and the variant's dtypes, value mode,
    layout and scalars): each tensor's setup line into ``lines``; (its tensor
    variables, positional and keyword argument texts, the largest float tensor as
    (elements, variable, rank)); None where an argument cannot be written (opaque)."""
    tensors: list[str] = []
    positional: list[str] = []
    keywords: list[str] = []
    entries = [(a.get("name"), a, None) for a in call["args"]]
    entries += [(k, v, k) for k, v in call["kwargs"].items()]
    points = _boundary_points(call) if variant.mode == "boundary" else ()
    floats: list[tuple[int, str, int]] = []  # (elements, variable, rank)
    for index, (name, spec, keyword) in enumerate(entries):
        if spec["kind"] == "opaque":
            return None
        if spec["kind"] == "tensor":
            text, floating = _tensor_argument(
                spec, _variable(name, index, taken), lines, sizes, variant, points
            )
            tensors.append(text)
            floats += [floating] if floating is not None else []
        else:
            text = _scalar_text(name, spec, sizes, variant)
        if keyword is None:
            positional.append(text)
        else:
            keywords.append(f"{keyword}={text}")
    # the first of the largest, as ``max`` keeps it
    largest = max(floats, key=lambda f: f[0], default=None)
    return tensors, positional, keywords, largest


def _scalar_text(name: str | None, spec: dict, sizes: dict[int, int], variant: Variant) -> str:
    """A non-tensor argument's code: the variant's value for it by name, else its own."""
    if name in variant.scalars:
        return repr(variant.scalars[name])
    return _value_code(spec, sizes, variant.dtypes)


def _tensor_argument(
    spec: dict,
    text: str,
    lines: list[str],
    sizes: dict[int, int],
    variant: Variant,
    points: tuple[float, ...],
) -> tuple[str, tuple[int, str, int] | None]:
    """A tensor argument held in variable ``text``: its setup line into ``lines``; the
    variable, and (elements, variable, rank) where it is a float tensor with a shape."""
    shape, dtype, code = _tensor_setup(spec, sizes, variant, points)
    lines.append(f"{text} = {code}")
    floating = dtype in FLOAT_DTYPES and bool(shape)
    return text, ((math.prod(shape), text, len(shape)) if floating else None)


def _tensor_setup(
    spec: dict, sizes: dict[int, int], variant: Variant, points: tuple[float, ...]
) -> tuple[list[int], str, str]:
    """A tensor argument's shape (with ``sizes``), its dtype (with the variant's) and the
    code that builds it (in the variant's value mode and layout)."""
    shape = [sizes.get(d, d) if d > 1 else d for d in spec["shape"]]
    dtype = variant.dtypes.get(spec["dtype"], spec["dtype"])
    layout = variant.layout
    view = layout if layout == "sliced" or len(shape) >= 2 else None
    if not shape or math.prod(shape) <= 1:
        view = None  # a scalar-like tensor has no layout to speak of
    return shape, dtype, _tensor_code(spec, shape, dtype, variant.mode, view, points)


def _special_line(largest: tuple[int, str, int], special: Special, lane: bool) -> str:
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
    for spec in C.all_args(call):
        if spec["kind"] == "tensor":
            parts.append(f"{_shape(spec['shape'])} {spec['dtype']}")
        elif spec["kind"] == "value":
            parts.append(repr(spec["value"]))
        else:
            parts.append(spec.get("value") or spec.get("type", "?"))
    grid = f"[{C.grid(call)!r}]" if call.get("launch") else ""
    return f"{call['function']}{grid}({', '.join(parts)})"


def describe_call(call: dict) -> str:
    return _signature(call)


def candidates(
    calls: list[dict],
    family: str,
    budget: int,
    seed: int = 0,
    triggers: tuple[str, ...] = (),
) -> list[Candidate]:
    """Up to ``budget`` distinct candidates over all captured calls: the trigger kinds in
    the order the mutant's family makes most promising (``kinds.order``), taken
    round-robin (every kind's best candidate, then every kind's second, ...); within a
    kind, smaller calls first. ``triggers`` (when given) keeps only those kinds."""
    kinds = _kinds_to_try(family, triggers)
    queues = _queues(calls, kinds)
    out: list[Candidate] = []
    seen: set[tuple[str, str]] = set()
    position = dict.fromkeys(kinds, 0)
    while len(out) < budget and any(position[k] < len(queues[k]) for k in kinds):
        for kind in kinds:
            candidate = _next_distinct(queues[kind], position, kind, seed, seen)
            if candidate is not None:
                out.append(candidate)
            if len(out) >= budget:
                break
    return out


def _kinds_to_try(family: str, triggers: tuple[str, ...]) -> tuple[str, ...]:
    """The trigger kinds to try, most promising for ``family`` first (``kinds.order``):
    all of them, or only ``triggers`` when given."""
    return tuple(k for k in order(family) if not triggers or k in triggers)


def _queues(calls: list[dict], kinds: tuple[str, ...]) -> dict[str, list[tuple[dict, Variant]]]:
    """Each of ``kinds``' variants of the calls that launch kernels, smaller calls first."""
    usable = sorted((c for c in calls if c.get("launches")), key=lambda c: C.elements(c, {}))
    queues: dict[str, list[tuple[dict, Variant]]] = {kind: [] for kind in kinds}
    for call in usable:
        for variant in variants(call):
            if variant.kind in queues:
                queues[variant.kind].append((call, variant))
    return queues


def _next_distinct(
    queue: list[tuple[dict, Variant]],
    position: dict[str, int],
    kind: str,
    seed: int,
    seen: set[tuple[str, str]],
) -> Candidate | None:
    """A kind's next candidate that builds and differs from every one before it."""
    while position[kind] < len(queue):
        call, variant = queue[position[kind]]
        position[kind] += 1
        candidate = build(call, variant, seed)
        if candidate is None:
            continue
        key = (candidate.setup, candidate.call)
        if key not in seen:
            seen.add(key)
            return candidate
    return None
