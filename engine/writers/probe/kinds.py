"""The probe's trigger kinds: one table, every order and every variant derived from it.

A trigger kind is a way to vary a captured call (``calls``) that real bugs are found
by: a ``Kind`` names it, says what it tries, ranks it for each mutant family (how often
it separates that family's mutants: the families' orders are sorted from the ranks)
and makes its ``Variant`` records for a call, most promising first. ``inputs.build``
turns a variant into a candidate input. Adding a kind is adding a row to ``KINDS``
(and its maker beside it); ``--probe-triggers`` and the report's names read the table.

The kinds, as the table has them:
- ``base``: the learned call itself with fresh random values of the same dtypes and
  shapes (what a person tries first; never a constant fill unless the call had one);
- ``size``, ``block``, ``small``, ``npot``: one off each captured size, one off each
  launch's block size, tiny and odd (1, 3), a size or a row width that is not a power
  of two; a recorded launch (no public function on its path) keeps its tensors and
  grid, and its ``size`` variants set an integer argument one short of an extent;
- ``more-rows``: more rows than the launch had programs (a grid-stride or persistent
  loop then runs more than once per program);
- ``special-values``: one row (a 1-D tensor: all of it) all zero (first: a norm that only
  an ``eps`` keeps finite there), all -inf (a masked-out row), all NaN, all +inf, or of a
  magnitude whose square overflows the dtype;
- ``non-contiguous``: every input tensor a transposed or a sliced view (strides the
  own check's contiguous tensors never had); a wrapper that refuses them is dropped;
- ``dtype``: the other float dtypes (float16, bfloat16, float32) for float tensors; for
  float32 and float64 ones first float16 with a row whose square overflows it (large
  magnitudes in a low precision: what a dropped ``.to(tl.float32)`` overflows in);
- ``magnitude``: float inputs of large magnitude, both signs (logits in the tens to
  hundreds), with and without a ``-inf`` lane in every row: a dropped max-subtraction
  or a dropped upcast before ``exp``/``sum`` overflows there, where the own check's
  values in [0, 1) hide it;
- ``values``: all zeros, all ones, all negative, wide (x100), tiny (x1e-3), constant;
- ``boundary-values``: values drawn only from the exact boundaries (0, the call's float
  scalars, the captured range's ends): ties and values on a comparison's threshold;
- ``int-dtype``: integer inputs over the whole range of their dtype or of a wider or
  narrower one, float inputs as small int32 values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from . import calls as C

#: the mutant families with an order of their own (any other family: ``OTHER``)
FAMILIES = ("masks", "boundaries", "indexing", "precision", "arith")
OTHER = "other"
PROBE_DTYPES = ("float16", "bfloat16", "float32")
INT_DTYPES = ("int8", "int16", "int32", "int64")
#: above this many elements in all a candidate's sizes shrink (``inputs.build``)
SHRINK_ELEMENTS = 1 << 19
#: the ``magnitude`` kind's values: both signs, tens to hundreds (exp overflows float32
#: past about 88, float16 past about 11)
MAGNITUDE = 100.0
#: value modes: (name, description)
MODES = (
    ("zeros", "all zeros"),
    ("ones", "all ones"),
    ("negative", "all negative values"),
    ("wide", "wide values (x100)"),
    ("tiny", "tiny values (x1e-3)"),
    ("constant", "constant values"),
)


class Special(NamedTuple):
    """A value written into one row (or one lane of every row): its name, its code (with
    ``{v}`` for the tensor) and what it is, for people."""

    name: str
    code: str
    says: str


#: special values written into one row (what a person tries first: a zero row, where an
#: ``eps`` is all that keeps a norm finite)
SPECIAL = (
    Special("zero", "0.0", "all zero"),
    Special("neg_inf", 'float("-inf")', "all -inf"),  # a masked-out row of attention or softmax
    Special("nan", 'float("nan")', "all NaN"),
    Special("inf", 'float("inf")', "all +inf"),
    Special(
        "huge", "torch.finfo({v}.dtype).max ** 0.5 * 2", "of a magnitude whose square overflows"
    ),
)
HUGE = SPECIAL[-1]
NEG_INF_LANE = Special("neg_inf_lane", 'float("-inf")', "-inf")


@dataclass(frozen=True)
class Variant:
    """One change of a captured call, of one trigger kind: what ``inputs.build`` changes
    (sizes by value, dtypes by name, a value ``mode``, a view ``layout``, a ``special``
    row or ``lane``, integer ``scalars`` by name) and how it is said."""

    kind: str
    describe: str
    slug: str
    sizes: Mapping[int, int] = field(default_factory=dict)
    dtypes: Mapping[str, str] = field(default_factory=dict)
    mode: str | None = None
    layout: str | None = None
    special: Special | None = None
    lane: bool = False
    scalars: Mapping[str, int] = field(default_factory=dict)
    #: its sizes shrink above ``SHRINK_ELEMENTS`` (not where the size is the point)
    shrink: bool = True

    @property
    def reshapes(self) -> bool:
        """It changes a tensor's sizes, dtype or layout (a recorded launch cannot)."""
        return bool(self.sizes or self.dtypes or self.layout)


