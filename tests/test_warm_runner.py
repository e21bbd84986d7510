"""The warm runner (compiled mode's default): one process serves many jobs of the
file's own code, each as if it had the process to itself. Run here with the
interpreter, which takes the same path; the GPU side is in test_compiled_mode.py."""

from __future__ import annotations

import json
import textwrap

import pytest

from mutant_gate.engine.job import Check, CheckKind, Job, JobStatus
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


def test_the_probes_compares_are_served_by_the_runner(warm):
    """A probe compare loads the job's files and calls them, patching nothing: the
    runner serves it (in compiled mode a child would pay a CUDA context per job)."""
    request = {
        "entry": "probe:compare",
        "module": "k",
        "candidates": [
            {
                "id": "c1",
                "function": "twice",
                "setup": "x = torch.ones(3)",
                "call": "twice(x)",
                "tensors": ["x"],
            }
        ],
        "golden": False,
    }
    job = Job(
        files=(("k.py", "def twice(x):\n    return x * 2\n"), ("req.json", json.dumps(request))),
        checks=(Check(CheckKind.HARNESS, "req.json", "probe"),),
        timeout_s=20.0,
    )
    result = warm.run(job)
    assert result.status is JobStatus.PASSED, result.error
    assert runner_pid(result) is not None
    answer = result.extra["harness"]["probe"]
    assert [r["status"] for r in answer["results"]] == ["original_only"]
    assert answer["runs"]["original"] == 1


SHARE_ONE_CACHE = """
import os, sys, time
cache = os.environ["TRITON_CACHE_DIR"]
me = str(os.getuid())
key = os.path.join(cache, "test-shared-key")  # what a kernel's cache entry looks like
os.makedirs(key, exist_ok=True)
with open(os.path.join(key, f"tmp.{me}"), "w") as fh:
    fh.write(me)
os.replace(os.path.join(key, f"tmp.{me}"), os.path.join(key, f"from-{me}"))
deadline = time.monotonic() + 15
while len([n for n in os.listdir(key) if n.startswith("from-")]) < 2:
    assert time.monotonic() < deadline, "the other runner's entry never showed"
    time.sleep(0.05)
other = next(n for n in os.listdir(key) if n.startswith("from-") and n != f"from-{me}")
with open(os.path.join(key, f"tmp2.{me}"), "w") as fh:
    fh.write(me)
os.replace(os.path.join(key, f"tmp2.{me}"), os.path.join(key, other))  # as Triton's put does
sys.exit(f"SHARED-OK cache {cache} uid {me} other {other}")  # a passed job keeps no output
"""


def test_warm_runners_of_a_pool_share_one_triton_cache_and_no_one_else_can():
    """Compiled mode's runners share the machine's Triton cache (here forced on in the
    interpreter, which takes the same path): two runners, each its own uid, see and
    replace each other's entries; the directory is root's and their group's alone."""
    import os
    import shutil
    import stat

    from mutant_gate.engine.harness import isolation

    with LocalSandbox(workers=2, warm=True, shared_cache=True) as box:
        box.start()
        path = box.triton_cache
        assert path, box.triton_cache_note
        shutil.rmtree(os.path.join(path, "test-shared-key"), ignore_errors=True)
        results = dict(box.run_many([own_check(SHARE_ONE_CACHE), own_check(SHARE_ONE_CACHE)]))
    for result in results.values():
        assert result.status is JobStatus.FAILED and "SHARED-OK" in result.error, result.error
        assert f"cache {path} uid" in result.error
    uids = {r.error.split(" uid ")[1].split()[0] for r in results.values()}
    assert len(uids) == 2  # two runners, two sandbox uids
    info = os.stat(path)
    if os.geteuid() == 0:
        assert (info.st_uid, info.st_gid) == (0, isolation.SHARED_CACHE_GID)
        assert stat.S_IMODE(info.st_mode) == 0o2770
        entry = os.stat(os.path.join(path, "test-shared-key"))
        assert entry.st_gid == isolation.SHARED_CACHE_GID and entry.st_mode & 0o070 == 0o070
    else:
        assert stat.S_IMODE(info.st_mode) & 0o077 == 0
    shutil.rmtree(os.path.join(path, "test-shared-key"), ignore_errors=True)


def test_a_runner_without_the_shared_cache_keeps_its_own(warm):
    result = warm.run(own_check("import os, sys; sys.exit(os.environ['TRITON_CACHE_DIR'])\n"))
    assert result.status is JobStatus.FAILED and "triton-cache" in result.error, result.error
    assert "mutant-gate-triton" not in result.error and warm.triton_cache is None
