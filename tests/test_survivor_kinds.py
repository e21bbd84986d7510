"""Survivors sorted by what execution showed: outputs differ (a test gap) first, then no
difference observed (with why), in every face: console, JSON, HTML, Markdown, explorer."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from mutant_gate.cli.survivors import WIDTH, change_text, first_change, survivor_lines
from mutant_gate.engine.formats.html import html_page
from mutant_gate.engine.formats.markdown import markdown_summary
from mutant_gate.engine.survivor_kinds import classify, counts

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
#: a real run with --diff-oracle: 2 survivors whose outputs differ, 2 masked-lane ones
AFFINE = DATA / "tui_affine_oracle_report.json"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def kinded(path: Path = AFFINE) -> dict:
    """A recorded report with each survivor's kind, as a run today writes it."""
    report = json.loads(path.read_text())
    for row in report["mutants"]:
        kind = classify(row["verdict"], row.get("oracle"))
        if kind is not None:
            row["survivor"] = kind
    report["survivor_kinds"] = counts(report["mutants"])
    return report


def plain(lines: list[str], width: int = 200) -> list[str]:
    console = Console(width=width, record=True, color_system=None)
    for line in lines:
        console.print(line, highlight=False)
    return console.export_text().splitlines()


def test_classify_reads_the_oracle():
    report = kinded()
    kinds = {r["id"]: r["survivor"] for r in report["mutants"] if "survivor" in r}
    assert kinds["7d8d478b9dd7"]["kind"] == "differs"
    assert kinds["7d8d478b9dd7"]["outputs"][0]["argument"] == "y_ptr"
    assert kinds["7d8d478b9dd7"]["outputs"][0]["max_abs"] == pytest.approx(2.0)
    assert "y_ptr differs by up to 2" in kinds["7d8d478b9dd7"]["why"]
    assert kinds["8dee00b9d232"]["kind"] == "identical"
    assert kinds["8dee00b9d232"]["reason"] == "masked_lanes"
    assert report["survivor_kinds"] == {
        "hidden_by_tolerance": 0,
        "differs": 2,
        "identical": 2,
        "not_checked": 0,
    }
    # only survivors have a kind; no oracle: not checked
    assert classify("killed", {"identical": False}) is None
    assert classify("survived", None)["kind"] == "not_checked"
    timed_out = {"identical": None, "sentence": "the oracle could not compare: its runs timed out"}
    assert classify("survived", timed_out) == {
        "kind": "not_checked",
        "why": timed_out["sentence"],
        "evidence": [],
    }


def test_identical_says_why():
    base = {"identical": True, "launches": 3, "masked_only": False, "poisoned": None}
    same = classify(
        "survived", {**base, "active_lanes_differ": False, "masked_lanes_differ": False}
    )
    assert (same["reason"], same["why"]) == (
        "same_values",
        "identical on all 3 launches: every value it loads and stores is the original's",
    )
    hidden = classify("survived", {**base, "active_lanes_differ": True})
    assert hidden["reason"] == "never_stored"
    poisoned = {
        "identical": False,
        "masked_only": False,
        "diffs": [{"argument": "y", "max_abs": None}],
    }
    under = classify("survived", {**base, "poisoned": poisoned})
    assert under["kind"] == "differs" and "poisoned" in under["why"]


def test_console_lists_differs_first_with_why_in_80_columns():
    report = kinded()
    text = plain(survivor_lines(report))
    assert text[0].startswith("outputs differ, the checks pass: 2")
    assert "7d8d478b9dd7" in text[1] and "(y_ptr off by 2)" in text[1]
    differs_end = next(i for i, line in enumerate(text) if line.startswith("no difference"))
    assert differs_end == 3
    assert "masked-off lanes only" in text[differs_end + 1]
    assert {"8dee00b9d232", "1428a634244c"} <= set(" ".join(text[differs_end:]).split())
    assert all(len(line) <= WIDTH for line in text)


def test_console_without_the_oracle_says_nothing_new():
    report = json.loads(AFFINE.read_text())
    for row in report["mutants"]:
        row.pop("oracle", None)
        kind = classify(row["verdict"], None)
        if kind:
            row["survivor"] = kind
    text = plain(survivor_lines(report))
    assert len(text) == 4 and all(line.startswith("survived ") for line in text)
    assert not any("differ" in line or "observed" in line for line in text)


