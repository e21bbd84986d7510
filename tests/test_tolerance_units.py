"""The tolerance check's reading of closeness records (engine/checks/tolerance.py): which
line it names, the tolerance it proposes, and the per-test-line view, on records as the
harness writes them."""

from __future__ import annotations

import math
from dataclasses import replace

from mutant_gate.engine.checks.tolerance import (
    finding,
    line_words,
    nice_between,
    per_line,
    row_field,
    site_case_only,
    sites,
)
from mutant_gate.engine.job import Check, CheckKind, Job, JobResult, JobStatus


def result(*records: dict) -> JobResult:
    return JobResult(JobStatus.PASSED, (), "", 0.1, extra={"closeness": list(records)})


def record(where: str, needed: float, max_abs: float, **more) -> dict:
    return {"case": "t.py::test_a", "where": where, "fn": "assert_close", "calls": 1,
            "failed": 0, "atol": 0.2, "rtol": 0.02, "atol_needed": needed,
            "max_abs": max_abs, **more}  # fmt: skip


def test_a_proposal_lies_between_the_originals_error_and_the_mutants_with_headroom():
    assert nice_between(3e-4, 0.06) == 5e-3  # nearest the geometric mean, 4.2e-3
    assert nice_between(0.0, 1e-3) == 1e-4  # an exact original: a tenth of the mutant's
    assert nice_between(4e-4, 7e-4) is None  # no room on both sides: too close to claim
    assert nice_between(7.5e-9, 1.5e-8) is None  # a rounding's worth apart
    assert nice_between(0.06, 0.06) is None  # nothing between
    assert nice_between(0.1, 0.05) is None  # the mutant's error is the smaller


def test_the_line_named_is_where_the_mutants_error_grew_most():
    original = sites(
        result(record("t.py:10", 1e-4, 1e-3), record("t.py:20", 1e-3, 2e-3)), frozenset()
    )
    mutant = sites(
        result(record("t.py:10", 2e-4, 2e-3), record("t.py:20", 0.05, 0.06)), frozenset()
    )
    found = finding(original, mutant)
    assert found is not None and found.site.where == "t.py:20"
    assert found.proposal == 5e-3
    field = row_field(found, True)
    assert field["hidden"] and field["proposal"] == {"atol": 5e-3, "rtol": 0.02}
    assert field["line"].startswith(
        "t.py:20 assert_close(atol=0.2, rtol=0.02) in test_a: the original"
    )
    assert (
        "atol 0.005 (rtol 0.02 as it is) fails the mutant and passes the original (checked"
        in field["line"]
    )
    assert "not checked" in row_field(found, None)["line"]
    assert not row_field(found, False)["hidden"]


def test_no_line_is_named_where_no_error_grew_and_written_tests_are_not_the_users():
    same = sites(result(record("t.py:10", 1e-4, 1e-3)), frozenset())
    assert finding(same, same) is None
    assert row_field(None, None) == {
        "line": "no closeness assertion's error grew on this mutant",
        "hidden": False,
    }
    written = sites(
        result(record("test_k_mg_probe_1.py:5", 1.0, 1.0)), frozenset({"test_k_mg_probe_1.py"})
    )
    assert written == {}


def test_the_cases_of_one_line_stay_apart_and_the_proposal_is_for_the_case_that_grew():
    """A line a test parametrises by dtype: its float16 case's error (the same on both
    sides) would hide the float32 case's change if they were joined."""

    def both(f32: float) -> JobResult:
        return result(
            record("t.py:10", 0.0, f32, case="t.py::test_a[float32]", rtol_needed=0.0),
            record("t.py:10", 0.0, 1e-3, case="t.py::test_a[float16]", rtol_needed=0.0),
        )

    original, mutant = sites(both(2e-7), frozenset()), sites(both(1.5e-6), frozenset())
    assert len(original) == 2 and {s.case for s in original.values()} == {
        "t.py::test_a[float32]",
        "t.py::test_a[float16]",
    }
    found = finding(original, mutant)
    assert found is not None and found.site.case == "t.py::test_a[float32]"
    assert found.route == "abs" and found.proposal == 5e-7  # both within atol and rtol
    assert found.tighten == {"atol": 5e-7, "rtol": 0.0}
    assert found.site.key == "t.py:10|t.py::test_a[float32]"
    assert "in test_a[float32]" in found.line(True)
    assert "atol 5.0e-07 with rtol 0 fails the mutant" in found.line(True)
    (line,) = per_line({"m": row_field(found, True)})
    assert line["abs_checked"] == 5e-7 and line["original_max_abs"] == 2e-7
    assert line_words(line).endswith(
        "at atol 5.0e-07 with rtol 0 (the original needs 2.0e-07 there) the checked "
        "proposals kill 1"
    )


