"""The local sandbox for real: warm workers, forked children, limits, isolation."""

from __future__ import annotations

import os
import signal
import socket
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from mutant_gate.engine.job import Check, CheckKind, Job, JobStatus

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sandbox(either_sandbox):
    """Every test here runs against the forked and the warm pool (conftest)."""
    return either_sandbox


def main_job(body: str, timeout_s: float = 20.0, **kw) -> Job:
    source = textwrap.dedent(body)
    return Job(
        files=(("check.py", source),),
        checks=(Check(CheckKind.MAIN, "check.py", "own-check"),),
        timeout_s=timeout_s,
        **kw,
    )


def test_passing_job_reports_outcome(sandbox):
    result = sandbox.run(
        main_job("""
        import torch
        assert torch.arange(4).sum().item() == 6
        print("ok")
    """)
    )
    assert result.status is JobStatus.PASSED, result.error
    assert [o.status for o in result.outcomes] == ["passed"]


def test_memory_a_job_leaves_unwritten_holds_the_same_values_every_time(sandbox):
    """An output left unwritten (``torch.empty``) never holds what an earlier run left
    in recycled memory: every allocation comes filled alike, small or large, in a job
    and in a process it starts (else one mutant passes or fails by what ran before)."""
    body = """
        import subprocess, sys
        import torch
        for n in (100, 5000, 100000, 4000000):
            done = torch.ones(n)
            del done
            fresh = torch.empty(n)
            assert not bool((fresh == 1.0).any()), n
            assert bool((fresh == fresh[0]).all()) and fresh[0].item() < -1e38, fresh[:4]
        code = "import torch; torch.ones(9000); print(torch.empty(9000)[0].item())"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert float(out.stdout) < -1e38, out.stdout + out.stderr
        print("ok")
    """
    result = sandbox.run(main_job(body))
    assert result.status is JobStatus.PASSED, result.error


def test_failing_assertion_is_failed_with_tail(sandbox):
    result = sandbox.run(main_job("assert 1 + 1 == 3, 'arithmetic is broken'\n"))
    assert result.status is JobStatus.FAILED
    assert "arithmetic is broken" in result.error


def test_infinite_loop_times_out_on_its_cpu_seconds_and_pool_goes_on(sandbox):
    """The limit is CPU seconds: a busy loop is stopped once it has used them, and the
    result says how many it used against which limit."""
    result = sandbox.run(main_job("while True:\n    pass\n", timeout_s=1.5))
    assert result.status is JobStatus.TIMEOUT
    assert "CPU s against a limit of 1.5 CPU s" in result.error, result.error
    assert result.extra["timed_out"]["by"] == "cpu"
    assert 1.5 <= result.cpu_s < 6.0, result.cpu_s
    assert sandbox.run(main_job("x = 1\n")).status is JobStatus.PASSED


def test_a_sleeping_job_is_stopped_by_the_wall_backstop_named_as_such(sandbox):
    """A job that waits (no CPU) never reaches its CPU limit: the wall clock's far
    backstop stops it, and says so, with the few CPU seconds it used."""
    job = main_job("import time\ntime.sleep(600)\n", timeout_s=1.0)
    start = time.monotonic()
    result = sandbox.run(job)
    took = time.monotonic() - start
    assert result.status is JobStatus.TIMEOUT
    assert "wall-clock backstop" in result.error, result.error
    assert result.extra["timed_out"]["by"] == "wall"
    assert job.wall_limit_s <= took < job.wall_limit_s + 30
    assert result.cpu_s < 1.0, result.cpu_s


def test_a_passing_job_counts_its_cpu_seconds_with_those_of_its_children(sandbox):
    """A job's CPU seconds are its processes': the child and the one it started."""
    body = """
        import subprocess, sys, time
        code = "import time\\nend = time.process_time() + 0.6\\nwhile time.process_time() < end: pass"
        subprocess.run([sys.executable, "-c", code], check=True)
        end = time.process_time() + 0.6
        while time.process_time() < end:
            pass
    """
    result = sandbox.run(main_job(body))
    assert result.status is JobStatus.PASSED, result.error
    assert 1.2 <= result.cpu_s < 4.0, result.cpu_s


def test_segfault_is_a_crash_and_pool_goes_on(sandbox):
    result = sandbox.run(main_job("import ctypes\nctypes.string_at(0)\n"))
    assert result.status is JobStatus.CRASH
    assert "SIGSEGV" in result.error
    assert sandbox.run(main_job("x = 1\n")).status is JobStatus.PASSED


def test_abort_is_a_crash(sandbox):
    result = sandbox.run(main_job("import os\nos.abort()\n"))
    assert result.status is JobStatus.CRASH
    assert "SIGABRT" in result.error


