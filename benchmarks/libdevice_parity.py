"""libdevice on a GPU against mutant-gate's interpreter implementations (run on a CUDA machine).

Usage: python benchmarks/libdevice_parity.py [OUT.md]
       TRITON_INTERPRET=1 python benchmarks/libdevice_parity.py   (no GPU: a self-check)

For every function of Triton's CUDA libdevice that ``engine/harness/libdevice.py``
implements and that takes float32 (or int32) arguments, compiles a kernel that applies
it to fixed inputs, runs it on the GPU, applies the interpreter implementation to the
same inputs on the host, and prints a markdown table: how far apart they are (in
float32 ulps, or exact for integers), and which functions could not be compared.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import triton.language.extra.cuda.libdevice as cuda

from mutant_gate.engine.harness import libdevice

N = 64
#: Without CUDA (TRITON_INTERPRET=1 and the shims installed) the same comparison runs in
#: the interpreter: a self-check of this script, where every row should be exact.
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu":
    from mutant_gate.engine.harness import shims

    shims.install()
TEMPLATE = """
import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice as ld

@triton.jit
def kernel({params}, out, n, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    m = o < n
{loads}
    tl.store(out + o, ld.{name}({args}), mask=m)
"""


def inputs(kind: str, arity: int, position: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * arity + position)
    if kind in ("int32", "int64"):
        return torch.randint(-(2**20), 2**20, (N,), generator=g, dtype=getattr(torch, kind))
    if kind in ("uint32", "uint64"):
        return torch.randint(0, 2**20, (N,), generator=g, dtype=torch.int64).to(
            getattr(torch, kind)
        )
    base = torch.empty(N, dtype=getattr(torch, kind)).uniform_(0.05, 4.0, generator=g)
    if position == 0:  # signs, halves, specials on the first argument
        base[: N // 2] *= -1
        base[:8] = torch.tensor([0.5, 1.5, 2.5, -0.5, 0.0, -0.0, 1.0, 3.0])
    return base


def kernel_for(name: str, arity: int, folder: Path):
    params = ", ".join(f"a{i}" for i in range(arity))
    loads = "\n".join(f"    x{i} = tl.load(a{i} + o, mask=m)" for i in range(arity))
    args = ", ".join(f"x{i}" for i in range(arity))
    path = folder / f"k_{name}.py"
    path.write_text(TEMPLATE.format(params=params, loads=loads, name=name, args=args))
    spec = importlib.util.spec_from_file_location(f"k_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


def ulps(a: np.ndarray, b: np.ndarray) -> float:
    """The largest distance in units in the last place (float32 or float64)."""
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    width = a.dtype.itemsize * 8
    ia = a.view(np.int32 if width == 32 else np.int64).astype(object)
    ib = b.view(np.int32 if width == 32 else np.int64).astype(object)
    top = -(2 ** (width - 1))
    ia = np.where(ia < 0, top - ia, ia)
    ib = np.where(ib < 0, top - ib, ib)
    diff = np.where(same, 0, np.abs(ia - ib))
    return float(diff.max()) if diff.size else 0.0


TORCH = {
    "fp32": torch.float32, "fp64": torch.float64, "int32": torch.int32, "int64": torch.int64,
    "uint32": torch.uint32, "uint64": torch.uint64,
}  # fmt: skip
_ENTRY = re.compile(
    r'\(((?:core\.dtype\("\w+"\),\s*)+)\):\s*\("(__nv_\w+)",\s*core\.dtype\("(\w+)"\)\)'
)


def signatures(real) -> list[tuple[list[str], str, str]]:
    """(argument types, symbol, result type) of a CUDA libdevice function, from its source."""
    source = inspect.getsource(real.__wrapped__)
    return [
        (re.findall(r'dtype\("(\w+)"\)', types), symbol, ret)
        for types, symbol, ret in _ENTRY.findall(source)
    ]


def arguments(types: list[str], arity: int) -> list[torch.Tensor]:
    kinds = {"fp32": "float32", "fp64": "float64"}
    return [inputs(kinds.get(t, t), arity, i) for i, t in enumerate(types)]


def compare(gpu: np.ndarray, host: np.ndarray) -> str:
    if gpu.dtype in (np.float32, np.float64):
        distance = ulps(gpu, host)
        return "exact" if distance == 0 else f"{distance:g} ulp"
    if np.array_equal(gpu, host):
        return "exact"
    return f"differs ({int((gpu != host).sum())} of {N})"


def main(argv: list[str]) -> None:
    rows, skipped = [], []
    folder = Path(tempfile.mkdtemp())
    for name in sorted(libdevice.IMPLEMENTED):
        real = getattr(cuda, name, None)
        if real is None:
            continue
        arity = len(inspect.signature(real.__wrapped__).parameters) - 1
        kernel = kernel_for(name, arity, folder)
        for types, symbol, ret in signatures(real):
            if not all(t in TORCH for t in types) or ret not in TORCH:
                skipped.append(f"{symbol} ({', '.join(types)} -> {ret})")
                continue
            args = arguments(types, arity)
            out = torch.empty(N, dtype=TORCH[ret], device=DEVICE)
            try:
                kernel[(1,)](*[a.to(DEVICE) for a in args], out, N, BLOCK=N)
                if DEVICE == "cuda":
                    torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001 - recorded, not fatal
                skipped.append(f"{symbol} ({repr(exc).splitlines()[0][:100]})")
                continue
            gpu = out.cpu().numpy()
            with np.errstate(all="ignore"):
                host = np.asarray(libdevice.IMPLEMENTED[name](*[a.numpy() for a in args]))
            rows.append((name, symbol, ", ".join(types), compare(gpu, host.astype(gpu.dtype))))
    lines = ["| function | symbol | arguments | GPU vs interpreter |", "|---|---|---|---|"]
    lines += [f"| {n} | {s} | {t} | {v} |" for n, s, t, v in rows]
    exact = sum(1 for *_, v in rows if v == "exact")
    close = sum(1 for *_, v in rows if v.endswith("ulp") and float(v.split()[0]) <= 4)
    apart = [
        f"{n} ({t}: {v})"
        for n, _, t, v in rows
        if v != "exact" and not (v.endswith("ulp") and float(v.split()[0]) <= 4)
    ]
    lines += [
        "",
        f"{len(rows)} symbols compared: {exact} exact, {close} within 4 ulp, "
        f"{len(apart)} further apart; not compared: {len(skipped)}",
        "further apart: " + "; ".join(apart),
    ]
    if skipped:
        lines.append("not compared: " + "; ".join(skipped))
    text = "\n".join(lines)
    print(text)
    if argv:
        Path(argv[0]).write_text(text + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