def test_a_multi_line_rewrite_shows_its_first_changed_line():
    before = "if EVEN:\n    # the fast path\n    x = tl.load(p)\n"
    after = "if True:\n    # the fast path\n    x = tl.load(p)\n"
    assert first_change(before, after) == ("if EVEN:", "if True:")
    long_a = "tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)"
    long_b = "tl.load(X + cols, mask=cols < N, other=0.0)"
    shown = change_text(long_a, long_b, 40)
    assert len(shown) <= 40 and ".to(tl.float32)" in shown and shown.endswith("0.0)")
    # where room is short, less of what the two share, but what differs stays
    tight = change_text(
        "tl.zeros((M, N), dtype=tl.float32)", "tl.zeros((M, N), dtype=tl.float16)", 16
    )
    assert tight == "…32) -> …16)"


def test_json_report_schema_takes_the_kinds():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "docs" / "reference" / "report.schema.json").read_text())
    report = kinded()
    jsonschema.Draft202012Validator(schema).validate(report)
    broken = copy.deepcopy(report)
    next(r for r in broken["mutants"] if "survivor" in r)["survivor"]["kind"] = "maybe"
    with pytest.raises(jsonschema.ValidationError, match="maybe"):
        jsonschema.Draft202012Validator(schema).validate(broken)


def test_html_and_markdown_list_differs_first():
    report = kinded()
    page = html_page(report)
    assert "2 outputs differ" in page and "2 no difference observed" in page
    assert page.index("Survivors: outputs differ") < page.index("Survivors: no difference")
    assert re.search(r'class="cell v-survived k-identical"[^>]*data-id="8dee00b9d232"', page)
    assert "What execution showed" in page
    md = markdown_summary(report)
    table = md[md.index("### Survivors") :]
    assert table.index("7d8d478b9dd7") < table.index("8dee00b9d232")
    assert "**outputs differ**: y_ptr differs by up to 2" in table
    # a report from before the kinds: the faces say nothing new
    old = json.loads(AFFINE.read_text())
    assert "What execution showed" not in html_page(old)
    assert "no difference observed" not in markdown_summary(old)


@pytest.mark.anyio
async def test_the_explorer_shows_the_kind():
    pytest.importorskip("textual")
    from mutant_gate.tui.app import create_app

    app = create_app(report=kinded())
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        explorer = app.explorer
        grid, inspector = explorer.grid, explorer.inspector
        assert grid.select("7d8d478b9dd7")
        await pilot.pause()
        inspector.show("7d8d478b9dd7")
        assert "Outputs differ: y_ptr differs by up to 2" in inspector.section_text("why")
        assert "outputs differ" in str(inspector.query_one("#inspector-verdict").render())
        inspector.show("8dee00b9d232")
        assert "No difference observed" in inspector.section_text("why")
        assert "Still a survivor" in inspector.section_text("why")
        title = grid._group_title("affine_kernel", list(range(len(explorer.model.rows))))
        assert "4 survived (2 outputs differ, 2 no difference observed)" in title


@pytest.mark.slow
def test_layer_norm_run_splits_its_survivors(tmp_path):
    """The real run: every survivor has a kind in the JSON, and the console lists them
    under a kind's header, each line within 80 columns."""
    out = tmp_path / "ln.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mutant_gate.cli.main",
            "run",
            str(ROOT / "examples" / "layer_norm.py"),
        ]
        + ["--writer", "none", "--json", str(out), "--no-write-tests", "-q"]
        + ["--cache-dir", str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**__import__("os").environ, "COLUMNS": "80"},
        timeout=900,
    )
    assert run.returncode in (0, 1), run.stderr
    report = json.loads(out.read_text())
    survivors = [r for r in report["mutants"] if r["verdict"] == "survived"]
    assert survivors
    # each checked, but one whose oracle run hit its time limit (a 256x loop, on a busy
    # machine) is not compared: said so, never given a kind it was not shown to have
    unchecked = [r for r in survivors if r["survivor"]["kind"] == "not_checked"]
    assert len(unchecked) <= 1, unchecked
    assert all((r.get("oracle") or {}).get("timed_out") for r in unchecked), unchecked
    assert sum(report["survivor_kinds"].values()) == len(survivors)
    masked = [r for r in survivors if r["survivor"].get("reason") == "masked_lanes"]
    assert masked, "layer_norm's other= mutants change masked-off lanes only"
    lines = run.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("no difference observed"))
    assert "masked-off lanes only" in "\n".join(lines[header:])
    for r in survivors:
        line = next(line for line in lines if r["id"] in line and r["operator"] in line)
        assert len(line) <= 80, line
