"""Compiled mode on a real CUDA device (marked gpu: skipped where there is none)."""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest

from mutant_gate.engine.job import Check, CheckKind, Job, JobStatus
from mutant_gate.engine.sandbox.local import LocalSandbox, visible_gpus
from mutant_gate.engine.verdicts import decide

from .conftest import EXAMPLES, run_cli

pytestmark = pytest.mark.gpu

FAULTY = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def poke(out_ptr, offset):
        tl.store(out_ptr + offset, 1.0)


    out = torch.zeros(16, device="cuda")
    poke[(1,)](out, {offset})
    torch.cuda.synchronize()
    assert out.sum().item() == {expected}
""")

ROWSUM = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def rowsum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs {cmp} n, other=0.0)
        tl.store(out_ptr, tl.sum(x, axis=0))


    x = torch.ones(1000, device="cuda")
    out = torch.empty(1, device="cuda")
    rowsum[(1,)](x, out, 1000, BLOCK=1024)
    torch.cuda.synchronize()
    print(out.item())
""")


def job(source: str, **kw) -> Job:
    return Job(
        files=(("k.py", source),),
        checks=(Check(CheckKind.MAIN, "k.py", "own-check"),),
        mode="compiled",
        timeout_s=120,
        **kw,
    )


@pytest.fixture(scope="module")
def compiled():
    box = LocalSandbox(workers=2, mode="compiled")
    box.start(wait_all=True)
    yield box
    box.close()


def test_warm_runners_share_one_triton_cache(compiled):
    """Both runners use the pool's Triton cache: the driver utilities and a kernel built
    by one are found there by the other (keyed by source hash)."""
    import os

    assert compiled.triton_cache, compiled.triton_cache_note
    assert {w.runner.get("triton_cache") for w in compiled._all} == {"shared"}
    result = compiled.run(job(FAULTY.format(offset=3, expected=1.0)))
    assert result.status is JobStatus.PASSED, result.error
    entries = [n for _, _, names in os.walk(compiled.triton_cache) for n in names]
    assert any(n.endswith(".so") for n in entries), entries[:20]  # utilities, launcher
    assert any(n.endswith(".cubin") for n in entries), entries[:20]  # the kernel


def test_compiled_job_runs_on_the_gpu(compiled):
    result = compiled.run(job(FAULTY.format(offset=3, expected=1.0)))
    assert result.status is JobStatus.PASSED, result.error
    failing = compiled.run(job(FAULTY.format(offset=3, expected=2.0)))
    assert failing.status is JobStatus.FAILED, failing.error


def test_illegal_memory_access_is_a_crash_and_the_pool_goes_on(compiled):
    result = compiled.run(job(FAULTY.format(offset=1 << 40, expected=1.0)))
    assert result.status is JobStatus.CRASH, result
    assert "illegal" in result.error.lower() or "cuda error" in result.error.lower()
    # The verdict's reason names the CUDA error and where, not "Traceback (most recent...".
    verdict, by, reason = decide(result)
    assert (verdict.value, by) == ("killed", "crash")
    assert "illegal memory access" in reason or reason.startswith("CUDA error"), reason
    assert "k.py:" in reason, reason
    assert compiled.run(job(FAULTY.format(offset=3, expected=1.0))).status is JobStatus.PASSED


def test_workers_spread_over_visible_gpus(compiled):
    gpus = visible_gpus()
    assert [w.gpu for w in compiled._all] == [
        gpus[i % len(gpus)] for i in range(len(compiled._all))
    ]


@pytest.mark.skipif(
    shutil.which("compute-sanitizer") is None, reason="compute-sanitizer not installed"
)
def test_sanitize_catches_a_widened_mask(compiled):
    clean = compiled.run(job(ROWSUM.format(cmp="<"), sanitize=True))
    assert clean.status is JobStatus.PASSED, clean.error
    widened = compiled.run(job(ROWSUM.format(cmp="<="), sanitize=True))
    assert widened.status is JobStatus.BOUNDS, widened
    assert "compute-sanitizer memcheck" in widened.error
    assert widened.extra["sanitizer"]["errors"] >= 1
    # The reason keeps memcheck's first error (kind, kernel, address), not its summary.
    reason = decide(widened)[2]
    assert "Invalid __global__ read" in reason and "rowsum" in reason, reason


