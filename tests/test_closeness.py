"""The closeness records (engine/harness/closeness.py): every closeness assertion a job's
checks make, the line it is attributed to and the error it let through.

The jobs run for real, as a sandbox runs them (``worker.run_job``: a forked, isolated child
per job, the harness's ``run_checks`` in it), all in one subprocess whose results the tests
read; the numbers themselves (``numbers``, which needs no install) are checked in this
process. Each call in the tests' files carries a ``# L:name`` mark: ``line`` finds it.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import textwrap

import pytest
import torch

from mutant_gate.engine.harness import closeness
from mutant_gate.engine.harness.closeness import Call, numbers
from mutant_gate.engine.job import Check, CheckKind, Job, JobResult, JobStatus

KINDS = textwrap.dedent(
    """
    import numpy as np
    import pytest
    import torch
    from torch.testing import assert_close

    from testutils.checks import check_close


    def one_off(dtype=torch.float32):
        expected = torch.ones(8, dtype=dtype)
        actual = expected.clone()
        actual[3] = 1.01
        return actual, expected


    def test_assert_close_defaults():
        expected = torch.full((4,), 2.0)
        assert_close(expected + 4e-6, expected)  # L:defaults


    def test_assert_close_given():
        actual, expected = one_off(torch.float64)
        assert_close(actual, expected, atol=0.02, rtol=0.001)  # L:given


    def test_torch():
        actual, expected = one_off()
        assert torch.allclose(actual, expected, atol=0.02)  # L:allclose
        assert actual.allclose(expected, atol=0.02)  # L:method
        assert torch.isclose(actual, expected, rtol=0.02).all()  # L:isclose


    def test_numpy():
        actual, expected = (t.numpy() for t in one_off())
        np.testing.assert_allclose(actual, expected, rtol=0.02)  # L:assert_allclose
        np.testing.assert_array_almost_equal(actual, expected, decimal=1)  # L:almost
        assert np.allclose(actual, expected, atol=0.02)  # L:np_allclose
        assert np.isclose(actual, expected, atol=0.02).all()  # L:np_isclose


    def test_approx():
        actual, expected = one_off()
        assert actual.tolist() == pytest.approx(expected.tolist(), abs=0.02)  # L:approx


    def test_helper():
        actual, expected = one_off()
        for _ in range(3):
            check_close(actual, expected)  # L:helper


    def test_varied():
        actual, expected = one_off()
        for atol in (0.02, 0.05, 1e-4):
            torch.allclose(actual, expected, atol=atol)  # L:varied
    """
)

HELPER = textwrap.dedent(
    """
    import torch


    def check_close(actual, expected):
        '''A project's own assertion helper, in a file of its own (test/utils.py's kind).'''
        assert torch.allclose(actual, expected, atol=0.05)  # L:inside
    """
)

BY_HAND = textwrap.dedent(
    """
    import torch


    def assert_verbose_allclose(tensor1, tensor2, rtol=1e-05, atol=1e-08, max_print=5):
        '''A library's helper that compares by hand, never calling torch.allclose.'''
        diff = torch.abs(tensor1 - tensor2)
        bad = diff > atol + rtol * torch.abs(tensor2)
        if bad.any():
            raise AssertionError(f"{int(bad.sum())} mismatched elements")
    """
)

BY_HAND_TESTS = textwrap.dedent(
    """
    import torch

    from helpers.compare import assert_verbose_allclose


    def test_by_hand():
        expected = torch.ones(8)
        actual = expected.clone()
        actual[2] = 1.01
        assert_verbose_allclose(actual, expected, atol=0.02, rtol=0.0)  # L:by_hand
        assert_verbose_allclose(actual, expected, 0.0, 0.05)  # L:by_hand_positional
    """
)

FAILING = textwrap.dedent(
    """
    import torch
    from torch.testing import assert_close


    def test_close_fails():
        assert_close(torch.ones(3) + 1, torch.ones(3))  # L:fails


    def test_allclose_fails():
        assert torch.allclose(torch.ones(3) + 1, torch.ones(3))  # L:fails_too
    """
)

OWN_CHECK = textwrap.dedent(
    """
    import torch


    def check(actual, expected):
        torch.testing.assert_close(actual, expected, atol=0.02, rtol=0.0)  # L:own_helper


    if __name__ == "__main__":
        expected = torch.ones(8)
        check(expected + 0.001, expected)
        assert torch.allclose(expected * 1.0, expected)  # L:own
    """
)

MANY = textwrap.dedent(
    """
    import pytest
    import torch


    @pytest.mark.parametrize("n", range(LIMIT + 5))
    def test_one(n):
        torch.testing.assert_close(torch.ones(2) * n, torch.ones(2) * n)
    """
).replace("LIMIT", str(closeness.LIMIT))

FILES = {
    "test_kinds.py": KINDS,
    "testutils/checks.py": HELPER,
    "test_failing.py": FAILING,
    "check.py": OWN_CHECK,
    "helpers/compare.py": BY_HAND,
    "test_by_hand.py": BY_HAND_TESTS,
}
#: (a check's tolerances tightened at three lines: each fails its test there)
TIGHTER = {"atol": 0.001, "rtol": 0.0}
TIGHTENED = ("allclose", "almost", "approx")


def line(mark: str) -> str:
    """``"file.py:LINE"`` of the call marked ``# L:mark`` in ``FILES``."""
    for name, text in FILES.items():
        for n, source in enumerate(text.splitlines(), 1):
            if source.endswith(f"# L:{mark}"):
                return f"{name}:{n}"
    raise KeyError(mark)


