"""A probe that found no difference is "not distinguished", never "equivalent", in every
face: the console summary, the Markdown and HTML reports, the site and the explorer.
The recorded layer-norm run was written when the probe still filed its finding as an
equivalence "claim" (13 survivors carry one): an old record reads the new way too."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from mutant_gate.cli.summary import summary
from mutant_gate.engine.formats.html import html_page
from mutant_gate.engine.formats.markdown import markdown_summary
from mutant_gate.engine.formats.site import site_page
from mutant_gate.tui.app import create_app

DATA = Path(__file__).parent / "data" / "tui_layer_norm_report.json"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def report() -> dict:
    return json.loads(DATA.read_text())


def _probe_survivors(report: dict) -> list[dict]:
    return [
        m
        for m in report["mutants"]
        if m["verdict"] == "survived" and any(c.get("by") == "probe" for c in m.get("claims", []))
    ]


def _no_probe_equivalence(text: str) -> None:
    flat = " ".join(text.split())
    assert not re.search(r"probe\W{0,3}(claim\W+)?equivalent", flat, re.I), flat[:2000]
    assert not re.search(r"equivalent by probe", flat, re.I)
    assert "no difference found" not in flat


def test_the_record_holds_what_the_faces_must_not_show(report):
    rows = _probe_survivors(report)
    assert len(rows) == 13
    assert all(c["claim"] == "equivalent" for m in rows for c in m["claims"])


def test_console_summary(report):
    console = Console(record=True, width=200)
    summary(console, report)
    text = console.export_text()
    _no_probe_equivalence(text)
    assert "claim" not in text  # the record holds no other claim


def test_markdown_names_each_survivors_probe_result(report):
    text = markdown_summary(report)
    _no_probe_equivalence(text)
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    survivors = [m for m in report["mutants"] if m["verdict"] == "survived"]
    assert len(rows) == len(survivors)
    assert sum("not distinguished by 24 probes" in r for r in rows) == len(
        [m for m in survivors if "no difference" in (m.get("probe") or {}).get("result", "")]
    )


def test_html_and_site(report):
    page = html_page(report)
    _no_probe_equivalence(re.sub(r"<[^>]+>", " ", page))
    assert page.count("<h3>Probe</h3><p>not distinguished by 24 probes") >= 13
    site = site_page([report])
    _no_probe_equivalence(re.sub(r"<[^>]+>", " ", site))
    assert "not distinguished by 24 probes" in site


def test_a_model_claim_still_shows(report):
    report = copy.deepcopy(report)
    row = _probe_survivors(report)[0]
    row["claims"].append({"by": "stage2", "claim": "equivalent", "reason": "masked lanes"})
    text = markdown_summary(report)
    assert "stage2: equivalent (masked lanes)" not in text  # a survivor's claim: no exclusion
    page = html_page(report)
    assert "stage2: equivalent (masked lanes)" in page
    assert "probe: equivalent" not in page


@pytest.mark.anyio
async def test_explorer(report):
    app = create_app(report=report)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        inspector = app.explorer.inspector
        for row in _probe_survivors(report)[:3]:
            assert app.explorer.grid.select(row["id"])
            await pilot.pause()
            text = inspector.section_text("writers")
            assert "probe: not distinguished by 24 probes" in text, text
            assert "EQUIVALENT" not in text and "equivalent" not in text.lower(), text
