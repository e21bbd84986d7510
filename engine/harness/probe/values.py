"""What the probe's two sides share (``capturing``, ``comparing``): the protocol's
constants, arguments described, and outputs compared, written as golden values,
fingerprinted and shipped whole."""

from __future__ import annotations

import base64
import hashlib
import math
from typing import Any

VERSION = "9"
MARKER = "mutant-gate-probe:"
MAX_GOLDEN_ELEMENTS = 1 << 14  # expected values a compare job's answer holds in all (~0.4 MB)
MIN_GOLDEN_ELEMENTS = 1 << 12  # ... and each of its mutants at least
#: in the interpreter, a job of the original alone sends its outputs on its candidates
#: back whole (exactly, ``_ship``), the first ones, up to this many bytes of text in all:
#: the compare jobs get them, and a mutant that differs from them needs no run of the
#: original of its own (the outputs of a hit become its test's expected values, and the
#: test's proof runs the original again against them). A job's answer may hold 1 MiB
#: (``harness/worker.RESULT_LIMIT``): the rest of it is the answer's own.
SHIP_JOB_BYTES = 640 << 10


# -- describing values ---------------------------------------------------------
def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def describe(value: Any) -> dict:
    """A JSON description of one argument, enough to build a similar one."""
    import torch

    if isinstance(value, torch.Tensor):
        return _describe_tensor(value)
    if isinstance(value, torch.dtype):
        return {"kind": "dtype", "value": _dtype_name(value)}
    if value is None or isinstance(value, bool | int | float | str):
        return _describe_scalar(value)
    if isinstance(value, tuple | list) and _all_numbers(value):
        return {"kind": "value", "value": list(value), "sequence": type(value).__name__}
    return {"kind": "opaque", "type": type(value).__name__}


def _describe_scalar(value: Any) -> dict:
    """``describe`` of None, a bool, number or string: opaque where a float is not finite."""
    if isinstance(value, float) and not math.isfinite(value):
        return {"kind": "opaque", "type": "float", "repr": repr(value)}
    return {"kind": "value", "value": value}


def _all_numbers(values: tuple | list) -> bool:
    """Whether every item is an int or a float (no bool)."""
    return all(isinstance(v, bool | int | float) and not isinstance(v, bool) for v in values)


def _describe_tensor(value: Any) -> dict:
    """``describe`` of a tensor: its shape, dtype, layout, device and range of values."""
    spec: dict = {
        "kind": "tensor",
        "shape": list(value.shape),
        "dtype": _dtype_name(value.dtype),
        "contiguous": bool(value.is_contiguous()),
        "device": value.device.type,
        "min": None,
        "max": None,
    }
    if value.numel():
        spec["min"], spec["max"] = _value_range(value.detach().reshape(-1))
    return spec


def _value_range(flat: Any) -> tuple[Any, Any]:
    """(min, max) of a flat tensor's values: 0 and 1 for booleans, the finite ones' for
    floats (None where none is), none for complex numbers."""
    import torch

    if flat.dtype == torch.bool:
        return 0, 1
    if flat.is_floating_point():
        finite = flat[torch.isfinite(flat)].double()
        if finite.numel():
            return float(finite.min()), float(finite.max())
        return None, None
    if not flat.is_complex():
        return int(flat.min()), int(flat.max())
    return None, None


def _difference(expected: Any, actual: Any) -> str | None:
    import torch

    if isinstance(expected, torch.Tensor) or isinstance(actual, torch.Tensor):
        return _tensor_difference(expected, actual)
    if isinstance(expected, tuple | list) and isinstance(actual, tuple | list):
        return _sequence_difference(expected, actual)
    if isinstance(expected, float | int) and isinstance(actual, float | int):
        return _not_close(actual, expected)
    return None if expected == actual else f"{actual!r} instead of {expected!r}"


def _not_close(actual: Any, expected: Any) -> str | None:
    """Why ``actual`` is not ``expected`` within assert_close's tolerance, or None."""
    import torch

    try:
        torch.testing.assert_close(actual, expected, equal_nan=True)
    except AssertionError as exc:
        return " ".join(str(exc).split())[:400]
    return None