def pytest_job(files: dict[str, str], test: str, **kw) -> Job:
    return Job(
        files=tuple(files.items()),
        checks=(Check(CheckKind.PYTEST, test, f"test:{test}", plugins=False),),
        stop_on_first_failure=False,
        timeout_s=120.0,
        **kw,
    )


def jobs() -> dict[str, Job]:
    kinds = {k: FILES[k] for k in ("test_kinds.py", "testutils/checks.py")}
    by_hand = {k: FILES[k] for k in ("test_by_hand.py", "helpers/compare.py")}
    return {
        "by_hand": pytest_job(by_hand, "test_by_hand.py"),
        "by_hand_tightened": pytest_job(
            by_hand, "test_by_hand.py", tighten={line("by_hand"): TIGHTER}
        ),
        "kinds": pytest_job(kinds, "test_kinds.py"),
        "tightened": pytest_job(
            kinds, "test_kinds.py", tighten={line(m): TIGHTER for m in TIGHTENED}
        ),
        "failing": pytest_job({"test_failing.py": FAILING}, "test_failing.py"),
        "many": pytest_job({"test_many.py": MANY}, "test_many.py"),
        "own": Job(
            files=(("check.py", OWN_CHECK),),
            checks=(Check(CheckKind.MAIN, "check.py", "own-check"),),
            timeout_s=120.0,
        ),
    }


