"""Cases that cannot fail: a case marked ``xfail`` (not strict, no ``raises=``) is not run.

Whatever such a case does, pytest reports it as xfailed or xpassed, and neither fails the
session: it can tell no mutant from the original. It can cost minutes all the same (a real
library's multi-process tests, marked xfail below 8 GPUs, spawn 4-8 ranks a case: 50-90 s
each on a 2-core CPU). ``not_run()``, a pytest plugin, skips each such case before it
starts, saying why; pytest reports an xfailed case as skipped too, so no outcome's status
changes. A strict xfail (an xpass fails), one with ``raises=`` (another exception fails),
``run=False`` (pytest does not run it either) and ``--runxfail`` are left as pytest has them.

Runs inside the sandbox's processes; imports only pytest.
"""

from __future__ import annotations

from typing import Any

NOT_RUN = "not run: marked xfail (not strict), so it can fail with no mutant and cannot kill one"


def cannot_fail(item: Any) -> bool:
    """Whether pytest would report ``item`` as xfailed or xpassed whatever it does."""
    from _pytest.skipping import evaluate_xfail_marks

    if getattr(item.config.option, "runxfail", False):
        return False
    try:
        xfailed = evaluate_xfail_marks(item)
    except Exception:  # noqa: BLE001 - a bad condition: pytest's own run says so
        return False
    return xfailed is not None and xfailed.run and not xfailed.strict and not xfailed.raises


class _NotRun:
    def pytest_collection_modifyitems(self, items: list) -> None:
        import pytest

        for item in items:
            if cannot_fail(item):
                item.add_marker(pytest.mark.skip(reason=NOT_RUN))


def not_run() -> _NotRun:
    return _NotRun()