def _tensor_difference(expected: Any, actual: Any) -> str | None:
    """``_difference`` where either side is a tensor."""
    import torch

    if not (isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor)):
        return f"{type(actual).__name__} instead of {type(expected).__name__}"
    if expected.shape != actual.shape:
        return f"shape {tuple(actual.shape)} instead of {tuple(expected.shape)}"
    if expected.dtype != actual.dtype:
        return f"dtype {_dtype_name(actual.dtype)} instead of {_dtype_name(expected.dtype)}"
    return _not_close(actual, expected)


def _sequence_difference(expected: list | tuple, actual: list | tuple) -> str | None:
    """``_difference`` of two sequences: their lengths, then the first item that differs."""
    if len(expected) != len(actual):
        return f"{len(actual)} results instead of {len(expected)}"
    for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
        why = _difference(e, a)
        if why:
            return f"[{i}] {why}"
    return None


def _changed(before: Any, after: Any) -> bool:
    return _difference(before, after) is not None


def _values(flat: Any) -> list:
    import torch

    if flat.is_floating_point():
        return flat.double().tolist()
    if flat.dtype == torch.bool:
        return [bool(v) for v in flat.tolist()]
    return flat.tolist()


#: assert_close's default (rtol, atol) per dtype, to find where a mutant's output differs
_TOLERANCE = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5)}


