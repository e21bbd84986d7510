"""Tracebacks pytest can show (``harness/tracebacks.py``): an exception raised at an
instruction with no line number (PEP 626), as the case clock's can be in a rewritten
kernel, made pytest end its session with an INTERNALERROR, every later case unrun."""

from __future__ import annotations

import textwrap

import pytest

from mutant_gate.engine.harness.tracebacks import mend, mended
from mutant_gate.engine.job import Check, CheckKind, Job, JobStatus

# A function whose every instruction has no line number (3.11+ location table: code 15,
# "no location", up to 8 code units an entry), raising as such code does.
NO_LINES = textwrap.dedent("""
    def _no_lines(fn):
        code = fn.__code__
        table, left = bytearray(), len(code.co_code) // 2
        while left > 0:
            k = min(8, left)
            table.append(0x80 | (15 << 3) | (k - 1))
            left -= k
        fn.__code__ = code.replace(co_linetable=bytes(table))
        return fn


    @_no_lines
    def boom():
        raise ValueError("raised where no line is")
""")


def _raised() -> BaseException:
    scope: dict = {}
    exec(compile(NO_LINES, "no_lines.py", "exec"), scope)
    try:
        try:
            scope["boom"]()
        except ValueError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as exc:
        return exc


def _lines(tb) -> list:
    found = []
    while tb is not None:
        found.append(tb.tb_lineno)
        tb = tb.tb_next
    return found


def test_an_entry_without_a_line_gets_its_frames_and_the_rest_are_kept():
    exc = _raised()
    inner = exc.__cause__
    assert None in _lines(inner.__traceback__)  # the case pytest could not show
    kept = exc.__traceback__
    assert mended(kept) is kept  # every entry has a line: the same object
    before = _lines(inner.__traceback__)
    mend(exc)
    after = _lines(inner.__traceback__)
    assert None not in after and len(after) == len(before)
    assert [b for b in before if b is not None] == [
        a for a, b in zip(after, before, strict=True) if b
    ]
    assert exc.__traceback__ is kept


@pytest.mark.slow
def test_a_case_raising_where_no_line_is_fails_and_the_cases_after_it_run(sandbox):
    tests = NO_LINES + textwrap.dedent("""

        def test_a():
            boom()


        def test_b():
            assert 1 + 1 == 2
    """)
    job = Job(
        files=(("test_x.py", tests),),
        checks=(Check(CheckKind.PYTEST, "test_x.py", "test"),),
        stop_on_first_failure=False,
    )
    result = sandbox.run(job)
    by_name = {o.name: o for o in result.outcomes}
    assert result.status is JobStatus.FAILED
    assert set(by_name) == {"test::test_a", "test::test_b"}, result.outcomes
    assert by_name["test::test_a"].status == "failed"
    assert "raised where no line is" in by_name["test::test_a"].message
    assert by_name["test::test_b"].status == "passed"
