"""The warm runner (compiled mode's default): one process serves many jobs of the
file's own code, each as if it had the process to itself. Run here with the
interpreter, which takes the same path; the GPU side is in test_compiled_mode.py."""

from __future__ import annotations

import textwrap

import pytest

from mutant_gate.engine.sandbox.job import Check, CheckKind, Job, JobStatus
from mutant_gate.engine.sandbox.local import LocalSandbox

pytestmark = pytest.mark.slow


def own_check(body: str, files: dict[str, str] | None = None, **kw) -> Job:
    extra = tuple((name, textwrap.dedent(text)) for name, text in (files or {}).items())
    return Job(
        files=(("check.py", textwrap.dedent(body)), *extra),
        checks=(Check(CheckKind.MAIN, "check.py", "own-check"),),
        timeout_s=kw.pop("timeout_s", 20.0),
        **kw,
    )


@pytest.fixture(scope="module")
def warm():
    with LocalSandbox(workers=1, warm=True) as box:
        box.start()
        yield box


def runner_pid(result) -> int | None:
    return result.extra["runner"]["pid"]


def test_one_runner_serves_a_hundred_jobs(warm):
    pids, failed = set(), 0
    for i in range(100):
        result = warm.run(own_check(f"assert {i} % 7 != 3, 'seven'\n"))
        failed += result.status is JobStatus.FAILED
        pids.add(result.extra["runner"].get("served_by") or runner_pid(result))
    assert failed == len([i for i in range(100) if i % 7 == 3])
    assert len(pids) == 1, pids


def test_nothing_of_a_job_reaches_the_next(warm):
    """Environment, sys.path, cwd and the modules loaded from the job's directory are
    the job's own: the next job sees none of them."""
    first = warm.run(
        own_check(
            """
            import os, sys
            import helper
            assert helper.VALUE == 1
            os.environ["LEFT_BEHIND"] = "1"
            sys.path.append("/left/behind")
            open("scratch.txt", "w").write("mine")
            """,
            {"helper.py": "VALUE = 1\n"},
        )
    )
    assert first.status is JobStatus.PASSED, first.error
    second = warm.run(
        own_check(
            """
            import os, sys
            import helper
            assert helper.VALUE == 2, helper.VALUE  # this job's helper, not a cached module
            assert "LEFT_BEHIND" not in os.environ
            assert "/left/behind" not in sys.path
            assert not os.path.exists("scratch.txt") and os.getcwd() == os.environ["HOME"]
            """,
            {"helper.py": "VALUE = 2\n"},
        )
    )
    assert second.status is JobStatus.PASSED, second.error
    assert runner_pid(second) == runner_pid(first)


def test_a_crash_or_timeout_retires_the_runner_and_the_next_job_passes(warm):
    before = warm.run(own_check("x = 1\n"))
    crashed = warm.run(own_check("import ctypes\nctypes.string_at(0)\n"))
    assert crashed.status is JobStatus.CRASH and "SIGSEGV" in crashed.error
    after = warm.run(own_check("x = 1\n"))
    assert after.status is JobStatus.PASSED, after.error
    assert runner_pid(after) not in (None, runner_pid(before))
    hung = warm.run(own_check("while True:\n    pass\n", timeout_s=1.5))
    assert hung.status is JobStatus.TIMEOUT
    again = warm.run(own_check("x = 1\n"))
    assert again.status is JobStatus.PASSED
    assert runner_pid(again) not in (None, runner_pid(after))


def test_a_process_the_check_forks_never_answers_for_the_job(warm):
    """The fork's copy of the runner would come back through the harness and write an
    answer of its own; it exits instead, and the job's answer is the runner's."""
    result = warm.run(
        own_check(
            """
            import os, sys
            if os.fork() == 0:
                sys.exit(0)  # the child "passes"
            os.wait()
            raise AssertionError("the parent fails")
            """
        )
    )
    assert result.status is JobStatus.FAILED and "the parent fails" in result.error
    assert warm.run(own_check("x = 1\n")).status is JobStatus.PASSED


def test_tests_of_other_origin_run_in_a_child_of_their_own(warm):
    """A pytest check (a generated or project test) never shares the runner's process."""
    job = Job(
        files=(("test_x.py", "def test_x():\n    assert True\n"),),
        checks=(Check(CheckKind.PYTEST, "test_x.py", "test:x"),),
        timeout_s=20.0,
    )
    result = warm.run(job)
    assert result.status is JobStatus.PASSED, result.error
    assert "runner" not in result.extra


def test_harness_requests_run_in_a_child_of_their_own(warm):
    """The harness turns the interpreter off for a compile, patches launches for a
    trace: for the one process it runs in, never the runner's."""
    job = Job(
        files=(("req.json", '{"entry": "compiler:no_such_entry"}'),),
        checks=(Check(CheckKind.HARNESS, "req.json", "compile"),),
        timeout_s=20.0,
    )
    result = warm.run(job)
    assert result.status is JobStatus.FAILED and "no_such_entry" in result.error
    assert "runner" not in result.extra
