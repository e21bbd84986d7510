"""A job's Triton compiles: counted, timed per stage, and the cache's answers told apart
(``harness/compiles.py``). Triton compiles for a CUDA target here without a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from mutant_gate.engine.harness import compiles

KERNEL = """
import triton
import triton.language as tl


@triton.jit
def scale(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
"""

SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from mutant_gate.engine.harness import compiles
import kernel

def build(block):
    source = ASTSource(kernel.scale, {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {(2,): block})
    triton.compile(source, GPUTarget("cuda", 80, 32))

with compiles.Compiles() as job:
    start = compiles.mark()
    build(16)
    first = compiles.since(start)
    build(16)  # the same specialisation: the on-disk cache answers
    build(32)  # another: compiled afresh
print(json.dumps({"job": job.record(), "first": first, "all": compiles.since(start)}))
with compiles.Compiles() as idle:
    pass
print(json.dumps(idle.record()))
"""


def test_a_job_counts_its_compiles_and_the_caches_answers_apart(tmp_path):
    (tmp_path / "kernel.py").write_text(textwrap.dedent(KERNEL))
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    record, idle = json.loads(lines[-2]), json.loads(lines[-1])
    job = record["job"]["compiles"]
    assert (job["count"], job["cached"]) == (2, 1)
    assert job["seconds"] > 0
    # every lowering stage down to the binary is timed, and they fit in the whole
    assert {"ttir", "ttgir", "ptx", "cubin"} <= set(job["stages"])
    assert sum(job["stages"].values()) <= job["seconds"] + 1e-3
    # per case: what came after a mark, cache hits left out
    assert record["first"]["compiles"] == 1
    assert 0 < record["first"]["compile_s"] < job["seconds"]
    assert record["all"]["compiles"] == 2
    assert idle == {}  # nothing compiled, nothing recorded


def test_since_a_mark_with_no_compile_is_empty():
    assert compiles.since(compiles.mark()) == {}
