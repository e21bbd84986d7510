"""Every face shows a survivor hidden by tolerance first, with its tolerance line, and the
per-test-line view with its counts: console, Markdown, HTML, explorer. The report is a real
run's (``tui_affine_oracle_report.json``: 2 survivors whose outputs differ, 2 identical),
one of its ``differs`` survivors given the row section the tolerance check writes."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from rich.console import Console

from mutant_gate.cli.check_lines import summary_lines
from mutant_gate.cli.summary import next_step, summary
from mutant_gate.cli.survivors import WIDTH, survivor_lines, tolerance_lines
from mutant_gate.engine.checks.tolerance import Finding, Site, line_words, per_line, row_field
from mutant_gate.engine.formats.html import html_page
from mutant_gate.engine.formats.markdown import markdown_summary
from mutant_gate.engine.formats.words import tolerance_line_words, tolerance_view
from mutant_gate.engine.survivor_kinds import classify, counts
from mutant_gate.tui import render
from mutant_gate.tui.model import Filters, RunModel, survivor_kind

AFFINE = Path(__file__).resolve().parent / "data" / "tui_affine_oracle_report.json"
HIDDEN, DIFFERS, IDENTICAL = "6988492c96e6", "7d8d478b9dd7", "8dee00b9d232"
WHERE = "tests/test_affine.py:42"
#: the sentence the check writes on the hidden survivor (``Finding.line(True)``)
LINE = (
    f"{WHERE} assert_close(atol=0.2, rtol=0.02): the original passes at max abs 3.1e-04, "
    "this mutant at 0.061; atol 0.001 (rtol 0.02 as it is) fails the mutant and passes the "
    "original (checked, 3 seeds)"
)
#: the per-test-line view of the report below, in the check's words
VIEW = (
    f"{WHERE} lets 2 survivors through at atol 0.2; at atol 0.001 (the original needs "
    "3.0e-04 there) the checked proposals kill 1"
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def site(where: str, needed: float, max_abs: float) -> Site:
    return Site(where, "assert_close", 0.2, 0.02, needed, 0.0, max_abs, 4, False, False)


def tolerance_report() -> dict:
    """The affine run with the tolerance check's sections: one survivor a checked atol
    kills (hidden by tolerance), one whose error grew where no atol was shown to separate
    it (it stays ``differs``), one on another line, and the run's per-line view."""
    report = json.loads(AFFINE.read_text())
    sections = {
        HIDDEN: row_field(Finding(site(WHERE, 0.06, 0.061), site(WHERE, 3e-4, 3.1e-4), 1e-3), True),
        DIFFERS: row_field(Finding(site(WHERE, 0.5, 0.5), site(WHERE, 2e-4, 2e-4), 1e-3), False),
        IDENTICAL: row_field(None, None),
        "1428a634244c": row_field(
            Finding(site("tests/test_affine.py:57", 1e-4, 1e-4), site("x:1", 1e-5, 1e-5), None),
            None,
        ),
    }
    for row in report["mutants"]:
        if row["id"] in sections:
            row["tolerance"] = sections[row["id"]]
        kind = classify(row["verdict"], row.get("oracle"), row.get("tolerance"))
        if kind is not None:
            row["survivor"] = kind
    report["survivor_kinds"] = counts(report["mutants"])
    report["checks"]["tolerance"] = {
        "mutants": 4,
        "hidden": 1,
        "proposals": 2,
        "lines": per_line(sections),
    }
    return report


def plain(lines: list[str]) -> list[str]:
    console = Console(width=200, record=True, color_system=None)
    for line in lines:
        console.print(line, highlight=False)
    return console.export_text().splitlines()


def test_the_report_has_one_survivor_of_each_kind():
    report = tolerance_report()
    kinds = {r["id"]: r["survivor"]["kind"] for r in report["mutants"] if "survivor" in r}
    assert kinds[HIDDEN] == "hidden_by_tolerance" and kinds[DIFFERS] == "differs"
    assert kinds[IDENTICAL] == "identical"
    assert report["survivor_kinds"]["hidden_by_tolerance"] == 1
    assert next(r for r in report["mutants"] if r["id"] == HIDDEN)["survivor"]["why"] == LINE


def test_the_faces_words_for_a_test_line_are_the_checks():
    """The faces read the report, not the check: their copy of its words stays the same."""
    lines = tolerance_report()["checks"]["tolerance"]["lines"]
    assert [tolerance_line_words(x) for x in lines] == [line_words(x) for x in lines]
    assert tolerance_line_words(lines[0]) == VIEW
    odd = {**lines[0], "atol": math.inf, "atol_checked": 2e-5, "survivors": ["a"]}
    assert tolerance_line_words(odd) == line_words(odd)
    # only the lines that kill, in the report's order: the one on line 57 kills none
    assert tolerance_view(tolerance_report()) == [VIEW]
    assert tolerance_view(json.loads(AFFINE.read_text())) == []


def joined(lines: list[str]) -> str:
    """Console lines wrapped at 80 columns, joined back into one line of words."""
    return " ".join(line.strip() for line in lines)


