"""SVG snapshots of the explorer on a replayed run (fixed run id, no clock: deterministic).

Update after an intended change with ``python -m pytest tests/test_tui_snapshots.py
--snapshot-update`` and look at the SVGs in ``tests/__snapshots__/`` before committing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mutant_gate.tui.app import create_app

REPORT = Path(__file__).parent / "data" / "tui_layer_norm_report.json"
SIZE = (120, 36)


@pytest.fixture
def report() -> dict:
    return json.loads(REPORT.read_text())


def test_grid_and_inspector(snap_compare, report):
    assert snap_compare(create_app(report=report), terminal_size=SIZE)


def test_inspector_on_a_marked_survivor(snap_compare, report):
    survivor = next(m["id"] for m in report["mutants"] if m["verdict"] == "survived")

    async def select(pilot) -> None:
        await pilot.pause()
        pilot.app.explorer.grid.select(survivor)
        await pilot.press("space")

    assert snap_compare(create_app(report=report), terminal_size=SIZE, run_before=select)


def test_survivors_grouped_by_family(snap_compare, report):
    assert snap_compare(create_app(report=report), terminal_size=SIZE, press=["s", "g"])


AFFINE = Path(__file__).parent / "data" / "tui_affine_oracle_report.json"


@pytest.mark.parametrize("which", ["oracle-differs", "not-compilable"])
def test_inspector_evidence_tables(snap_compare, which):
    """A real run's evidence (diff-oracle, compile-check) as tables, never as a dict."""
    report = json.loads(AFFINE.read_text())
    if which == "oracle-differs":
        target = next(m["id"] for m in report["mutants"] if (m.get("oracle") or {}).get("diffs"))
    else:
        target = next(m["id"] for m in report["mutants"] if m["verdict"] == "not_compilable")

    async def select(pilot) -> None:
        await pilot.pause()
        pilot.app.explorer.grid.select(target)
        await pilot.pause()

    assert snap_compare(create_app(report=report), terminal_size=(120, 48), run_before=select)