def test_endless_output_is_capped(sandbox):
    result = sandbox.run(
        main_job("while True:\n    print('x' * 1000)\n", output_limit_bytes=1 << 20)
    )
    assert result.status is JobStatus.CRASH
    assert "output exceeded" in result.error


def test_huge_allocation_is_contained(sandbox):
    result = sandbox.run(
        main_job(
            """
        import torch
        t = torch.empty(50 * 1024**3, dtype=torch.uint8)
        t.fill_(1)
    """,
            memory_mb=1024,
        )
    )
    assert result.status is JobStatus.FAILED
    assert "alloc" in result.error.lower() or "memory" in result.error.lower()


@pytest.mark.parametrize("warm", [False, True], ids=["forked", "warm"])
def test_job_cannot_see_api_keys(monkeypatch, warm):
    from mutant_gate.engine.sandbox.local import LocalSandbox

    monkeypatch.setenv("MY_SERVICE_API_KEY", "sk-should-never-leak")
    monkeypatch.setenv("NEBIUS_API_KEY", "nb-should-never-leak")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-should-never-leak")
    with LocalSandbox(workers=1, warm=warm) as box:
        result = box.run(
            main_job("""
            import os
            blobs = [repr(dict(os.environ)).encode()]
            for path in ('/proc/self/environ', f'/proc/{os.getppid()}/environ'):
                try:
                    blobs.append(open(path, 'rb').read())
                except PermissionError:
                    pass  # the hardened sandbox cannot even look
            for blob in blobs:
                assert b'should-never-leak' not in blob, blob
            assert not [k for k in os.environ if 'KEY' in k or 'TOKEN' in k]
            assert os.environ['HOME'] == os.getcwd()
        """)
        )
    assert result.status is JobStatus.PASSED, result.error


def test_job_runs_in_fresh_directory(sandbox):
    first = sandbox.run(main_job("open('left-behind.txt', 'w').write('x')\n"))
    assert first.status is JobStatus.PASSED
    second = sandbox.run(main_job("import os\nassert not os.path.exists('left-behind.txt')\n"))
    assert second.status is JobStatus.PASSED, second.error


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root here")
def test_network_is_cut(sandbox):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        result = sandbox.run(
            main_job(f"""
            import socket
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=2)
            except OSError:
                pass
            else:
                raise AssertionError("connected to the host's loopback")
        """)
        )
    finally:
        server.close()
    assert result.status is JobStatus.PASSED, result.error
    assert result.network_cut


def test_pytest_checks_report_each_test(sandbox):
    tests = textwrap.dedent("""
        import pytest

        @pytest.mark.parametrize("n", [1, 2])
        def test_even(n):
            assert n % 2 == 0

        def test_fine():
            pass
    """)
    job = Job(
        files=(("test_x.py", tests),),
        checks=(Check(CheckKind.PYTEST, "test_x.py", "test"),),
        stop_on_first_failure=False,
    )
    result = sandbox.run(job)
    assert result.status is JobStatus.FAILED
    by_name = {o.name: o.status for o in result.outcomes}
    assert by_name == {
        "test::test_even[1]": "failed",
        "test::test_even[2]": "passed",
        "test::test_fine": "passed",
    }


def test_a_skipped_case_is_recorded_launching_nothing(sandbox):
    """Each case's launches (``extra["coverage"]``, what picks the written tests a mutant
    runs): a case skipped before it runs launched nothing, whatever the case before it
    launched."""
    kernel = textwrap.dedent("""
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        def copy(x):
            out = torch.empty_like(x)
            copy_kernel[(1,)](x, out, x.numel(), BLOCK=16)
            return out
    """)
    tests = textwrap.dedent("""
        import pytest
        import torch
        from k import copy

        def test_a_copies():
            x = torch.arange(8.0)
            assert torch.equal(copy(x), x)

        @pytest.mark.skip(reason="not today")
        def test_b_skipped():
            copy(torch.ones(4))

        def test_c_launches_nothing():
            assert torch.ones(3).sum() == 3
    """)
    job = Job(
        files=(("k.py", kernel), ("test_k.py", tests)),
        checks=(Check(CheckKind.PYTEST, "test_k.py", "test"),),
        stop_on_first_failure=False,
    )
    result = sandbox.run(job)
    assert result.status is JobStatus.PASSED, result.error
    coverage = {k.rsplit("::", 1)[-1]: v["functions"] for k, v in result.extra["coverage"].items()}
    assert coverage["test_a_copies"] == ["copy_kernel"]
    assert coverage.get("test_b_skipped", []) == []
    assert coverage["test_c_launches_nothing"] == []