def test_the_console_lists_the_hidden_survivor_first_with_its_line():
    report = tolerance_report()
    text = plain(survivor_lines(report))
    assert text[0] == "hidden by tolerance: 1 (a test gap: tighten the assertion named under each)"
    assert HIDDEN in text[1] and text[2].startswith("    " + WHERE)
    differs = next(i for i, line in enumerate(text) if line.startswith("outputs differ"))
    assert joined(text[2:differs]) == LINE  # its line in full, wrapped, not cut
    assert text[differs].startswith("outputs differ, the checks pass: 1")
    assert DIFFERS in text[differs + 1]
    view = plain(tolerance_lines(report))
    assert view[0] == "what the tolerance hid, per test line:"
    assert view[1].startswith("  " + WHERE) and joined(view[1:]) == VIEW
    assert all(len(line) <= WIDTH for line in text + view)
    said = "\n".join(plain(summary_lines(report)))
    assert "1 hidden by tolerance (2 tighter tolerances checked)" in said
    assert next_step(report).startswith(  # the line whose checked tolerance kills most
        f"next: tighten the assertion at {WHERE} to atol 0.001: it kills 1 survivor;"
    )


def test_the_console_summary_prints_the_per_line_view_after_the_survivors():
    out = io.StringIO()
    summary(Console(file=out, width=200, color_system=None), tolerance_report())
    text = out.getvalue()
    assert text.index("hidden by tolerance") < text.index("outputs differ")
    assert text.index("no difference observed") < text.index("what the tolerance hid")
    assert text.index("what the tolerance hid") < text.index(f"  {WHERE} lets 2 survivors")


def test_a_report_without_the_tolerance_check_says_nothing_new_in_the_console():
    old = json.loads(AFFINE.read_text())
    for row in old["mutants"]:
        kind = classify(row["verdict"], row.get("oracle"))
        if kind is not None:
            row["survivor"] = kind
    assert tolerance_lines(old) == []
    assert not any("tolerance" in line for line in survivor_lines(old) + summary_lines(old))
    assert next_step(old).startswith(f"next: a test that checks what {DIFFERS} (add-sub")


def test_markdown_lists_the_hidden_survivor_first_and_what_the_tolerance_hid():
    md = markdown_summary(tolerance_report())
    part = md[md.index("### Survivors") : md.index("### What the tolerance hid")]
    assert "Bugs the checks let through: 1 **hidden by tolerance**" in part
    assert part.index(f"`{HIDDEN}`") < part.index(f"`{DIFFERS}`") < part.index(f"`{IDENTICAL}`")
    assert f"**hidden by tolerance**: {LINE}" in part
    view = md[md.index("### What the tolerance hid") :].split("\n\n")[1]
    assert view == f"- `{WHERE}`{VIEW[len(WHERE) :]}"
    assert "tolerance" not in markdown_summary(json.loads(AFFINE.read_text()))


def test_html_shows_the_hidden_survivor_first_its_line_and_the_per_line_view():
    page = html_page(tolerance_report())
    assert page.index("1 hidden by tolerance") < page.index("1 outputs differ")
    assert page.index("Survivors: hidden by tolerance (1)") < page.index(
        "Survivors: outputs differ (1)"
    )
    listed = page[page.index("Survivors: hidden by tolerance") :]
    assert f"<code>{HIDDEN}</code></a> mul-div line 12: {LINE}" in listed
    assert page.index("<h2>What the tolerance hid</h2>") > page.index("Survivors: no difference")
    assert f"<li>{VIEW}</li>" in page
    panel = page[page.index(f'id="m-{HIDDEN}"') :]
    panel = panel[: panel.index("</section>")]
    assert f"<h3>Tolerance</h3>\n<p>{LINE}</p>" in panel
    assert panel.count(LINE) == 1  # said once, under its heading
    assert '<span class="kind-hidden_by_tolerance">hidden by tolerance</span>: a tighter' in panel
    assert "<li>tolerance" not in panel  # under its own heading, not again under Evidence
    assert ".kind-hidden_by_tolerance{" in page
    old = html_page(json.loads(AFFINE.read_text()))
    assert "olerance" not in old


def test_the_explorer_model_and_render_say_the_kind_and_the_line():
    report = tolerance_report()
    model = RunModel.from_report(report)
    row = model.row(HIDDEN)
    assert survivor_kind(row) == "hidden_by_tolerance"
    assert render.why(row, "survived").startswith(
        f"Survived: {row['reason']}. Hidden by tolerance: {LINE}. A test gap: tighten"
    )
    shown = render.tolerance_content(row["tolerance"], model.tolerance_test_line(row)).plain
    assert shown == f"{LINE}\nthis test line: {VIEW}"
    assert model.tolerance_view() == [VIEW]
    assert model.tolerance_test_line(model.row(IDENTICAL)) == ""

    found = [i for i in range(len(model.rows)) if model.matches(i, Filters(text="tolerance"))]
    assert [model.rows[i]["id"] for i in found] == [HIDDEN]


@pytest.mark.anyio
async def test_the_explorer_counts_the_hidden_survivor_first_and_inspects_its_line():
    pytest.importorskip("textual")
    from mutant_gate.tui.app import create_app

    app = create_app(report=tolerance_report())
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        explorer = app.explorer
        grid, inspector = explorer.grid, explorer.inspector
        title = grid._group_title("affine_kernel", list(range(len(explorer.model.rows))))
        assert "4 survived (1 hidden by tolerance, 1 outputs differ, 2 no difference" in title
        inspector.show(HIDDEN)
        assert "hidden by tolerance" in str(inspector.query_one("#inspector-verdict").render())
        assert inspector.section_text("tolerance") == f"{LINE}\nthis test line: {VIEW}"
        assert "tolerance" not in inspector.section_text("more")
        inspector.show(IDENTICAL)
        assert "no closeness assertion" in inspector.section_text("tolerance")
