"""Compiled mode takes an earlier binary for a kernel whose IR is one already compiled
(``harness/same_ir.py``). Triton compiles for a CUDA target here without a GPU, so the whole
pipeline down to the cubin runs for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from mutant_gate.engine.harness.same_ir import without_locations

ORIGINAL = """
import triton
import triton.language as tl


@triton.jit
def scale(x_ptr, n, BLOCK: tl.constexpr, FLAG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    if FLAG:
        x = x + 1
    tl.store(x_ptr + offs, x * 2, mask=offs < n)
"""
# a mutant in the branch FLAG cuts away when False: the same IR there, not when True
MUTANT = ORIGINAL.replace("x = x + 1", "x = x - 1")

SCRIPT = """
import importlib, json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from mutant_gate.engine.harness import compiles, same_ir

same_ir.install()
same_ir.install()  # twice: still one watch

def build(where, flag):
    sys.path.insert(0, where)
    sys.modules.pop("kern", None)
    kern = importlib.import_module("kern")
    sys.path.remove(where)
    sig = {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr", "FLAG": "constexpr"}
    source = ASTSource(kern.scale, sig, {(2,): 16, (3,): flag})
    return kern, triton.compiler.compile(source, GPUTarget("cuda", 80, 32))

out = {}
with compiles.Compiles() as clock:
    _, off = build(sys.argv[1], False)
    _, on = build(sys.argv[1], True)
    mutant, off_m = build(sys.argv[2], False)
    _, on_m = build(sys.argv[2], True)
out["fresh"] = clock.count
out["reused"] = same_ir.REUSED[0]
out["off_same_binary"] = off_m.asm["cubin"] == off.asm["cubin"]
out["off_same_hash"] = off_m.hash == off.hash
out["off_src_is_mutant"] = off_m.src.fn is mutant.scale
out["on_same_binary"] = on_m.asm["cubin"] == on.asm["cubin"]
print(json.dumps(out))
"""


def _run(tmp_path, *dirs: str) -> dict:
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *dirs],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_mutant_the_specialisation_cuts_away_takes_the_originals_binary(tmp_path):
    for name, text in (("original", ORIGINAL), ("mutant", MUTANT)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "kern.py").write_text(text)
    out = _run(tmp_path, str(tmp_path / "original"), str(tmp_path / "mutant"))
    # FLAG=False: the mutant's IR is the original's: no compile past the first stage, the
    # original's very binary and cache entry, launched as the mutant's own function
    assert out["reused"] == 1
    assert out["off_same_binary"] and out["off_same_hash"] and out["off_src_is_mutant"]
    # FLAG=True: the change is in the IR, so it is compiled, to another binary
    assert out["fresh"] == 3
    assert not out["on_same_binary"]


def test_the_same_source_twice_is_one_compile_and_no_reuse(tmp_path):
    (tmp_path / "original").mkdir()
    (tmp_path / "original" / "kern.py").write_text(ORIGINAL)
    out = _run(tmp_path, str(tmp_path / "original"), str(tmp_path / "original"))
    # Triton's own cache answers the second time: nothing for the watch to do
    assert (out["fresh"], out["reused"]) == (2, 0)


def test_locations_go_and_nothing_else():
    text = (
        '#loc = loc("/a/kern.py":6:1)\n'
        "module {\n"
        '  tt.func public @scale(%x: !tt.ptr<f32> loc("x"(#loc))) {\n'
        "    %0 = arith.constant 2 : i32 loc(callsite(#loc1 at #loc2))\n"
        "    %block_loc = arith.constant 3 : i32 loc(#loc3)\n"
        "  } loc(#loc)\n"
        "} loc(#loc)\n"
        '#loc1 = loc("/a/kern.py":11:28)\n'
    )
    assert without_locations(text) == (
        "module {\n"
        "  tt.func public @scale(%x: !tt.ptr<f32>) {\n"
        "    %0 = arith.constant 2 : i32\n"
        "    %block_loc = arith.constant 3 : i32\n"
        "  }\n"
        "}\n"
    )


GONE = """
import importlib, json, shutil, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from mutant_gate.engine.harness import same_ir

same_ir.install()

def build(where):
    sys.path.insert(0, where)
    sys.modules.pop("kern", None)
    kern = importlib.import_module("kern")
    sys.path.remove(where)
    sig = {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr", "FLAG": "constexpr"}
    return triton.compiler.compile(
        ASTSource(kern.scale, sig, {(2,): 16, (3,): False}), GPUTarget("cuda", 80, 32)
    )

first = build(sys.argv[1])
shutil.rmtree(first.metadata_group[next(iter(first.metadata_group))].rsplit("/", 1)[0])
second = build(sys.argv[2])  # the same IR, its earlier binary gone: compiled, stored anew
third = build(sys.argv[3])  # the same IR again: takes the second's
print(json.dumps({"reused": same_ir.REUSED[0], "third_is_second": third.hash == second.hash,
                  "second_is_first": second.hash == first.hash}))
"""


def test_an_earlier_binary_gone_from_the_cache_is_compiled_again_and_stored(tmp_path):
    texts = {"a": ORIGINAL, "b": MUTANT, "c": ORIGINAL.replace("x = x + 1", "x = x * 3")}
    for name, text in texts.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "kern.py").write_text(text)
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-c", GONE, *(str(tmp_path / n) for n in texts)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"reused": 1, "third_is_second": True, "second_is_first": False}


BOUND_BEFORE = """
import importlib, json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from mutant_gate.engine.harness import same_ir

same_ir.install()

def source(where):
    sys.path.insert(0, where)
    sys.modules.pop("kern", None)
    kern = importlib.import_module("kern")
    sys.path.remove(where)
    sig = {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr", "FLAG": "constexpr"}
    return ASTSource(kern.scale, sig, {(2,): 16, (3,): False})

target = GPUTarget("cuda", 80, 32)
first = triton.compiler.compile(source(sys.argv[1]), target)
# the name Triton bound before the install: the same IR, compiled as it was, no stop
again = triton.compile(source(sys.argv[2]), target)
print(json.dumps({"reused": same_ir.REUSED[0], "own": again.hash != first.hash,
                  "patched": triton.compile is not triton.compiler.compile}))
"""


def test_a_compile_through_a_name_bound_before_the_install_runs_as_it_was(tmp_path):
    for name, text in (("original", ORIGINAL), ("mutant", MUTANT)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "kern.py").write_text(text)
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-c", BOUND_BEFORE, str(tmp_path / "original"), str(tmp_path / "mutant")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"reused": 0, "own": True, "patched": True}