def test_compare_modes_reports_every_disagreement(tmp_path):
    proc = run_cli(
        "run",
        str(EXAMPLES / "vector_add.py"),
        "--mode",
        "interpret",
        "--compare-modes",
        "--writer",
        "none",
        "--json",
        "r.json",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    modes = report["modes"]
    assert modes["compared"] == ["interpret", "compiled"]
    assert modes["agree"] + len(modes["disagreements"]) == len(report["mutants"])
    for row in report["mutants"]:
        assert set(row["modes"]) == {"interpret", "compiled"}
    # Dropped masks die by the interpreter's bounds check; on the GPU they may pass silently.
    for d in modes["disagreements"]:
        assert d["interpret"]["verdict"] != "error" and d["compiled"]["verdict"] != "error"


ROW_COUNT = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def row_count_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        acc = tl.zeros([BLOCK], dtype=tl.int64)
        for off in range(0, n, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + cols, mask=cols < n, other=0).to(tl.int64)
        tl.store(out_ptr, tl.sum(acc, axis=0))


    if __name__ == "__main__":
        x = torch.randint(0, 5, (300,), dtype=torch.int32, device="cuda")
        out = torch.empty(1, dtype=torch.int64, device="cuda")
        row_count_kernel[(1,)](x, out, x.numel(), BLOCK=64)
        assert out.item() == x.sum().item()
""")


def test_a_mutant_that_does_not_compile_is_not_compilable_not_killed(tmp_path):
    """An int64 counter narrowed to int32 but still fed int64 values is a loop-carried
    type change the compiler rejects: in compiled mode that is the mutant's
    CompilationError, never a kill by the own check."""
    (tmp_path / "row_count.py").write_text(ROW_COUNT)
    proc = run_cli(
        "run",
        "row_count.py",
        "--mode",
        "compiled",
        "--operators",
        "int-narrow",
        "--writer",
        "none",
        "--json",
        "r.json",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    rows = [m for m in report["mutants"] if "dtype=tl.int32" in m["after"]]
    assert len(rows) == 1, report["mutants"]
    (row,) = rows
    assert row["verdict"] == "not_compilable", row
    assert row["reason"].startswith("does not compile: "), row["reason"]
    assert "Loop-carried variable acc" in row["reason"], row["reason"]
    assert {"id": row["id"], "verdict": "not_compilable"} in report["score"]["excluded"]


def test_a_warm_runner_serves_a_hundred_compiled_jobs_with_one_context(compiled):
    """One CUDA context for many jobs: every job of the same worker reports the same
    runner process, and each still compiles and checks its own kernel."""
    first = compiled.run(job(FAULTY.format(offset=3, expected=1.0)))
    pid = first.extra["runner"]["pid"]
    statuses = []
    for i in range(100):
        expected = 1.0 if i % 10 else 2.0  # every tenth job fails its check
        result = compiled.run(job(FAULTY.format(offset=3, expected=expected)))
        statuses.append(result.status)
        assert result.extra["runner"]["pid"] in {w.runner_pid for w in compiled._all} | {pid}
    assert statuses.count(JobStatus.FAILED) == 10
    assert statuses.count(JobStatus.PASSED) == 90
    pids = {w.runner_pid for w in compiled._all}
    assert None not in pids and len(pids) == len(compiled._all), pids


def test_an_illegal_access_retires_the_runner_and_the_next_job_passes(compiled):
    crashed = compiled.run(job(FAULTY.format(offset=1 << 40, expected=1.0)))
    assert crashed.status is JobStatus.CRASH, crashed
    assert crashed.extra["runner"]["retired"], crashed.extra
    again = compiled.run(job(FAULTY.format(offset=3, expected=1.0)))
    assert again.status is JobStatus.PASSED, again.error
    assert again.extra["runner"]["pid"] != crashed.extra["runner"].get("served_by")


MATMUL = textwrap.dedent("""
    import torch

    a = torch.randn(512, 512, device="cuda")
    before = torch.cuda.memory_allocated()
    # one workspace per stream: 32 MiB each on Hopper, about 8 MiB on older GPUs
    for stream in [torch.cuda.current_stream()] + [torch.cuda.Stream() for _ in range(11)]:
        with torch.cuda.stream(stream):
            (a @ a).sum().item()
            (a.bfloat16() @ a.bfloat16()).sum().item()
    torch.cuda.synchronize()
    kept = torch.cuda.memory_allocated() - before
    print("cuBLAS kept", kept >> 20, "MiB")
    assert kept > 64 << 20, kept  # more than a runner may keep: the test means something
""")

KEEPS = textwrap.dedent("""
    import builtins

    import torch

    builtins.kept_by_the_job = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
""")


def test_cublas_workspaces_do_not_retire_a_runner_but_a_kept_tensor_does(compiled):
    """Matrix products leave cuBLAS workspaces (per handle and stream) that torch holds
    for the process: freed after the job, the runner serves the next one. A tensor the
    job keeps alive is a leak the runner is retired for."""
    multiplied = compiled.run(job(MATMUL))
    assert multiplied.status is JobStatus.PASSED, multiplied.error
    assert not multiplied.extra["runner"].get("retired"), multiplied.extra["runner"]
    kept = compiled.run(job(KEEPS))
    assert kept.status is JobStatus.PASSED, kept.error
    assert "allocated on the device" in kept.extra["runner"]["retired"], kept.extra["runner"]


def test_mode_auto_judges_masked_compiled_survivors_again_in_the_interpreter(tmp_path):
    proc = run_cli(
        "run",
        str(EXAMPLES / "vector_add.py"),
        "--operators",
        "mask-drop",
        "--writer",
        "none",
        "--no-cache",
        "--json",
        "r.json",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["settings"]["mode"] == "compiled" and report["settings"]["auto_mode"]
    rows = report["mutants"]
    assert rows
    for row in rows:
        # On the GPU a dropped mask reads memory no check looks at; the interpreter's
        # bounds check sees it, and the row says which mode decided.
        assert row["verdict"] == "killed", row
        assert row["modes"]["decided"] in ("compiled", "interpret"), row
        if row["modes"]["decided"] == "interpret":
            assert row["by"] == "bounds" and row["modes"]["compiled"]["verdict"] == "survived"
    assert any(r["modes"]["decided"] == "interpret" for r in rows)


def test_a_pool_deals_its_workers_over_every_listed_gpu_and_counts_each(monkeypatch):
    """Multi-GPU, as far as one GPU can show it: ``CUDA_VISIBLE_DEVICES=0,0`` lists two
    slots; the pool's workers are dealt over both, each slot's jobs are counted, and a
    run's report and summary give the throughput per slot."""
    from concurrent.futures import ThreadPoolExecutor

    first = visible_gpus()[0]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{first},{first}")
    with LocalSandbox(workers=2, mode="compiled") as box:
        box.start(wait_all=True)
        assert sorted(w.slot for w in box._all) == [0, 1]
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(box.run, [job(FAULTY.format(offset=3, expected=1.0))] * 6))
        assert all(r.status is JobStatus.PASSED for r in results), [r.error for r in results]
        slots = box.gpu_throughput(10.0)
    assert [s["slot"] for s in slots] == [0, 1] and {s["device"] for s in slots} == {first}
    assert sum(s["jobs"] for s in slots) == 6 and all(s["jobs"] > 0 for s in slots)
    assert all(s["jobs_per_s"] == round(s["jobs"] / 10.0, 2) for s in slots)