CHILD = """
import json, sys
from mutant_gate.engine.harness.worker import run_job
with open(sys.argv[1], encoding="utf-8") as fh:
    jobs = json.load(fh)
print(json.dumps({name: run_job(job) for name, job in jobs.items()}))
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, JobResult]:
    """Every job of ``jobs()``, run through the harness in one subprocess."""
    path = tmp_path_factory.mktemp("closeness") / "jobs.json"
    path.write_text(json.dumps({k: j.to_json() for k, j in jobs().items()}))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    answers = json.loads(out.stdout.strip().splitlines()[-1])
    return {name: JobResult.from_json(data) for name, data in answers.items()}


def by_where(result: JobResult) -> dict[str, dict]:
    found: dict[str, dict] = {}
    for rec in result.extra["closeness"]:
        assert rec["where"] not in found, rec  # one case and one function per line here
        found[rec["where"]] = rec
    return found


def outcome(result: JobResult, test: str):
    return next(o for o in result.outcomes if o.name.endswith(f"::{test}"))


# -- real jobs --------------------------------------------------------------------------


@pytest.mark.slow
def test_every_kind_is_recorded_at_its_line_with_its_tolerances(results):
    result = results["kinds"]
    assert result.status is JobStatus.PASSED, result.error
    recs = by_where(result)
    expected = {
        "defaults": ("torch.testing.assert_close", 1e-5, 1.3e-6, []),
        "given": ("torch.testing.assert_close", 0.02, 0.001, ["atol", "rtol"]),
        "allclose": ("torch.allclose", 0.02, 1e-5, ["atol"]),
        "method": ("torch.Tensor.allclose", 0.02, 1e-5, ["atol"]),
        "isclose": ("torch.isclose", 1e-8, 0.02, ["rtol"]),
        "assert_allclose": ("numpy.testing.assert_allclose", 0.0, 0.02, ["rtol"]),
        "almost": ("numpy.testing.assert_array_almost_equal", 1.5 * 10.0**-1, 0.0, ["atol"]),
        "np_allclose": ("numpy.allclose", 0.02, 1e-5, ["atol"]),
        "np_isclose": ("numpy.isclose", 0.02, 1e-5, ["atol"]),
        "approx": ("pytest.approx", 0.02, 0.0, ["atol"]),  # abs alone: no rel at all
        "helper": ("torch.allclose", 0.05, 1e-5, ["atol"]),
    }
    # assert_close's own isclose, numpy's own isclose...: the library's calls, not recorded
    assert set(recs) == {line(m) for m in expected} | {line("varied")}
    for mark, (fn, atol, rtol, given) in expected.items():
        rec = recs[line(mark)]
        assert (rec["fn"], rec["atol"], rec["rtol"], rec["given"]) == (fn, atol, rtol, given)
        assert rec["case"].startswith("test_kinds.py::test_"), rec
        assert rec["stats"] and not rec["failed"] and not rec["varied"], rec
        assert not rec["nan_mismatch"] and "tightened" not in rec, rec
    assert recs[line("defaults")]["case"] == "test_kinds.py::test_assert_close_defaults"
    assert recs[line("approx")]["shape"] == [8] and recs[line("approx")]["dtype"] == "list"
    assert recs[line("allclose")]["shape"] == [8]
    assert recs[line("allclose")]["dtype"] == "float32"
    varied = recs[line("varied")]  # the first call's tolerances; the last one returned False
    assert (varied["calls"], varied["failed"], varied["varied"]) == (3, 1, True)
    assert varied["atol"] == 0.02 and varied["atol_needed"] == pytest.approx(0.01 - 1e-5, rel=1e-4)


@pytest.mark.slow
def test_the_numbers_are_the_error_the_call_let_through(results):
    recs = by_where(results["kinds"])
    # float64: expected ones, actual 1.01 at one element, atol 0.02, rtol 0.001
    given = recs[line("given")]
    err = 1.01 - 1.0
    assert given["max_abs"] == err and given["max_rel"] == err
    assert given["atol_needed"] == err - 0.001 * 1.0  # exactly: the smallest atol at rtol
    assert given["rtol_needed"] == 0.0  # atol 0.02 alone passes it
    assert given["shape"] == [8] and given["dtype"] == "float64"
    # float32: 1.01 is 1.00999999..., computed in float32
    err32 = float(torch.tensor(1.01)) - 1.0
    allclose = recs[line("allclose")]
    assert allclose["max_abs"] == pytest.approx(err32, rel=1e-6)
    assert allclose["atol_needed"] == pytest.approx(err32 - 1e-5, rel=1e-6)
    isclose = recs[line("isclose")]  # rtol 0.02 given, atol 1e-8: rtol needed (err-atol)/1
    assert isclose["rtol_needed"] == pytest.approx(err32 - 1e-8, rel=1e-6)
    # the defaults: float32's (rtol 1.3e-6, atol 1e-5), on 2.0 + 4e-6
    defaults = recs[line("defaults")]
    err_d = float(torch.tensor(2.0 + 4e-6)) - 2.0
    assert defaults["max_abs"] == pytest.approx(err_d, rel=1e-6)
    assert defaults["atol_needed"] == pytest.approx(err_d - 1.3e-6 * 2.0, rel=1e-5)
    assert defaults["rtol_needed"] == 0.0
    approx = recs[line("approx")]  # approx's rule, max(rel*|b|, abs): rel 0 needs all of err
    assert approx["atol_needed"] == pytest.approx(err32, rel=1e-6)


@pytest.mark.slow
def test_a_helper_in_another_file_is_attributed_to_the_test_line(results):
    rec = by_where(results["kinds"])[line("helper")]
    assert rec["case"] == "test_kinds.py::test_helper"
    assert rec["helper"] == f"{line('inside')} check_close"
    assert rec["helper"].startswith("testutils/checks.py:")
    assert rec["calls"] == 3
    assert not any("helper" in r for r in results["kinds"].extra["closeness"] if r is not rec)


@pytest.mark.slow
def test_a_projects_own_helper_that_compares_by_hand_is_recorded_and_tightened(results):
    """A library's ``assert_verbose_allclose`` (it never calls torch.allclose) is found by
    its name and its rtol/atol parameters, read as allclose at the test line that called
    it, its tolerances given by keyword or by position; tightened, it fails there."""
    fn = "helpers.compare.assert_verbose_allclose"
    recs = by_where(results["by_hand"])
    keyword, positional = recs[line("by_hand")], recs[line("by_hand_positional")]
    assert keyword["fn"] == positional["fn"] == fn
    assert (keyword["atol"], keyword["rtol"], keyword["failed"]) == (0.02, 0.0, 0)
    assert (positional["atol"], positional["rtol"]) == (0.05, 0.0)
    assert keyword["max_abs"] == pytest.approx(0.01, rel=1e-3)
    assert keyword["atol_needed"] == pytest.approx(0.01, rel=1e-3)
    assert "helper" not in keyword  # the test called it: that line is the record's
    tightened = results["by_hand_tightened"]
    assert outcome(tightened, "test_by_hand").status == "failed"
    rec = by_where(tightened)[line("by_hand")]
    assert rec["tightened"] is True and rec["failed"] == 1


PLAIN_PYTEST = (
    "import sys, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', sys.argv[1]]))"
)


def _assert_lines(text: str) -> list[str]:
    """pytest's ``E`` lines, addresses left out."""
    lines = [s.strip() for s in text.splitlines() if s.startswith("E ")]
    return [re.sub(r"0x[0-9a-f]+", "0x?", s) for s in lines]