def _sample(t: Any, actual: Any, budget: int) -> dict:
    """Expected values at ``budget`` positions of a big output: where the mutant's output
    differs (up to a quarter of them, first first) and a seeded uniform sample."""
    import torch

    flat = t.reshape(-1)
    picks = torch.empty(0, dtype=torch.long)
    if isinstance(actual, torch.Tensor) and actual.shape == t.shape and actual.dtype == t.dtype:
        other = actual.detach().cpu().reshape(-1)
        if flat.is_floating_point():
            rtol, atol = _TOLERANCE.get(_dtype_name(t.dtype), (1e-7, 1e-7))
            same = torch.isclose(
                other.double(), flat.double(), rtol=rtol, atol=atol, equal_nan=True
            )
        else:
            same = other == flat
        picks = torch.nonzero(~same).reshape(-1)[: budget // 4]
    generator = torch.Generator().manual_seed(0)
    spread = torch.randperm(flat.numel(), generator=generator)[: budget - picks.numel()]
    where = torch.unique(torch.cat([picks, spread]))  # sorted
    return {
        "kind": "sample",
        "dtype": _dtype_name(t.dtype),
        "shape": list(t.shape),
        "indices": where.tolist(),
        "values": _values(flat[where]),
    }


def golden(value: Any, actual: Any = None, budget: int | None = None) -> dict:
    """JSON form of an output (exact: every float dtype round-trips through a double).

    A tensor of more than ``budget`` elements keeps only a sample of its values
    (``_sample``; ``actual``, the mutant's output, says where it differs)."""
    import torch

    if isinstance(value, torch.Tensor):
        return _golden_tensor(value, actual, budget)
    if isinstance(value, tuple | list):
        return _golden_sequence(value, actual, budget)
    if value is None:
        return {"kind": "none"}
    if isinstance(value, bool | int | float | str):
        return {"kind": "scalar", "value": value}
    raise TypeError(f"cannot write a {type(value).__name__} as an expected value")


def _golden_tensor(value: Any, actual: Any, budget: int | None) -> dict:
    """``golden`` of a tensor: all its values, or a sample of them over ``budget``."""
    t = value.detach().cpu()
    if budget is not None and t.numel() > budget:
        return _sample(t, actual, budget)
    return {
        "kind": "tensor",
        "dtype": _dtype_name(t.dtype),
        "shape": list(t.shape),
        "values": _values(t.reshape(-1)),
    }


def _golden_sequence(value: tuple | list, actual: Any, budget: int | None) -> dict:
    """``golden`` of a tuple or list, item by item (beside the mutant's where it matches)."""
    others = actual if isinstance(actual, tuple | list) and len(actual) == len(value) else None
    return {
        "kind": "sequence",
        "items": [golden(v, others[i] if others else None, budget) for i, v in enumerate(value)],
    }


def _elements(value: dict) -> int:
    if value["kind"] in ("tensor", "sample"):
        return len(value["values"])
    if value["kind"] == "sequence":
        return sum(_elements(v) for v in value["items"])
    return 1


def _golden_size(value: Any) -> int | None:
    """How many values ``golden(value)`` holds, or None where it cannot be written."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, tuple | list):
        sizes = [_golden_size(v) for v in value]
        return None if None in sizes else sum(s for s in sizes if s is not None)
    if value is None or isinstance(value, bool | int | float | str):
        return 1
    return None


def _fits(outputs: dict, limit: int = MAX_GOLDEN_ELEMENTS) -> bool:
    sizes = [_golden_size(v) for v in outputs.values()]
    return None not in sizes and sum(s for s in sizes if s is not None) <= limit


def _tensors(value: Any) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return 1
    if isinstance(value, tuple | list):
        return sum(_tensors(v) for v in value)
    return 0


def _golden_outputs(outputs: dict, actual: dict | None, limit: int) -> dict:
    """Every output whole where they fit together in ``limit`` values, else each big
    tensor sampled."""
    budget = None
    if not _fits(outputs, limit):
        budget = limit // (2 * max(1, sum(_tensors(v) for v in outputs.values())))
    return {name: golden(v, (actual or {}).get(name), budget) for name, v in outputs.items()}


def _feed(h: Any, value: Any) -> bool:
    """Feed ``value`` exactly (dtype, shape, bytes) into the hash ``h``; False where it
    has no exact form (an object the compare could only judge by ``==``)."""
    import torch

    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous().reshape(-1)
        h.update(f"T{_dtype_name(value.dtype)}{tuple(value.shape)}:".encode())
        h.update(t.view(torch.uint8).numpy().tobytes())
        return True
    if isinstance(value, tuple | list):
        h.update(f"S{len(value)}:".encode())
        return all(_feed(h, v) for v in value)
    if value is None or isinstance(value, bool | int | float | str):
        h.update(f"V{type(value).__name__}:{value!r};".encode())
        return True
    return False


def digest(outputs: dict) -> str | None:
    """An exact fingerprint of a run's outputs: equal digests mean bit-identical outputs
    (no tolerance needed to call them the same); None where one cannot be taken."""
    h = hashlib.sha256()
    for name in sorted(outputs):
        h.update(f"{name}=".encode())
        if not _feed(h, outputs[name]):
            return None
    return h.hexdigest()[:32]


def _ship(kept: dict, room: int = SHIP_JOB_BYTES) -> dict | None:
    """The original's outputs exactly (dtype, shape, bytes as base64), to travel in a
    request; None where one is not a tensor or their text would pass ``room`` bytes."""
    import torch

    if not kept or not all(isinstance(v, torch.Tensor) for v in kept.values()):
        return None
    if sum(_text_bytes(v.numel() * v.element_size()) for v in kept.values()) > room:
        return None
    shipped = {}
    for name, t in kept.items():
        flat = t.detach().cpu().contiguous().reshape(-1)
        shipped[name] = {
            "dtype": _dtype_name(t.dtype),
            "shape": list(t.shape),
            "data": base64.b64encode(flat.view(torch.uint8).numpy().tobytes()).decode("ascii"),
        }
    return shipped


def _text_bytes(raw: int) -> int:
    return 4 * math.ceil(raw / 3)  # base64


def _unship(shipped: dict) -> dict:
    """``_ship``'s outputs back as tensors."""
    import torch

    outputs = {}
    for name, value in shipped.items():
        raw = bytearray(base64.b64decode(value["data"]))
        dtype = getattr(torch, value["dtype"].removeprefix("torch."))
        flat = (
            torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
        )
        outputs[name] = flat.view(dtype).reshape(value["shape"])
    return outputs