@dataclass(frozen=True)
class Kind:
    """A trigger kind: its name, what it tries, its rank in each family's order (lower
    runs first: ``FAMILIES`` then ``OTHER``) and its maker."""

    name: str
    says: str
    ranks: tuple[int, int, int, int, int, int]
    make: Callable[[dict], list[Variant]]

    def rank(self, family: str) -> int:
        index = FAMILIES.index(family) if family in FAMILIES else len(FAMILIES)
        return self.ranks[index]


# -- the makers: each kind's variants of a call, most promising first ----------------------
def _base(call: dict) -> list[Variant]:
    return [Variant("base", "the own check's shapes with fresh values", "fresh_values")]


def _sized(kind: str, sizes: dict[int, int], describe: str, slug: str) -> Variant:
    return Variant(kind, describe, slug, sizes=sizes)


def _size(call: dict) -> list[Variant]:
    return [
        _sized("size", {d: new}, f"size {new} instead of {d} (one off)", f"size_{new}")
        for d in C.sizes(call)
        for new in (d - 1, d + 1)
        if new >= 1
    ]


def _block(call: dict) -> list[Variant]:
    out = []
    dims = C.sizes(call)
    for b in C.blocks(call):
        for d in dims[:2]:
            if b > 4 * d:
                continue
            for new in (b - 1, b + 1, 2 * b + 1):
                if new != d and new >= 1 and abs(new - d) > 1:
                    text = f"size {new} instead of {d} (one off the block size {b})"
                    out.append(_sized("block", {d: new}, text, f"size_{new}"))
    return out


def _small(call: dict) -> list[Variant]:
    dims = C.sizes(call)
    if not dims:
        return []
    return [
        _sized("small", dict.fromkeys(dims, small), f"every size {small} (tiny)", f"sizes_{small}")
        for small in (1, 3)
    ]


def _npot(call: dict) -> list[Variant]:
    dims = C.sizes(call)
    if not dims:
        return []
    d = dims[0]
    npot = d + d // 2 + 1 if d > 2 else 7
    if npot & (npot - 1) == 0:
        npot += 2
    text = f"size {npot} instead of {d} (not a power of two)"
    out = [_sized("npot", {d: npot}, text, f"size_{npot}")]
    for w in C.widths(call):
        if w != d and C.pow2(w):  # a row width that is a power of two: one that is not
            new = w + w // 2 + 1 if w > 2 else 3
            text = f"row width {new} instead of {w} (not a power of two)"
            out.append(_sized("npot", {w: new}, text, f"width_{new}"))
    return out


def _more_rows(call: dict) -> list[Variant]:
    """More rows (or blocks of a 1-D tensor) than the launch had programs: a grid-stride or
    persistent loop then runs more than once per program."""
    programs = C.programs(call)
    return _rows_past_programs(call, programs) + _blocks_past_programs(call, programs)


def _rows_past_programs(call: dict, programs: int) -> list[Variant]:
    """More rows than programs: a row count at most the grid's first axis grows past it."""
    out: list[Variant] = []
    for d in C.rows_dims(call):
        if programs and d <= programs:
            new = 2 * programs + 1
            if C.elements(call, {d: new}) <= SHRINK_ELEMENTS:
                text = f"{new} rows instead of {d} (more rows than the {programs} programs the launch had)"
                out.append(Variant("more-rows", text, f"rows_{new}", {d: new}, shrink=False))
    return out