def test_worker_killed_mid_job_is_an_error_and_replaced(sandbox):
    """A worker dying mid-job is an error (never a kill) and the pool heals."""
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(sandbox.run, main_job("import time\ntime.sleep(30)\n", timeout_s=25))
        time.sleep(1.0)
        busy = [w for w in sandbox._all if w not in sandbox._idle.idle()]
        assert len(busy) == 1
        scratch = busy[0].scratch
        assert scratch and os.listdir(scratch)  # the job's directory is in the worker's scratch
        os.kill(busy[0].proc.pid, signal.SIGKILL)
        result = future.result(timeout=60)
    assert result.status is JobStatus.ERROR
    assert "replaced" in result.error
    assert not os.path.exists(scratch)  # nothing of the killed worker's job is left behind
    assert all(sandbox.run(main_job("x = 1\n")).status is JobStatus.PASSED for _ in range(3))


def test_overlapping_run_jobs_calls_each_get_every_result(sandbox):
    """Two stages of one run (the explorer's stage 2 while a check runs) share the pool:
    one call ending, or its consumer stopping early, must not cancel the other's jobs."""
    import threading

    from mutant_gate.engine.jobs import JobRunner

    run = JobRunner(sandbox, None, "interpret", None)
    got: dict[str, list[str]] = {"short": [], "long": [], "early": []}

    def consume(name: str, count: int, sleep: float, stop_after: int | None = None) -> None:
        jobs = {
            f"{name}{i}": main_job(f"import time\ntime.sleep({sleep})\nx = {i}\n")
            for i in range(count)
        }
        for event in run.run_jobs(jobs):
            if event.kind == "finished":
                assert event.result is not None and event.result.status is JobStatus.PASSED
                got[name].append(event.key)
                if stop_after is not None and len(got[name]) >= stop_after:
                    break

    threads = [
        # stops after its first result while its second job still runs: its cleanup
        # must not cancel the jobs the other calls queue meanwhile
        threading.Thread(target=consume, args=("early", 4, 1.0, 1)),
        threading.Thread(target=consume, args=("long", 8, 0.1)),
        threading.Thread(target=consume, args=("short", 1, 0.0)),
    ]
    for t in threads:
        t.start()
        time.sleep(0.2)
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a run_jobs call never finished"
    assert sorted(got["long"]) == [f"long{i}" for i in range(8)]
    assert got["short"] == ["short0"]
    assert len(got["early"]) == 1
    assert not run.cancel.is_set()


def test_preload_leaves_the_module_level_check_out_of_a_probe_test(sandbox):
    """A probe test's module is loaded without its module-level check (a tutorial's can
    take longer than every probe test together); without preload the import runs it."""
    module = textwrap.dedent("""
        def double(x):
            return 2 * x


        def slow_check():
            raise RuntimeError("the module-level check ran")


        slow_check()
        FACTOR = double(1)
    """)
    test = "from mod import double\n\n\ndef test_double():\n    assert double(3) == 6\n"

    def job(preload: str) -> Job:
        return Job(
            files=(("mod.py", module), ("test_mod.py", test)),
            checks=(Check(CheckKind.PYTEST, "test_mod.py", "test:extra", preload=preload),),
            timeout_s=20.0,
        )

    assert sandbox.run(job("mod")).status is JobStatus.PASSED
    failed = sandbox.run(job(""))
    assert failed.status is JobStatus.FAILED and "the module-level check ran" in failed.error
    assert Job.from_json(job("mod").to_json()) == job("mod")
    assert "preload" not in job("").to_json()["checks"][0]  # unchanged cache keys otherwise


def test_the_pool_serves_once_one_worker_is_ready_and_the_rest_join():
    """``start`` returns with the first ready worker (the original runs while the others
    import torch); every worker joins the pool when ready, and closing a pool whose
    workers are still starting leaves no worker behind."""
    from mutant_gate.engine.sandbox.local import LocalSandbox

    with LocalSandbox(workers=2) as box:
        box.start()
        assert 1 <= len(box._all) <= 2 and box.versions.get("torch")
        first = box.run(main_job("x = 1\n"))
        assert first.status is JobStatus.PASSED, first.error
        box.start(wait_all=True)
        assert len(box._all) == 2 and not box._starting and not box.start_errors
        assert len({w.proc.pid for w in box._all}) == 2
    starting = LocalSandbox(workers=2)
    starting.start()
    procs = [w.proc for w in starting._all + starting._starting]
    starting.close()
    time.sleep(0.5)
    assert all(p.poll() is not None for p in procs), "a worker outlived the pool"


