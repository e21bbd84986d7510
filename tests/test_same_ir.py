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

#: every script's start: the watch installed, and ``source(where, flag)``, the ASTSource of
#: the copy of ``kern.py`` in the folder ``where`` (imported afresh) for FLAG=flag
PRELUDE = """
import importlib, json, shutil, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from mutant_gate.engine.harness import compiles, same_ir

same_ir.install()
target = GPUTarget("cuda", 80, 32)

def load(where):
    sys.path.insert(0, where)
    sys.modules.pop("kern", None)
    kern = importlib.import_module("kern")
    sys.path.remove(where)
    return kern

def source(where, flag=False):
    sig = {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr", "FLAG": "constexpr"}
    return ASTSource(load(where).scale, sig, {(2,): 16, (3,): flag})
"""

BOTH_FLAGS = """
same_ir.install()  # twice: still one watch
out = {}
with compiles.Compiles() as clock:
    off = triton.compiler.compile(source(sys.argv[1], False), target)
    on = triton.compiler.compile(source(sys.argv[1], True), target)
    mutant_off = source(sys.argv[2], False)
    off_m = triton.compiler.compile(mutant_off, target)
    on_m = triton.compiler.compile(source(sys.argv[2], True), target)
out["fresh"] = clock.record()["compiles"]["count"]
out["reused"] = same_ir.REUSED[0]
out["off_same_binary"] = off_m.asm["cubin"] == off.asm["cubin"]
out["off_same_hash"] = off_m.hash == off.hash
out["off_src_is_mutant"] = off_m.src.fn is mutant_off.fn
out["on_same_binary"] = on_m.asm["cubin"] == on.asm["cubin"]
print(json.dumps(out))
"""


def _run(tmp_path, script: str, *texts: str) -> dict:
    """``PRELUDE + script`` in a fresh process, its arguments the folders it wrote each of
    ``texts`` into as ``kern.py``; the JSON its last line prints."""
    folders = []
    for n, text in enumerate(texts):
        folder = tmp_path / f"k{n}"
        folder.mkdir(exist_ok=True)
        (folder / "kern.py").write_text(text)
        folders.append(str(folder))
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE + script, *folders],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_mutant_the_specialisation_cuts_away_takes_the_originals_binary(tmp_path):
    out = _run(tmp_path, BOTH_FLAGS, ORIGINAL, MUTANT)
    # FLAG=False: the mutant's IR is the original's: no compile past the first stage, the
    # original's very binary and cache entry, launched as the mutant's own function
    assert out["reused"] == 1
    assert out["off_same_binary"] and out["off_same_hash"] and out["off_src_is_mutant"]
    # FLAG=True: the change is in the IR, so it is compiled, to another binary
    assert out["fresh"] == 3
    assert not out["on_same_binary"]


def test_the_same_source_twice_is_one_compile_and_no_reuse(tmp_path):
    out = _run(tmp_path, BOTH_FLAGS, ORIGINAL, ORIGINAL)
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
first = triton.compiler.compile(source(sys.argv[1]), target)
shutil.rmtree(first.metadata_group[next(iter(first.metadata_group))].rsplit("/", 1)[0])
# the same IR, its earlier binary gone: compiled, stored anew
second = triton.compiler.compile(source(sys.argv[2]), target)
third = triton.compiler.compile(source(sys.argv[3]), target)  # the same IR again: the second's
print(json.dumps({"reused": same_ir.REUSED[0], "third_is_second": third.hash == second.hash,
                  "second_is_first": second.hash == first.hash}))
"""


def test_an_earlier_binary_gone_from_the_cache_is_compiled_again_and_stored(tmp_path):
    other = ORIGINAL.replace("x = x + 1", "x = x * 3")
    out = _run(tmp_path, GONE, ORIGINAL, MUTANT, other)
    assert out == {"reused": 1, "third_is_second": True, "second_is_first": False}


BOUND_BEFORE = """
first = triton.compiler.compile(source(sys.argv[1]), target)
# the name Triton bound before the install: the same IR, compiled as it was, no stop
again = triton.compile(source(sys.argv[2]), target)
print(json.dumps({"reused": same_ir.REUSED[0], "own": again.hash != first.hash,
                  "patched": triton.compile is not triton.compiler.compile}))
"""


def test_a_compile_through_a_name_bound_before_the_install_runs_as_it_was(tmp_path):
    out = _run(tmp_path, BOUND_BEFORE, ORIGINAL, MUTANT)
    assert out == {"reused": 0, "own": True, "patched": True}