def _blocks_past_programs(call: dict, programs: int) -> list[Variant]:
    """A 1-D tensor no longer than the launch's programs times a block: past that."""
    out: list[Variant] = []
    blocks = C.blocks(call)
    one_d = all(len(s["shape"]) == 1 for s in C.tensors(call))
    if not (programs and blocks and one_d):
        return out
    b = blocks[-1]
    for d in C.sizes(call):
        if d <= programs * b:
            new = 2 * programs * b + 1
            if C.elements(call, {d: new}) <= SHRINK_ELEMENTS:
                text = f"size {new} instead of {d} (more blocks of {b} than the {programs} programs the launch had)"
                out.append(Variant("more-rows", text, f"size_{new}", {d: new}, shrink=False))
    return out


def _special_values(call: dict) -> list[Variant]:
    if not C.floats(call):
        return []
    return [
        Variant("special-values", f"one row {s.says}", f"{s.name}_row", special=s) for s in SPECIAL
    ]


def _non_contiguous(call: dict) -> list[Variant]:
    tensors = C.tensors(call)
    if not any(math.prod(s["shape"]) > 1 for s in tensors):
        return []
    out = [Variant("non-contiguous", "sliced (strided) input views", "sliced", layout="sliced")]
    if any(len(s["shape"]) >= 2 for s in tensors):
        out.append(
            Variant("non-contiguous", "transposed input views", "transposed", layout="transposed")
        )
    return out


def _dtype(call: dict) -> list[Variant]:
    """The other float dtypes; for float32 and float64 first float16 with a row whose
    square overflows it (large magnitudes in a low precision: what a dropped upcast
    overflows in)."""
    out: list[Variant] = []
    for dtype in C.floats(call):
        if dtype in ("float32", "float64"):
            text = f"float16 instead of {dtype}, one row {HUGE.says} float16"
            out.append(
                Variant("dtype", text, "float16_huge_row", dtypes={dtype: "float16"}, special=HUGE)
            )
        out += [
            Variant("dtype", f"{other} instead of {dtype}", other, dtypes={dtype: other})
            for other in PROBE_DTYPES
            if other != dtype
        ]
    return out


def _magnitude(call: dict) -> list[Variant]:
    if not C.floats(call):
        return []
    text = f"values of magnitude up to {MAGNITUDE:g}, both signs"
    return [
        Variant("magnitude", text, "large_magnitude", mode="magnitude"),
        Variant(
            "magnitude",
            f"{text}, and a -inf lane in every row",
            "large_magnitude_inf_lane",
            mode="magnitude",
            special=NEG_INF_LANE,
            lane=True,
        ),
    ]


def _values(call: dict) -> list[Variant]:
    if not C.floats(call):
        return []
    out = [Variant("values", text, f"{mode}_values", mode=mode) for mode, text in MODES]
    dims = C.sizes(call)
    if dims:
        d = dims[0]
        text = f"all negative values, size {d - 1} instead of {d}"
        out.append(
            Variant("values", text, f"negative_values_size_{d - 1}", {d: d - 1}, mode="negative")
        )
    return out


def _boundary_values(call: dict) -> list[Variant]:
    if not C.floats(call):
        return []
    text = "values only at exact boundaries (0, the call's float scalars, the ends of the captured range)"
    return [Variant("boundary-values", text, "boundary_values", mode="boundary")]


def _int_dtype(call: dict) -> list[Variant]:
    """Integer inputs over the whole range of their dtype or another width; float inputs
    as int32."""
    out: list[Variant] = []
    ints = sorted(
        {
            s["dtype"]
            for s in C.tensors(call)
            if s["dtype"] not in C.FLOAT_DTYPES and s["dtype"] != "bool"
        }
    )
    for dtype in ints:
        out += _full_range_variants(dtype)
    for dtype in C.floats(call):
        out.append(
            Variant("int-dtype", f"int32 instead of {dtype}", "int32", dtypes={dtype: "int32"})
        )
    return out


