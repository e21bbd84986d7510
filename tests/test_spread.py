"""The original's suite spread over the workers (engine/spread.py): shares of test files, each
a job of its own, joined into the one result a single job would have given."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from mutant_gate.engine.job import Check, CheckKind, CheckOutcome, JobResult, JobStatus
from mutant_gate.engine.kernel_file import EXTRA_TESTS
from mutant_gate.engine.spread import joined, shares

from .conftest import run_cli
from .test_library_run import QUICK, copy_lib, verdicts


def _tests(tmp_path: Path, sizes: list[int]) -> tuple[Check, ...]:
    checks = [Check(CheckKind.MAIN, str(tmp_path / "mod.py"), "own-check")]
    for i, size in enumerate(sizes):
        path = tmp_path / f"test_{i}.py"
        path.write_text("#" * size)
        checks.append(Check(CheckKind.PYTEST, str(path), EXTRA_TESTS))
    return tuple(checks)


def test_test_files_are_dealt_by_size_with_the_own_check_first(tmp_path):
    checks = _tests(tmp_path, [900, 100, 500, 450, 60, 40])
    split = shares(checks, 3)
    assert len(split) == 3
    assert sorted(c.path for s in split for c in s) == sorted(c.path for c in checks)
    assert split[0][0].name == "own-check"  # and no other share has it
    assert all(c.name == EXTRA_TESTS for s in split[1:] for c in s)
    sizes = [sum(Path(c.path).stat().st_size for c in s if c.name == EXTRA_TESTS) for s in split]
    assert max(sizes) - min(sizes) <= 450, sizes  # largest first onto the lightest share
    for share in split:  # each share keeps the given order
        assert list(share) == [c for c in checks if c in share]


def test_a_suite_too_small_to_share_stays_one_job(tmp_path):
    checks = _tests(tmp_path, [100, 200, 300])
    assert shares(checks, 2) == [checks]  # 3 files: fewer than two a share
    assert shares(checks, 1) == [checks]
    assert len(shares(_tests(tmp_path, [100, 200, 300, 400]), 8)) == 2


def _result(status, cases, extra=None, duration=1.0, error=""):
    """A share's result: its cases as outcomes (``test::NODEID``), its records."""
    outcomes = tuple(CheckOutcome(f"test::{c}", st, sec, "") for c, st, sec in cases)
    return JobResult(
        status=status,
        outcomes=outcomes,
        error=error,
        duration_s=duration,
        extra={"coverage": {c: {"functions": ["k"]} for c, _, _ in cases}, "launched": ["k"],
               "reaches": [f"m:{c}" for c, _, _ in cases], **(extra or {})},
    )  # fmt: skip


def test_joined_results_read_as_one_job():
    a = _result(JobStatus.PASSED, [("a", "passed", 0.5)])
    b = _result(JobStatus.FAILED, [("b", "failed", 2.0)], {"limit": {"limit": "x"}}, 3.0, "b!")
    one = joined([a, b])
    assert one.status is JobStatus.FAILED and one.error == "b!"
    assert one.first_failure == b.outcomes[0]
    assert [o.name for o in one.outcomes] == ["test::a", "test::b"]
    assert set(one.extra["coverage"]) == {"a", "b"}
    assert one.extra["reaches"] == ["m:a", "m:b"]
    assert one.extra["limit"] == {"limit": "x"}
    # the cases' time plus the slowest share's start: 2.5 + max(0.5, 1.0)
    assert one.duration_s == pytest.approx(3.5)
    assert one.extra["spread"] == {"shares": 2, "seconds": [1.0, 3.0]}
    passed = joined([a, a])
    assert passed.status is JobStatus.PASSED and passed.error == "" and "limit" not in passed.extra


def test_joined_cpu_seconds_pay_one_shares_start_not_every_shares():
    """CPU seconds, which set the mutants' limits, are joined as the wall seconds are: the
    cases' own plus the most a share spent outside its cases. Summed, three shares' starts
    (imports, a GPU context, collection) made a real library's limits 7 minutes."""

    def share(cases: dict[str, float], cpu_s: float) -> JobResult:
        result = _result(JobStatus.PASSED, [(c, "passed", s) for c, s in cases.items()])
        coverage = {c: {"functions": ["k"], "cpu_s": s} for c, s in cases.items()}
        return replace(result, cpu_s=cpu_s, extra={**result.extra, "coverage": coverage})

    a = share({"a": 1.0, "b": 2.0}, cpu_s=53.0)  # 50 s outside its cases
    b = share({"c": 0.5}, cpu_s=40.5)  # 40 s outside
    one = joined([a, b])
    assert one.cpu_s == pytest.approx(3.5 + 50.0)
    assert one.spent_s == pytest.approx(53.5)
    # a share whose cases carry no CPU seconds: the shares' sum, as before they were kept
    bare = _result(JobStatus.PASSED, [("d", "passed", 1.0)])
    assert joined([a, replace(bare, cpu_s=7.0)]).cpu_s == pytest.approx(60.0)


