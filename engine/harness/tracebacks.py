"""Tracebacks pytest can show: every entry with a line number.

An exception raised at an instruction that has no line number (PEP 626: the case clock's
``CaseTimeExceeded`` arriving between two statements of code compiled from a rewritten AST,
as the batched executor's kernels are) leaves a traceback entry whose ``tb_lineno`` is None.
pytest cannot show such a failure: its report raises ``TypeError`` (``tb_lineno - 1``) as an
INTERNALERROR and the session ends there, every case after it unrun and unrecorded (a real
library's test file under ``--case-time 0.02``: 12 of its 121 cases run). ``mender()``, a
pytest plugin, gives each such entry its frame's line (or its function's first line) before
pytest sees the exception, through its cause and context too.

Runs inside the sandbox's processes; imports only the stdlib (and pytest, when asked for
the plugin).
"""

from __future__ import annotations

import types
from typing import Any


def _line(tb: types.TracebackType) -> int:
    frame = tb.tb_frame
    return frame.f_lineno if frame.f_lineno is not None else frame.f_code.co_firstlineno


def mended(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` itself where every entry has a line; else the same entries, rebuilt, those
    without one given their frame's."""
    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    if all(t.tb_lineno is not None for t in entries):
        return entries[0] if entries else None
    rebuilt = None
    for t in reversed(entries):
        line = t.tb_lineno if t.tb_lineno is not None else _line(t)
        rebuilt = types.TracebackType(rebuilt, t.tb_frame, t.tb_lasti, line)
    return rebuilt


def mend(exc: BaseException) -> None:
    """Every traceback of ``exc``, its cause and its context, mended in place."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        one = todo.pop()
        if one is None or id(one) in seen:
            continue
        seen.add(id(one))
        one.__traceback__ = mended(one.__traceback__)
        todo += [one.__cause__, one.__context__]


def mender() -> Any:
    """A pytest plugin: each case's setup, call and teardown exceptions mended."""
    import pytest

    class Mender:
        def _through(self):
            try:
                return (yield)
            except BaseException as exc:
                mend(exc)
                raise

        @pytest.hookimpl(wrapper=True, tryfirst=True)
        def pytest_runtest_setup(self, item):
            return (yield from self._through())

        @pytest.hookimpl(wrapper=True, tryfirst=True)
        def pytest_runtest_call(self, item):
            return (yield from self._through())

        @pytest.hookimpl(wrapper=True, tryfirst=True)
        def pytest_runtest_teardown(self, item):
            return (yield from self._through())

    return Mender()
