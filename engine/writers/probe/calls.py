"""What a captured call is made of, read the same way by the trigger kinds and the inputs.

A captured call (``harness/probe/capturing.capture``) is a function name and its
arguments: tensors as shape, dtype and value range; scalars, tuples and dtypes as
values; with the block sizes (power-of-two integer constexprs) and grids of the
launches it made. A *size* is any tensor dimension above 1.
"""

from __future__ import annotations

import math

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
#: launch options recorded with the constexprs: not block sizes
LAUNCH_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg"})


def all_args(call: dict) -> list[dict]:
    return list(call["args"]) + list(call["kwargs"].values())


def tensors(call: dict) -> list[dict]:
    return [s for s in all_args(call) if s["kind"] == "tensor"]


def sizes(call: dict) -> list[int]:
    """Every tensor dimension above 1, largest first."""
    dims: set[int] = set()
    for spec in tensors(call):
        dims.update(d for d in spec["shape"] if d > 1)
    return sorted(dims, reverse=True)


def elements(call: dict, changed: dict[int, int]) -> int:
    """The elements of all the call's tensors with the sizes in ``changed`` changed."""
    return sum(math.prod(changed.get(d, d) for d in s["shape"]) for s in tensors(call))


def floats(call: dict) -> list[str]:
    """The float dtypes of the call's tensors."""
    return sorted({s["dtype"] for s in tensors(call)} & set(FLOAT_DTYPES))


def blocks(call: dict) -> list[int]:
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


def widths(call: dict) -> list[int]:
    """The last dimension of each input tensor of two or more dimensions (a row width)."""
    found = {s["shape"][-1] for s in tensors(call) if len(s["shape"]) >= 2 and s["shape"][-1] > 1}
    return sorted(found, reverse=True)


def rows_dims(call: dict) -> list[int]:
    """The leading dimension of each input tensor of two or more dimensions (its rows)."""
    found = {s["shape"][0] for s in tensors(call) if len(s["shape"]) >= 2 and s["shape"][0] >= 1}
    return sorted(found)


def programs(call: dict) -> int:
    """The most programs any launch of the call had along the grid's first axis (0: not
    captured)."""
    return max((int(g[0]) for g in call.get("grids", ()) if g), default=0)


def grid(call: dict) -> tuple[int, ...]:
    """A recorded launch's grid as its call writes it: trailing axes of 1 left out."""
    found = [int(g) for g in call["grid"]]
    while len(found) > 1 and found[-1] == 1:
        found.pop()
    return tuple(found)


def pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0