def _full_range_variants(dtype: str) -> list[Variant]:
    """An integer dtype's values over its whole range, then each other integer dtype's
    instead of it."""
    out: list[Variant] = []
    wider = [t for t in INT_DTYPES if t not in (dtype,)]
    for other in (dtype, *wider[::-1]):
        text = f"{other} values over its whole range" + (
            "" if other == dtype else f" instead of {dtype}"
        )
        out.append(
            Variant(
                "int-dtype",
                text,
                f"{other}_full_range",
                dtypes={dtype: other},
                mode="full-range",
            )
        )
    return out


#: the trigger kinds; ranks: (masks, boundaries, indexing, precision, arith, other)
KINDS = (
    Kind("base", "the learned call with fresh values", (0, 0, 0, 0, 0, 0), _base),
    Kind("size", "one off each captured size", (1, 1, 1, 6, 5, 1), _size),
    Kind("block", "one off each block size", (2, 2, 2, 7, 9, 2), _block),
    Kind("small", "every size tiny (1, 3)", (3, 3, 6, 8, 10, 8), _small),
    Kind("npot", "a size or row width not a power of two", (4, 5, 5, 9, 11, 3), _npot),
    Kind("more-rows", "more rows than the launch had programs", (5, 6, 4, 10, 6, 4), _more_rows),
    Kind("special-values", "a zero, -inf, NaN, +inf or huge row", (6, 9, 11, 3, 3, 6), _special_values),
    Kind("non-contiguous", "sliced and transposed views", (7, 7, 3, 11, 12, 7), _non_contiguous),
    Kind("dtype", "the other float dtypes", (8, 11, 8, 2, 7, 11), _dtype),
    Kind("magnitude", "large magnitudes, both signs", (9, 10, 10, 1, 1, 5), _magnitude),
    Kind("values", "zeros, ones, negative, wide, tiny, constant", (10, 8, 9, 4, 2, 10), _values),
    Kind("boundary-values", "values only at exact boundaries", (11, 4, 12, 12, 4, 9), _boundary_values),
    Kind("int-dtype", "integer inputs over whole ranges", (12, 12, 7, 5, 8, 12), _int_dtype),
)  # fmt: skip
BY_NAME = {k.name: k for k in KINDS}
TRIGGERS = frozenset(BY_NAME)


def order(family: str) -> tuple[str, ...]:
    """The kinds in ``family``'s prior order (most often separating its mutants first)."""
    return tuple(k.name for k in sorted(KINDS, key=lambda k: k.rank(family)))


FAMILY_ORDER = {family: order(family) for family in FAMILIES}
DEFAULT_ORDER = order(OTHER)


def _launch_scalars(call: dict) -> list[Variant]:
    """A recorded launch's integer arguments that equal an extent of its tensors, each one
    short (its grid and tensors as recorded: the last lane masked off, where a bound is off
    by one); the last such argument first."""
    extents = {d for s in C.tensors(call) for d in [*s["shape"], math.prod(s["shape"])]}
    out = []
    for spec in call["args"]:
        if _an_extent(spec, extents):
            value = spec["value"]
            name, short = spec["name"], value - 1
            text = f"{name}={short} instead of {value} (one short of the tensors' extent)"
            out.insert(0, Variant("size", text, f"{name}_{short}", scalars={name: short}))
    return out


def _an_extent(spec: dict, extents: set[int]) -> bool:
    """A named integer argument (no constexpr) above 1 that equals one of ``extents``."""
    value = spec.get("value")
    return (
        spec["kind"] == "value"
        and not spec.get("constexpr")
        and bool(spec.get("name"))
        and isinstance(value, int)
        and not isinstance(value, bool)
        and value > 1
        and value in extents
    )


def variants(call: dict) -> list[Variant]:
    """Every kind's variants of one call, in the table's order, most promising first within
    a kind. A recorded launch keeps its tensors and its grid: only its values change, and
    its integer arguments one short of an extent (``size``)."""
    found = [v for kind in KINDS for v in kind.make(call)]
    if not call.get("launch"):
        return found
    return _launch_scalars(call) + [v for v in found if not v.reshapes]


def kinds(calls: list[dict], family: str, triggers: tuple[str, ...] = ()) -> list[str]:
    """The trigger kinds the calls offer a mutant of ``family``, in its order: what a
    search with an unlimited budget would try (``inputs.candidates`` stops at its budget)."""
    offered = {v.kind for c in calls if c.get("launches") for v in variants(c)}
    return [k for k in order(family) if k in offered and (not triggers or k in triggers)]
