"""Sandbox limits (engine/limits.py): the default memory limit is sized to the machine and
the workers, and a job that a limit ended says which limit and the flag that raises it."""

from __future__ import annotations

import json
import signal
import textwrap

import pytest

from mutant_gate.engine import limits
from mutant_gate.engine.job import CheckOutcome, Job, JobResult, JobStatus
from tests.conftest import run_cli


def test_default_memory_shares_the_machine_among_workers():
    one = limits.sized_memory_mb(1, total_mb=24 * 1024)
    two = limits.sized_memory_mb(2, total_mb=24 * 1024)
    assert two < one <= 24 * 1024 - limits.HEADROOM_MB
    assert abs(one - 2 * two) <= limits.STEP_MB * 2  # the same pool, cut in two
    assert limits.sized_memory_mb(2, total_mb=48 * 1024) >= 2 * two - limits.STEP_MB
    # a 24 GiB machine with 2 workers gives each job room for a 4096 x 32000 float32
    # loss test's tensors (about 10 GB, where the old fixed 4096 MB did not)
    assert two >= 10_000
    assert limits.sized_memory_mb(128, total_mb=8 * 1024) == limits.FLOOR_MB


def _job(**kw) -> Job:
    return Job(files=(("k.py", ""),), checks=(), mode=kw.pop("mode", "interpret"), **kw)


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        (
            "RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: "
            "can't allocate memory: you tried to allocate 524288000 bytes. Error code 12",
            "memory",
        ),
        (
            "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 3.8 GiB for an array",
            "memory",
        ),
        ("InterpreterError: MemoryError()", "memory"),
        ("OSError: [Errno 24] Too many open files: 'x'", "open files"),
        ("AssertionError: Tensor-likes are not close!", None),
    ],
)
def test_a_failure_names_the_limit_it_hit(message, kind):
    result = JobResult(
        JobStatus.FAILED,
        outcomes=(CheckOutcome("own check", "failed", 0.1, message),),
        error=message,
    )
    found = limits.hit(_job(memory_mb=700), result)
    assert (found or {}).get("limit") == kind
    if kind == "memory":
        line = limits.describe(found)
        assert "700 MB" in line and "--memory-mb" in line


def test_compiled_jobs_have_no_memory_limit_to_name():
    message = "RuntimeError: DefaultCPUAllocator: can't allocate memory"
    result = JobResult(JobStatus.FAILED, error=message)
    assert limits.hit(_job(mode="compiled"), result) is None


def test_signals_name_cpu_time_and_output():
    cpu = JobResult(JobStatus.CRASH, error="CPU time limit exceeded", signal=signal.SIGXCPU)
    assert "--timeout" in limits.describe(limits.hit(_job(timeout_s=7.0), cpu))
    out = JobResult(JobStatus.CRASH, error="output exceeded 4194304 bytes", signal=signal.SIGXFSZ)
    assert limits.hit(_job(), out)["value"] == "4 MiB"


def test_a_cached_result_answers_only_the_memory_it_says_something_about():
    fit = JobResult(JobStatus.PASSED, extra={"memory_mb": 8000})
    assert fit.valid_for(_job(memory_mb=9000))
    assert fit.valid_for(_job(memory_mb=4000))  # a rerun with more workers is served
    over = JobResult(JobStatus.FAILED, extra={"memory_mb": 8000, "limit": {"limit": "memory"}})
    assert over.valid_for(_job(memory_mb=4000))
    assert not over.valid_for(_job(memory_mb=16000))  # it might fit in more
    assert _job(memory_mb=1).cache_key({}) == _job(memory_mb=2).cache_key({})


ALLOCATES = textwrap.dedent(
    """
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def size_kernel(x_ptr, out_ptr):
        tl.store(out_ptr, tl.load(x_ptr) - 1000)


    def megabytes(n):
        x = torch.tensor([n], dtype=torch.int64)
        out = torch.empty(1, dtype=torch.int64)
        size_kernel[(1,)](x, out)
        return int(out.item())


    def test_buffer():
        mb = megabytes(1000 + SIZE)
        buf = torch.ones(mb * 1024 * 1024, dtype=torch.uint8)  # allocated before any assert
        assert buf.numel() == SIZE * 1024 * 1024
    """
)


@pytest.mark.slow
def test_original_over_the_memory_limit_is_one_line_naming_it(tmp_path):
    (tmp_path / "alloc_kernel.py").write_text(ALLOCATES.replace("SIZE", "1500"))
    proc = run_cli(
        "run", "alloc_kernel.py", "--memory-mb", "600", "--mode", "interpret", "--writer", "none", "-j", "1", "-q",
        "--cache-dir", str(tmp_path / "c"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert "the original hit the sandbox's memory limit (600 MB" in line
    assert "--memory-mb raises it" in line
    assert "test_buffer" in line


@pytest.mark.slow
def test_mutant_over_the_memory_limit_is_a_kill_that_names_it(tmp_path):
    (tmp_path / "alloc_kernel.py").write_text(ALLOCATES.replace("SIZE", "2"))
    proc = run_cli(
        "run", "alloc_kernel.py", "--memory-mb", "600", "--mode", "interpret", "--writer", "none", "-j", "2", "-q",
        "--json", "r.json", "--cache-dir", str(tmp_path / "c"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    # x - 1000 -> x + 1000: the mutant asks for about 2 GB, the original for 2 MB
    (row,) = [m for m in report["mutants"] if m["operator"] == "add-sub"]
    assert row["verdict"] == "killed"
    assert row["limit"] == "memory"
    assert row["reason"].startswith("hit the sandbox's memory limit (600 MB")
    assert report["sandbox"]["kills_by_limit"] == {"memory": 1}
    assert report["sandbox"]["memory_mb"] == 600
    assert report["sandbox"]["memory_from"] == "--memory-mb"
    assert "killed by a sandbox limit (the original fit in it): memory 1" in proc.stdout


@pytest.mark.slow
def test_default_memory_is_sized_and_printed(tmp_path):
    (tmp_path / "alloc_kernel.py").write_text(ALLOCATES.replace("SIZE", "2"))
    proc = run_cli(
        "run",
        "alloc_kernel.py",
        "--mode",
        "interpret",
        "--writer",
        "none",
        "-j",
        "2",
        "--operators",
        "add-sub",
        "--json",
        "r.json",
        "--cache-dir",
        str(tmp_path / "c"),
        "-v",
        cwd=tmp_path,
    )  # fmt: skip  (-v: the sandbox's line)
    assert proc.returncode == 0, proc.stderr
    box = json.loads((tmp_path / "r.json").read_text())["sandbox"]
    assert box["memory_from"] == "machine"
    assert box["memory_mb"] == limits.sized_memory_mb(2, total_mb=box["machine_memory_mb"])
    assert f"memory {box['memory_mb']} MB per job (sized to the machine)" in " ".join(
        proc.stdout.split()
    )