def test_a_compiled_run_reports_its_gpus(tmp_path):
    proc = run_cli(
        "run", str(EXAMPLES / "vector_add.py"), "--mode", "compiled", "--writer", "none",
        "--no-cache", "--operators", "mask-drop", "--json", str(tmp_path / "r.json"),
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    gpus = report["sandbox"]["gpus"]
    assert gpus and sum(g["jobs"] for g in gpus) >= len(report["mutants"])
    assert "per GPU: slot 0" in proc.stdout
    assert report["sandbox"]["triton_cache"].startswith("shared by the warm runners")


BRANCHED = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def bump(x_ptr, n, BLOCK: tl.constexpr, SHIFT: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        if SHIFT:
            x = x + {shift}
        tl.store(x_ptr + offs, x * {scale}, mask=offs < n)


    x = torch.ones(100, device="cuda")
    bump[(1,)](x, 100, BLOCK=128, SHIFT=False)
    torch.cuda.synchronize()
    assert x.sum().item() == 200.0
""")


def test_a_mutant_whose_ir_is_the_originals_runs_the_originals_binary(compiled):
    """A change in a branch the launch's constexpr cuts away leaves the IR as it was: the
    job takes the original's binary (no compile past the first stage) and passes as the
    original does; a change in the code that runs is compiled, and caught."""
    original = compiled.run(job(BRANCHED.format(shift=1, scale=2)))
    assert original.status is JobStatus.PASSED, original.error
    # compiled here, or by an earlier run into the shared cache
    built = original.extra["compiles"]
    assert built["count"] + built["cached"] == 1 and "same_ir" not in built
    dead = compiled.run(job(BRANCHED.format(shift=2, scale=2)))
    assert dead.status is JobStatus.PASSED, dead.error
    assert dead.extra["compiles"]["same_ir"] == 1
    assert dead.extra["compiles"]["count"] == 0
    live = compiled.run(job(BRANCHED.format(shift=1, scale=3)))
    assert live.status is JobStatus.FAILED
    built = live.extra["compiles"]
    assert built["count"] + built["cached"] == 1 and "same_ir" not in built