@pytest.mark.slow
def test_a_failing_call_is_recorded_and_fails_with_its_own_message(results, tmp_path):
    result = results["failing"]
    assert result.status is JobStatus.FAILED
    recs = by_where(result)
    for mark in ("fails", "fails_too"):
        rec = recs[line(mark)]
        assert rec["failed"] == 1 and rec["calls"] == 1, rec
        assert rec["max_abs"] == 1.0 and rec["atol_needed"] > 0.99, rec
    # the same file under plain pytest: the same failures, word for word
    (tmp_path / "test_failing.py").write_text(FAILING)
    plain = subprocess.run(
        [sys.executable, "-c", PLAIN_PYTEST, "test_failing.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    for test in ("test_close_fails", "test_allclose_fails"):
        message = outcome(result, test).message
        assert outcome(result, test).status == "failed"
        assert _assert_lines(message) and set(_assert_lines(message)) <= set(
            _assert_lines(plain.stdout)
        ), (message, plain.stdout)
        assert "closeness" not in message  # no frame of the wrapper in the traceback
    assert "Tensor-likes are not close!" in outcome(result, "test_close_fails").message
    assert "<built-in method allclose" in outcome(result, "test_allclose_fails").message


@pytest.mark.slow
def test_tightening_fails_a_passing_test_at_that_line_only(results):
    result = results["tightened"]
    failed = {o.name.split("::")[-1] for o in result.outcomes if o.status == "failed"}
    assert failed == {"test_torch", "test_numpy", "test_approx"}, result.outcomes
    for test, mark in (("test_torch", "allclose"), ("test_numpy", "almost")):
        assert f"{line(mark)}: AssertionError" in outcome(result, test).message
    assert "Not equal to tolerance rtol=0, atol=0.001" in outcome(result, "test_numpy").message
    recs = by_where(result)
    for mark in TIGHTENED:
        rec = recs[line(mark)]
        assert rec["tightened"] is True and rec["failed"] == 1, rec
        assert (rec["atol"], rec["rtol"], rec["given"]) == (0.001, 0.0, ["atol", "rtol"])
    untouched = [r for w, r in recs.items() if w not in {line(m) for m in TIGHTENED}]
    assert untouched and not any("tightened" in r for r in untouched)
    assert not any(r["failed"] for r in untouched if r["where"] != line("varied"))
    # the calls after a failing one in its test never ran
    assert line("method") not in recs and line("assert_allclose") in recs


@pytest.mark.slow
def test_the_own_checks_calls_are_attributed_to_the_kernel_files_lines(results):
    result = results["own"]
    assert result.status is JobStatus.PASSED, result.error
    recs = by_where(result)
    assert set(recs) == {line("own_helper"), line("own")}
    rec = recs[line("own_helper")]  # no pytest case: the line that made the call
    assert rec["case"] == "own-check" and "helper" not in rec
    assert rec["fn"] == "torch.testing.assert_close" and rec["given"] == ["atol", "rtol"]
    assert rec["max_abs"] == pytest.approx(0.001, rel=1e-3)
    assert recs[line("own")]["fn"] == "torch.allclose"


@pytest.mark.slow
def test_records_past_the_limit_are_counted_not_kept(results):
    result = results["many"]
    assert result.status is JobStatus.PASSED, result.error
    assert len(result.extra["closeness"]) == closeness.LIMIT
    assert result.extra["closeness_dropped"] == 5
    assert "closeness_dropped" not in results["kinds"].extra


# -- the numbers, in this process -------------------------------------------------------


def call(actual, expected, rtol=1e-5, atol=1e-8, equal_nan=False, **kw) -> Call:
    return Call(actual, expected, rtol, atol, (), equal_nan, **kw)


def test_the_numbers_of_one_call_exactly():
    expected = torch.ones(8, dtype=torch.float64)
    actual = expected.clone()
    actual[3] = 1.01
    got = numbers(call(actual, expected, rtol=1.3e-6, atol=1e-5))
    err = 1.01 - 1.0
    assert got == {
        "max_abs": err,
        "max_rel": err,
        "atol_needed": err - 1.3e-6 * 1.0,
        "rtol_needed": (err - 1e-5) / 1.0,
        "nan_mismatch": False,
    }


def test_an_expected_zero_needs_an_atol_and_no_rtol_passes_it():
    got = numbers(call(torch.tensor([0.5, 1e-3]), torch.tensor([0.5, 0.0]), rtol=0.1, atol=0.0))
    assert got["max_rel"] == 0.0  # over |b| > 0 only
    assert got["atol_needed"] == pytest.approx(1e-3)
    assert math.isinf(got["rtol_needed"])
    approx = numbers(call(torch.tensor([2.0]), torch.tensor([1.0]), rtol=0.5, atol=0.1, rule="max"))
    assert approx["atol_needed"] == 1.0 and approx["rtol_needed"] == 1.0


def test_nan_and_inf_as_the_call_has_them():
    nan, inf = math.nan, math.inf
    a = torch.tensor([1.0, nan, inf, 2.0])
    b = torch.tensor([1.0, nan, inf, 2.5])
    same = numbers(call(a, b, equal_nan=True))
    assert same["nan_mismatch"] is False and same["max_abs"] == 0.5
    assert same["atol_needed"] == pytest.approx(0.5 - 1e-5 * 2.5)
    unequal = numbers(call(a, b, equal_nan=False))  # NaN is never close to NaN here
    assert unequal["nan_mismatch"] is True and unequal["max_abs"] == 0.5
    assert math.isinf(unequal["atol_needed"]) and math.isinf(unequal["rtol_needed"])
    one_sided = numbers(call(torch.tensor([1.0, nan]), torch.tensor([1.0, 1.0]), equal_nan=True))
    assert one_sided["nan_mismatch"] is True
    signs = numbers(call(torch.tensor([inf]), torch.tensor([-inf]), equal_nan=True))
    assert signs["nan_mismatch"] is True


def test_inputs_without_numbers_to_compare_raise_for_stats_false():
    with pytest.raises(ValueError):  # assert_close does not broadcast
        numbers(call(torch.ones(3), torch.ones(1), broadcast=False))
    assert numbers(call(torch.ones(3), torch.ones(1)))["max_abs"] == 0.0  # allclose does
    with pytest.raises(TypeError):
        numbers(call(["a", "b"], ["a", "b"]))
    assert numbers(call(torch.ones(0), torch.ones(0)))["max_abs"] == 0.0
    assert closeness.json_number(math.inf) == "inf" and closeness.json_number(0.5) == 0.5


# -- the job field ----------------------------------------------------------------------


def test_tighten_travels_with_a_job_and_only_when_set():
    plain = pytest_job({"test_x.py": ""}, "test_x.py")
    assert "tighten" not in plain.to_json()  # every other job keeps its cache key
    tight = pytest_job({"test_x.py": ""}, "test_x.py", tighten={"test_x.py:3": TIGHTER})
    assert tight.to_json()["tighten"] == {"test_x.py:3": TIGHTER}
    assert Job.from_json(json.loads(json.dumps(tight.to_json()))).tighten == tight.tighten
    assert Job.from_json(plain.to_json()).tighten is None
    toolchain = {"torch": "x"}
    assert tight.cache_key(toolchain) != plain.cache_key(toolchain)