def test_a_nan_the_original_lacks_is_said_and_gets_no_proposal():
    original = sites(result(record("t.py:10", 0.0, 0.0)), frozenset())
    mutant = sites(result(record("t.py:10", "inf", "inf", nan_mismatch=True)), frozenset())
    found = finding(original, mutant)
    assert found is not None and found.proposal is None
    assert math.isinf(found.site.atol_needed)
    assert "NaN where the original has none" in found.line(None)


def test_the_per_line_view_puts_the_line_with_most_kills_first():
    def row(where: str, hidden: bool, atol: float | None) -> dict:
        return {"where": where, "fn": "assert_close", "atol": 0.2, "rtol": 0.02,
                "original": {"atol_needed": 1e-4}, "hidden": hidden,
                "proposal": {"atol": atol, "rtol": 0.02} if atol else None}  # fmt: skip

    rows = {
        "a": row("t.py:10", True, 1e-3),
        "b": row("t.py:20", True, 5e-3),
        "c": row("t.py:20", True, 2e-3),
        "d": row("t.py:20", False, None),
        "e": {"line": "no closeness assertion's error grew on this mutant", "hidden": False},
    }
    lines = per_line(rows)
    assert [x["where"] for x in lines] == ["t.py:20", "t.py:10"]
    assert lines[0]["survivors"] == ["b", "c", "d"] and lines[0]["killed"] == ["b", "c"]
    assert lines[0]["atol_checked"] == 2e-3  # the tightest checked: it kills both
    assert line_words(lines[0]) == (
        "t.py:20 lets 3 survivors through at atol 0.2; at atol 0.002 (the original needs "
        "1.0e-04 there) the checked proposals kill 2"
    )


def test_where_the_rtol_covers_both_errors_an_rtol_separates_them():
    """A rounding-sized change under ``rtol=1e-5`` needs no atol on either side: the rtol
    each needs at the call's atol is compared instead, and proposed."""
    original = sites(result(record("t.py:10", 0.0, 1e-7, rtol_needed=1e-7)), frozenset())
    mutant = sites(result(record("t.py:10", 0.0, 6e-7, rtol_needed=6e-7)), frozenset())
    found = finding(original, mutant)
    assert found is not None and found.route == "rtol" and found.proposal == 2e-7
    assert found.tighten == {"atol": 0.2, "rtol": 2e-7}
    field = row_field(found, True)
    assert field["route"] == "rtol" and field["proposal"] == {"atol": 0.2, "rtol": 2e-7}
    assert (
        "rtol 2.0e-07 (atol 0.2 as it is) fails the mutant and passes the original (checked"
        in field["line"]
    )
    (line,) = per_line({"m": field})
    assert line["rtol_checked"] == 2e-7 and line["atol_checked"] is None
    assert line_words(line).endswith(
        "at rtol 2.0e-07 (the original needs 1.0e-07 there) the checked proposals kill 1"
    )


def _job() -> Job:
    return Job(
        files=(("k.py", "x = 1\n"),),
        checks=(
            Check(CheckKind.MAIN, "k.py", "own-check"),
            Check(CheckKind.PYTEST, "test/test_a.py", "test", select=("test_x[0]", "test_y")),
            Check(CheckKind.PYTEST, "test/test_b.py", "test", select=("test_x[0]",)),
        ),
    )


def test_a_proposal_is_checked_on_the_one_case_it_is_for():
    """The checking jobs run the site's case alone (the tightened call is there); a site
    of every case joined, or one no single check holds, keeps the whole job."""
    (found,) = sites(
        result(record("test/test_a.py:9", 0.3, 0.3, case="test/test_a.py::test_y")), set()
    ).values()
    only = site_case_only(_job(), found)
    assert [(c.path, c.select) for c in only.checks] == [("test/test_a.py", ("test_y",))]
    (other,) = sites(
        result(record("test/test_b.py:4", 0.3, 0.3, case="test/test_b.py::test_x[0]")), set()
    ).values()
    assert [(c.path, c.select) for c in site_case_only(_job(), other).checks] == [
        ("test/test_b.py", ("test_x[0]",))
    ]
    # a project's tests are read where they lie: the check's path is absolute
    project = replace(
        _job(), checks=tuple(replace(c, path="/repo/" + c.path) for c in _job().checks)
    )
    assert [(c.path, c.select) for c in site_case_only(project, found).checks] == [
        ("/repo/test/test_a.py", ("test_y",))
    ]
    for case in ("", "k.py", "test/test_c.py::test_y", "test_x[0]", "st/test_a.py::test_y"):
        (site,) = sites(result(record("test/test_a.py:9", 0.3, 0.3, case=case)), set()).values()
        assert site_case_only(_job(), site) == _job(), case
