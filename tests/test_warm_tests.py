"""Trusted tests in warm runners: a file's own ``test_*`` functions, ``--tests`` files and a
project's tests run in the worker's long-lived runner (the third-party world imported
once), each job with the project's own modules loaded afresh; a generated test never
does. Run with the interpreter, which takes the same path as compiled mode."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from mutant_gate.engine.job import Check, CheckKind, Job, JobStatus
from mutant_gate.engine.sandbox.local import LocalSandbox
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.slow

KERNEL = textwrap.dedent(
    """
    import triton
    import triton.language as tl

    CALLS = 0  # a module global the project's test changes


    @triton.jit
    def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n) * 2, mask=o < n)


    def double(x):
        global CALLS
        CALLS += 1
        y = x.clone()
        _double[(1,)](x, y, x.numel(), BLOCK=64)
        return y
    """
)

TEST = textwrap.dedent(
    """
    import torch

    from pkg.ops import kernel


    def test_double_counts_its_calls():
        x = torch.arange(10, dtype=torch.float32)
        assert torch.equal(kernel.double(x), 2 * x)
        assert kernel.CALLS == 1  # a module loaded afresh for this job

    def test_default_dtype_left_changed():
        assert torch.get_default_dtype() == torch.float32  # reset after every job
        torch.set_default_dtype(torch.float64)
    """
)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("warmproj") / "project"  # pytest's own dirs are 0700
    (root / "pkg" / "ops").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "ops" / "__init__.py").write_text("")
    (root / "pkg" / "ops" / "kernel.py").write_text(KERNEL)
    (root / "tests").mkdir()
    (root / "tests" / "test_kernel.py").write_text(TEST)
    return root


def project_job(root: Path, source: str = KERNEL, trusted: bool = True, **kw) -> Job:
    info = {
        "root": str(root),
        "import_root": str(root),
        "module": "pkg.ops.kernel",
        "module_file": str(root / "pkg" / "ops" / "kernel.py"),
    }
    check = Check(CheckKind.PYTEST, str(root / "tests" / "test_kernel.py"), "test", trusted=trusted)
    return Job(
        files=(("mutant/kernel.py", source),),
        checks=(check,),
        project=info,
        timeout_s=kw.pop("timeout_s", 60.0),
        stop_on_first_failure=False,
        **kw,
    )


@pytest.fixture(scope="module")
def warm():
    with LocalSandbox(workers=1, warm=True) as box:
        box.start()
        yield box


def served_by(result) -> int | None:
    runner = result.extra.get("runner") or {}
    return runner.get("served_by") or runner.get("pid")


def test_project_jobs_share_a_runner_and_start_clean(warm, project):
    results = [warm.run(project_job(project)) for _ in range(3)]
    for result in results:
        assert result.status is JobStatus.PASSED, result.error
    pids = {served_by(r) for r in results}
    assert len(pids) == 1 and None not in pids  # one warm runner served all three


def test_a_mutant_of_the_project_module_is_judged_in_the_runner(warm, project):
    mutant = KERNEL.replace("* 2, mask", "* 3, mask")
    killed = warm.run(project_job(project, mutant))
    assert killed.status is JobStatus.FAILED
    assert "test_double_counts_its_calls" in killed.first_failure.name
    assert served_by(killed) is not None
    again = warm.run(project_job(project))  # the original module again, not the mutant
    assert again.status is JobStatus.PASSED, again.error


def test_a_generated_test_never_runs_warm(warm, project):
    result = warm.run(project_job(project, trusted=False))
    assert result.status is JobStatus.PASSED, result.error
    assert "runner" not in result.extra  # a process of its own


def test_a_test_that_faults_ends_its_job_and_its_runner(warm, project):
    faulting = TEST + textwrap.dedent(
        """

        def test_fault():
            import ctypes
            ctypes.string_at(0)  # a segmentation fault in the runner's process
        """
    )
    path = project / "tests" / "test_fault.py"
    path.write_text(faulting)
    try:
        before = warm.run(project_job(project))
        job = project_job(project)
        job = Job(
            files=job.files,
            checks=(Check(CheckKind.PYTEST, str(path), "test", trusted=True),),
            project=job.project,
            timeout_s=60.0,
            stop_on_first_failure=False,
        )
        crashed = warm.run(job)
    finally:
        path.unlink()
    assert crashed.status is JobStatus.CRASH, crashed.error
    after = warm.run(project_job(project))
    assert after.status is JobStatus.PASSED, after.error
    assert served_by(after) != served_by(before)  # a new runner


def test_own_test_functions_run_warm(warm):
    body = textwrap.dedent(
        """
        import torch

        def test_one():
            assert torch.ones(3).sum() == 3
        """
    )
    job = Job(
        files=(("k.py", body),),
        checks=(Check(CheckKind.PYTEST, "k.py", "own-check", trusted=True),),
        timeout_s=30.0,
    )
    first, second = warm.run(job), warm.run(job)
    assert first.status is second.status is JobStatus.PASSED, first.error
    assert served_by(first) == served_by(second) is not None


def _verdicts(report_path: Path) -> dict[str, str]:
    return {m["id"]: m["verdict"] for m in json.loads(report_path.read_text())["mutants"]}


def test_kernel_lib_verdicts_are_the_same_warm_and_cold(tmp_path):
    """The packaged example judged by its tests, once warm, once cold (every job in a
    process of its own): identical verdicts."""
    from mutant_gate.cache import Store
    from mutant_gate.engine.pipeline import Run
    from mutant_gate.engine.settings import RunSettings, WriterSettings

    lib = EXAMPLES / "kernel_lib"
    settings = RunSettings(
        kernel_path=str(lib / "src" / "kernel_lib" / "ops" / "rms_norm.py"),
        tests=(str(lib / "tests" / "test_rms_norm.py"),),
        use_cache=False,
        workers=2,
        writers=WriterSettings(writer="none"),
    )
    verdicts = []
    for warm_runner in (True, False):
        with LocalSandbox(workers=2, warm=warm_runner) as box:
            box.start()
            run = Run(settings, box, Store(str(tmp_path / "cache")))
            for _ in run.events():
                pass
            verdicts.append(
                {m.id: o.verdict.value for m in run.mutants for o in [run.ledger.outcomes()[m.id]]}
            )
    assert verdicts[0] == verdicts[1]
    assert "killed" in verdicts[0].values()