def test_a_job_started_ahead_is_taken_not_run_again(sandbox):
    """``JobRunner.ahead`` (the probe's capture beside the mutant phase): the first later
    call for the same job takes the run started ahead, metered for that caller; a call
    after it runs the job anew (without a cache nothing else holds it)."""
    from mutant_gate.engine.jobs import JobRunner

    run = JobRunner(sandbox, None, "interpret", None)
    job = main_job("import os, time\ntime.sleep(0.5)\nraise SystemExit(os.urandom(8).hex())\n")
    run.ahead(job)
    run.ahead(job)  # started already: not a second run
    assert len(run._ahead) == 1
    future = next(iter(run._ahead.values()))
    with run.metered() as meter:
        ((taken, cached),) = run.run_all({"capture": job}).values()
    assert not cached and not run._ahead
    assert taken.status is JobStatus.FAILED
    assert taken.error == future.result().error  # the very run started ahead
    assert meter.job_s == pytest.approx(taken.spent_s)  # its CPU seconds, not the sleep
    ((again, _),) = run.run_all({"capture": job}).values()
    assert again.error != taken.error  # a fresh run: a fresh random line


def test_closing_ends_every_job_and_the_worker_started_in_a_dead_ones_place():
    """Closing the pool while one job runs, one waits for a worker, and a dead worker's
    replacement is still starting: every call returns an error at once (never a
    verdict, never a wait for the job's limit), and no worker outlives the pool."""
    from mutant_gate.engine.job import CLOSED_WHILE_RUNNING
    from mutant_gate.engine.sandbox.local import LocalSandbox

    box = LocalSandbox(workers=2)
    box.start(wait_all=True)
    sleeper = main_job("import time\ntime.sleep(60)\n", timeout_s=55)
    with ThreadPoolExecutor(4) as pool:
        running = [pool.submit(box.run, sleeper) for _ in range(2)]
        time.sleep(1.0)
        waiting = pool.submit(box.run, main_job("x = 1\n"))
        doomed = box._all[0]
        os.kill(doomed.proc.pid, signal.SIGKILL)  # its job's thread starts a replacement
        deadline = time.monotonic() + 30
        while not box._starting and time.monotonic() < deadline:
            time.sleep(0.02)
        assert box._starting, "no replacement was started"
        procs = [w.proc for w in box._all + box._starting]
        started = time.monotonic()
        box.close()
        results = [f.result(timeout=40) for f in [*running, waiting]]
    assert time.monotonic() - started < 40  # the sleepers' limit is 55 s
    assert all(r.status is JobStatus.ERROR for r in results), results
    assert sum(r.error == CLOSED_WHILE_RUNNING for r in results) >= 2, results
    time.sleep(0.5)
    assert all(p.poll() is not None for p in procs), "a worker outlived the pool"
    assert box.run(main_job("x = 1\n")).status is JobStatus.ERROR  # closed stays closed


def test_a_job_times_the_imports_a_warm_runner_keeps_not_its_own_modules(sandbox):
    """``extra["imports"]``: the modules a job loads from outside its own files (what a
    warm runner keeps for the next job), timed; a module of the job's own, however slow to
    import, is not among them."""
    tests = textwrap.dedent("""
        import burn

        def test_it():
            import mailbox, pydoc, wave
            assert burn.total > 0
    """)
    burn = "total = 0\nfor i in range(4_000_000):\n    total += i\n"  # about 0.3 CPU s
    job = Job(
        files=(("test_x.py", tests), ("burn.py", burn)),
        checks=(Check(CheckKind.PYTEST, "test_x.py", "test"),),
    )
    result = sandbox.run(job)
    assert result.status is JobStatus.PASSED, result.error
    imports = result.extra["imports"]
    assert imports["modules"] >= 3  # mailbox, pydoc, wave (and what they import, inside)
    assert 0 < imports["cpu_s"] < 0.15 < result.cpu_s - imports["cpu_s"]


def test_a_suite_whose_failures_print_past_the_output_limit_still_answers(sandbox):
    """pytest's own report (every failure's traceback) is cut at ``REPORT_CHARS`` a job,
    across its test files: five files of failing cases printing 2 MB each ran a real
    library's original past the job's 4 MB output limit, and the job died of it; each case's
    outcome still comes with its message."""
    tests = textwrap.dedent("""
        import pytest

        @pytest.mark.parametrize("n", range(10))
        def test_loud(n):
            raise ValueError(str(n) + "x" * 200_000)

        def test_quiet():
            pass
    """)
    names = [f"test_{k}.py" for k in range(5)]
    job = Job(
        files=tuple((name, tests) for name in names),
        checks=tuple(Check(CheckKind.PYTEST, name, f"test-{name}") for name in names),
        stop_on_first_failure=False,
    )
    result = sandbox.run(job)
    assert result.status is JobStatus.FAILED, result.error[:500]
    by_name = {o.name: o for o in result.outcomes}
    assert len(by_name) == 55
    assert by_name["test-test_4.py::test_quiet"].status == "passed"
    assert by_name["test-test_4.py::test_loud[9]"].status == "failed"
    assert "ValueError" in by_name["test-test_4.py::test_loud[9]"].message