def test_joined_imports_leave_what_a_warm_runners_share_pays_most():
    """A warm runner keeps the third-party modules a job imported: the joined record's
    ``imports`` are what, taken from its time outside the cases, leaves the largest of the
    shares' outside times less their own imports (the estimate's per-mutant start)."""

    def share(case_s: float, cpu_s: float, imports_cpu_s: float) -> JobResult:
        result = _result(JobStatus.PASSED, [("x", "passed", case_s)])
        coverage = {"x": {"functions": ["k"], "cpu_s": case_s}}
        imports = {"cpu_s": imports_cpu_s, "wall_s": imports_cpu_s, "modules": 3}
        return replace(
            result, cpu_s=cpu_s, extra={**result.extra, "coverage": coverage, "imports": imports}
        )

    a = share(1.0, 31.0, 28.0)  # 30 s outside its case, 2 of them not imports
    b = share(1.0, 21.0, 15.0)  # 20 s outside, 5 not imports
    one = joined([a, b])
    outside = one.cpu_s - 2.0
    assert outside == pytest.approx(30.0)
    assert outside - one.extra["imports"]["cpu_s"] == pytest.approx(5.0)
    assert one.extra["imports"]["modules"] == 6


def test_a_share_that_timed_out_keeps_the_case_log_a_timeout_says():
    a = _result(JobStatus.PASSED, [("a", "passed", 0.5), ("c", "passed", 0.25)])
    log = {"collected": 3, "finished": [{"case": "b1", "status": "passed", "duration_s": 9.0}],
           "running": "b2"}  # fmt: skip
    b = _result(JobStatus.TIMEOUT, [], {"cases": log, "limit": {"limit": "time"}}, 120.0)
    one = joined([a, b])
    assert one.status is JobStatus.TIMEOUT
    cases = one.extra["cases"]
    assert cases["collected"] == 5 and cases["running"] == "b2"
    assert [c["case"] for c in cases["finished"]] == ["a", "c", "b1"]
    assert one.extra["limit"] == {"limit": "time"}


@pytest.mark.slow
def test_a_spread_original_gives_the_single_jobs_verdicts(tmp_path):
    """A library whose suite has five test files, at -j 2: the original runs as two shares,
    followed live as one job is (a slow case's line), and every verdict is the one the
    unshared original (-j 1) gives."""
    root = copy_lib(tmp_path)
    tests = root / "tests"
    shutil.copy(tests / "test_scale.py", tests / "test_scale_again.py")
    (tests / "test_slow_case.py").write_text(
        "import time\n\n\ndef test_sleeps():\n    time.sleep(1.1)\n"
    )
    reports, said = {}, {}
    for jobs in ("1", "2"):
        out = tmp_path / f"j{jobs}.json"
        proc = run_cli(
            "run", "src/kernel_lib", "--tests", "tests", *QUICK, "-j", jobs,
            "--cache-dir", str(tmp_path / f"cache{jobs}"), "--json", str(out), cwd=root,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        reports[jobs] = json.loads(out.read_text())
        said[jobs] = proc.stdout
    assert verdicts(reports["2"]) == verdicts(reports["1"])
    assert [f["status"] for f in reports["2"]["files"]] == ["judged"] * 3
    assert "spread" not in reports["1"]["baseline"]
    assert reports["2"]["baseline"]["spread"]["shares"] == 2
    cases = {c["case"] for c in reports["1"]["baseline"]["cases"]}
    assert {c["case"] for c in reports["2"]["baseline"]["cases"]} == cases
    # the shares are followed live, as one job is: a case slower than a second is said
    for jobs in ("1", "2"):
        assert re.search(r"original: tests/test_slow_case.py::test_sleeps passed in 1\.\d s",
                         said[jobs]), said[jobs]  # fmt: skip
        # each mutant runs its kernel's cases: the limit said is the most one could get
        assert "mutant limit at most" in said[jobs], said[jobs]


#: a test file whose every case fails, with a long name: three of them make one job's answer
#: larger than a result may hold (long messages alone no longer do: ``runner._fitted``)
NOISY = """
import pytest


@pytest.mark.parametrize("n", range(100), ids=lambda n: f"{n}-" + "x" * 2500)
def test_noisy(n):
    assert False, "x" * 5000
"""


@pytest.mark.slow
def test_an_original_too_large_for_one_result_runs_again_one_job_a_test_file(tmp_path):
    """A suite whose original's answer passes the limit one result may hold (a real
    library's thousand cases and their failures' text): the job runs again as one job a test
    file, and the run goes on with every failing case left out, as with an original that
    fits."""
    root = copy_lib(tmp_path)
    for name in ("test_noisy_a.py", "test_noisy_b.py", "test_noisy_c.py"):
        (root / "tests" / name).write_text(NOISY)
    proc = run_cli(
        "run", "src/kernel_lib/ops/scale.py", "--tests", "tests", *QUICK, "-j", "1",
        "--json", "r.json", cwd=root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((root / "r.json").read_text())
    left = [c for c in report["left_out_cases"] if "test_noisy" in c["case"]]
    assert len(left) == 300 and all(c["why"] == "failed" for c in left)
    shares = report["baseline"]["spread"]["shares"]  # one job, run again a file a job
    assert shares == len(list((root / "tests").glob("test_*.py"))), shares
    assert report["score"]["total"] > 0
