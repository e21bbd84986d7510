"""Cases that cannot fail are not run (``harness/xfail.py``): a non-strict xfail case is
reported xfailed or xpassed whatever it does, so it can kill no mutant; a real library's
such cases spawn processes for a minute each. Strict ones, ``raises=`` ones and plain cases
run as pytest runs them."""

from __future__ import annotations

import textwrap

import pytest

from mutant_gate.engine.harness.xfail import NOT_RUN
from mutant_gate.engine.job import Check, CheckKind, Job, JobStatus

TESTS = textwrap.dedent("""
    import pytest


    @pytest.mark.xfail(reason="pending")
    def test_loose():
        assert False


    @pytest.mark.xfail(1 + 1 == 2, reason="by a condition")
    def test_loose_by_condition():
        pass


    @pytest.mark.xfail(1 + 1 == 3, reason="condition false")
    def test_condition_false():
        assert False


    @pytest.mark.xfail(strict=True, reason="strict")
    def test_strict():
        pass


    @pytest.mark.xfail(raises=ZeroDivisionError, reason="only this")
    def test_raises():
        raise ValueError("another exception")


    def test_plain():
        pass
""")


@pytest.mark.slow
def test_a_case_that_cannot_fail_is_skipped_and_the_rest_run_as_pytest_runs_them(sandbox):
    job = Job(
        files=(("test_x.py", TESTS),),
        checks=(Check(CheckKind.PYTEST, "test_x.py", "test"),),
        stop_on_first_failure=False,
    )
    result = sandbox.run(job)
    by_name = {o.name.split("::", 1)[1]: o for o in result.outcomes}
    # skipped before they start (pytest's own xfail says its reason, "pending"): nothing
    # they do can fail the suite
    for name in ("test_loose", "test_loose_by_condition"):
        assert by_name[name].status == "skipped"
        assert NOT_RUN in by_name[name].message, by_name[name]
    # run as pytest runs them: an xpass of a strict xfail and another exception than the
    # one named both fail; a false condition is no xfail
    assert by_name["test_strict"].status == "failed"
    assert by_name["test_raises"].status == "failed"
    assert by_name["test_condition_false"].status == "failed"
    assert by_name["test_plain"].status == "passed"
    assert result.status is JobStatus.FAILED
