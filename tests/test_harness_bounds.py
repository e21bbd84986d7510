"""The interpreter bounds checker (engine/harness/bounds.py), on the real
Triton interpreter.  TRITON_INTERPRET must be set before triton is imported,
so every case runs in one subprocess script whose JSON report the tests read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

KERNELS = textwrap.dedent(
    """
    import triton
    import triton.language as tl


    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + y, mask=mask)


    @triton.jit
    def add_load_nomask(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs)  # LOAD_NOMASK
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + y, mask=mask)


    @triton.jit
    def add_store_nomask(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + y)  # STORE_NOMASK


    @triton.jit
    def add_le_mask(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs <= n
        x = tl.load(x_ptr + offs, mask=mask)  # LOAD_LE
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + y, mask=mask)


    @triton.jit
    def shifted_copy(x_ptr, out_ptr, n, shift, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        v = tl.load(x_ptr + offs - shift, mask=mask)  # LOAD_SHIFT
        tl.store(out_ptr + offs, v, mask=mask)


    @triton.jit
    def wild_masked_off(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK).to(tl.int64)
        mask = offs < n
        wild = tl.where(mask, offs, offs * 1000000007 - 99999999999)
        v = tl.load(x_ptr + wild, mask=mask, other=0.0)
        tl.store(out_ptr + wild, v, mask=mask)


    @triton.jit
    def copy_2d(a_ptr, out_ptr, M, N, sam, san, som, son, BM: tl.constexpr, BN: tl.constexpr):
        rm = tl.arange(0, BM)[:, None]
        rn = tl.arange(0, BN)[None, :]
        mask = (rm < M) & (rn < N)
        v = tl.load(a_ptr + rm * sam + rn * san, mask=mask, other=0.0)
        tl.store(out_ptr + rm * som + rn * son, v, mask=mask)


    @triton.jit
    def scalar_double(p_ptr, out_ptr):
        v = tl.load(p_ptr)
        tl.store(out_ptr, v * 2)


    @triton.jit
    def histogram_atomic(x_ptr, bins_ptr, n, NBINS, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        v = tl.load(x_ptr + offs, mask=mask, other=0)
        tl.atomic_add(bins_ptr + v % NBINS, 1, mask=mask)  # ATOMIC
    """
)

DRIVER = textwrap.dedent(
    """
    import json
    import os
    import sys

    assert os.environ.get("TRITON_INTERPRET") == "1"
    import torch
    import triton
    import triton.runtime.interpreter as interp

    from mutant_gate.engine.harness import bounds

    original_load = interp.InterpreterBuilder.create_masked_load
    bounds.install()
    bounds.install()  # idempotent
    patched_once = interp.InterpreterBuilder.create_masked_load is not original_load

    import kernels as k

    torch.manual_seed(0)
    out = {"patched": patched_once}


    def case(name, fn):
        bounds.reset()
        result = {"error": None, "value": None}
        try:
            result["value"] = fn()
        except Exception as e:  # the calling code catches: the record must survive
            result["error"] = f"{type(e).__name__}: {e}"
        result["violations"] = bounds.violations()
        result["internal"] = bounds.internal_errors()
        out[name] = result


    def vadd(kernel, n, block=256):
        x, y = torch.rand(n), torch.rand(n)
        o = torch.zeros(n)
        kernel[(triton.cdiv(n, block),)](x, y, o, n, BLOCK=block)
        return bool(torch.allclose(o, x + y))


    case("ok", lambda: vadd(k.add_kernel, 1000))
    case("load_nomask", lambda: vadd(k.add_load_nomask, 1000))
    case("store_nomask", lambda: vadd(k.add_store_nomask, 1000))
    case("nomask_block_multiple", lambda: vadd(k.add_load_nomask, 1024))
    case("le_mask", lambda: vadd(k.add_le_mask, 1000))


    def shifted(base_len, start, n, shift):
        base = torch.rand(base_len)
        x = base[start:start + n]  # a view with a storage offset
        o = torch.zeros(n)
        k.shifted_copy[(1,)](x, o, n, shift, BLOCK=128)
        return bool(torch.equal(o[shift:], x[: n - shift]))


    case("view_offset_ok", lambda: shifted(120, 10, 100, 0))
    case("before_start", lambda: shifted(100, 0, 100, 3))


    def wild():
        x, o = torch.rand(10), torch.zeros(10)
        k.wild_masked_off[(1,)](x, o, 10, BLOCK=16)
        return bool(torch.equal(o, x))


    case("wild_masked_off", wild)


    def view_2d():
        a = torch.rand(64, 64)
        v = a[:, :50]  # non-contiguous: row stride 64
        o = torch.zeros(64, 50)
        sa, so = v.stride(), o.stride()
        k.copy_2d[(1,)](v, o, 64, 50, sa[0], sa[1], so[0], so[1], BM=64, BN=64)
        return bool(torch.equal(o, v))


    case("view_2d", view_2d)


    def scalar():
        base = torch.arange(10, dtype=torch.float32)
        o = torch.zeros(3)
        k.scalar_double[(1,)](base[7:8], o[2:])
        return o.tolist()


    case("scalar", scalar)


    def atomic(nbins_arg):
        x = torch.arange(20, dtype=torch.int32)
        bins = torch.zeros(4, dtype=torch.int32)
        k.histogram_atomic[(1,)](x, bins, 20, nbins_arg, BLOCK=32)
        return bins.tolist()


    case("atomic_ok", lambda: atomic(4))
    case("atomic_oob", lambda: atomic(6))

    bounds.uninstall()
    out["restored"] = interp.InterpreterBuilder.create_masked_load is original_load
    case("after_uninstall", lambda: vadd(k.add_kernel, 1000))
    print("JSON" + json.dumps(out))
    """
)


def _line(marker: str) -> int:
    for i, text in enumerate(KERNELS.splitlines(), start=1):
        if marker in text:
            return i
    raise AssertionError(marker)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("bounds")
    (d / "kernels.py").write_text(KERNELS)
    (d / "driver.py").write_text(DRIVER)
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, "driver.py"], cwd=d, env=env, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("JSON"))
    return json.loads(line[4:])


def _clean(r):
    assert r["error"] is None, r["error"]
    assert r["violations"] == []
    assert r["internal"] == []


def test_install_is_idempotent_and_uninstall_restores(report):
    assert report["patched"]
    assert report["restored"]
    _clean(report["after_uninstall"])


def test_correct_mask_passes(report):
    _clean(report["ok"])
    assert report["ok"]["value"] is True


def test_dropped_load_mask_fires(report):
    r = report["load_nomask"]
    assert r["error"] is not None and "BoundsViolation" in r["error"]
    (v,) = r["violations"]
    assert v["kernel"] == "add_load_nomask"
    assert v["file"] == "kernels.py"
    assert v["line"] == _line("# LOAD_NOMASK")
    assert v["argument"] == "x_ptr"
    assert v["op"] == "load"
    assert v["direction"] == "past end"
    assert v["elements_out"] == 24
    assert v["lanes_out"] == 24
    assert v["program_id"] == [3, 0, 0]
    assert v["message"] == (
        f"out-of-bounds load in kernel add_load_nomask (kernels.py:{_line('# LOAD_NOMASK')}): "
        "argument x_ptr (numel 1000, float32) accessed 24 elements past its end "
        "(program_id (3, 0, 0), 24 of 256 active lanes out of bounds)"
    )
    assert v["message"] in r["error"]


def test_dropped_store_mask_names_output(report):
    (v,) = report["store_nomask"]["violations"]
    assert (v["argument"], v["op"], v["elements_out"]) == ("out_ptr", "store", 24)
    assert v["line"] == _line("# STORE_NOMASK")


def test_dropped_mask_on_block_multiple_is_in_bounds(report):
    _clean(report["nomask_block_multiple"])
    assert report["nomask_block_multiple"]["value"] is True


def test_off_by_one_mask_fires_one_element_past_end(report):
    (v,) = report["le_mask"]["violations"]
    assert (v["argument"], v["elements_out"], v["lanes_out"]) == ("x_ptr", 1, 1)
    assert v["line"] == _line("# LOAD_LE")


def test_negative_offset_fires_before_start(report):
    (v,) = report["before_start"]["violations"]
    assert (v["argument"], v["direction"], v["elements_out"]) == ("x_ptr", "before start", 3)
    assert "3 elements before its start" in v["message"]


def test_correct_kernels_on_views_scalars_and_masked_off_lanes_pass(report):
    for name in ("view_offset_ok", "wild_masked_off", "view_2d", "atomic_ok"):
        _clean(report[name])
    for name in ("view_offset_ok", "wild_masked_off", "view_2d"):
        assert report[name]["value"] is True, name
    _clean(report["scalar"])
    assert report["scalar"]["value"] == [0.0, 0.0, 14.0]
    assert report["atomic_ok"]["value"] == [5, 5, 5, 5]


def test_atomic_out_of_bounds_fires(report):
    (v,) = report["atomic_oob"]["violations"]
    assert (v["argument"], v["op"], v["elements_out"]) == ("bins_ptr", "atomic_rmw", 2)
    assert v["line"] == _line("# ATOMIC")
