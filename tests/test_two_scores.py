"""Two scores, said apart: what the user's own tests kill, and what they kill together
with the tests mutant-gate wrote; the gate reads the first unless told otherwise."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from mutant_gate.engine.formats import html, junit, markdown
from mutant_gate.engine.formats.words import gate, score_phrases
from mutant_gate.engine.report import score, written_names
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SCHEMA = json.loads((ROOT / "docs" / "reference" / "report.schema.json").read_text())

TESTS = [
    {"name": "own-check", "origin": "own"},
    {"name": "test::test_given", "origin": "given"},
    {"name": "test::test_add_fresh_values", "origin": "probe"},
    {"name": "test::test_model_wrote", "origin": "stage2"},
]


def _row(i: int, verdict: str, by: str | None = None) -> dict:
    return {"id": f"m{i}", "verdict": verdict, "by": by}


ROWS = [
    _row(0, "killed", "own-check"),
    _row(1, "killed", "bounds"),
    _row(2, "killed", "test:test_given"),
    _row(3, "killed", "test:test_add_fresh_values"),
    _row(4, "killed", "test:test_model_wrote"),
    _row(5, "killed", "big-index"),
    _row(6, "survived"),
    _row(7, "equivalent"),
]


def test_written_tests_and_the_tools_checks_are_not_your_kills():
    s = score(ROWS, written_names(TESTS))
    assert s["of"] == "your tests"
    assert (s["killed"], s["total"]) == (3, 8)
    assert s["raw"] == 37.5
    assert s["adjusted"] == round(100 * 3 / 7, 2)  # the equivalent mutant is out of both
    w = s["with_written"]
    assert w["added"] == ["m3", "m4", "m5"]
    assert (w["killed"], w["raw"], w["adjusted"]) == (6, 75.0, round(100 * 6 / 7, 2))
    assert s["by_verdict"] == {"killed": 6, "survived": 1, "equivalent": 1}
    # without any written test, only the tool's own big-index replay is set apart
    alone = score(ROWS)
    assert alone["killed"] == 5 and alone["with_written"]["added"] == ["m5"]


def _report(gate_on: str | None, fail_under: float = 50.0) -> dict:
    settings = {"fail_under": fail_under, **({"gate_on": gate_on} if gate_on else {})}
    return {"score": score(ROWS, written_names(TESTS)), "settings": settings}


def test_the_gate_reads_your_tests_unless_told_otherwise():
    passed, sentence = gate(_report(None))
    assert passed is False
    assert sentence.startswith("your tests' adjusted score 42.9% is under --fail-under 50%")
    passed, sentence = gate(_report("written"))
    assert passed is True and "with written tests 85.7% meets" in sentence
    # a report written before the split has one score, and the gate reads it
    old = {"score": {"killed": 6, "total": 8, "adjusted": 75.0}, "settings": {"fail_under": 50}}
    assert gate(old)[0] is True


def test_every_format_says_both_scores():
    report = json.loads((DATA / "tui_affine_oracle_report.json").read_text())
    report["tests"] = [*report.get("tests", []), *TESTS[2:]]
    report["mutants"] = [dict(r) for r in report["mutants"]]
    killed = [r for r in report["mutants"] if r["verdict"] == "killed"]
    killed[0]["by"] = "test:test_add_fresh_values"
    report["score"] = score(report["mutants"], written_names(report["tests"]))
    mine, written = score_phrases(report["score"])
    assert mine.startswith("your tests: 7/13 killed")
    assert written is not None and written.startswith("with the tests mutant-gate wrote: 8/13")
    page = html.html_page(report)
    assert "your tests: <b>7/13</b>" in page and "with the tests mutant-gate wrote: 8/13" in page
    text = markdown.markdown_summary(report)
    assert "your tests: **7/13 mutants killed**" in text and written in text
    xml = junit.junit_xml(report)
    assert 'name="score.killed" value="7"' in xml
    assert 'name="score.with_written.killed" value="8"' in xml


@pytest.mark.slow
def test_tutorial_01_whose_check_asserts_nothing_fails_the_gate_by_default(tmp_path):
    kernel = tmp_path / "t01.py"
    shutil.copy(DATA / "tutorial_vector_add.py", kernel)
    args = ("run", str(kernel), "--cache-dir", str(tmp_path / "c"), "--fail-under", "80")
    out = run_cli(*args, "--json", str(tmp_path / "r.json"), cwd=tmp_path)
    said = " ".join(out.stdout.split())
    assert out.returncode == 1, out.stdout + out.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    jsonschema.Draft202012Validator(SCHEMA).validate(report)
    s = report["score"]
    assert (s["killed"], s["total"], s["adjusted"]) == (8, 12, 66.67)
    assert (s["with_written"]["killed"], s["with_written"]["adjusted"]) == (12, 100.0)
    assert "your tests: 8/12 killed, raw 66.7%" in said
    assert "your check asserts nothing" in said
    assert "with the tests mutant-gate wrote: 12/12 killed" in said
    assert "your tests' adjusted score 66.7% is under --fail-under 80%" in said
    again = run_cli(*args, "--gate-on", "written", cwd=tmp_path)  # from the cache
    assert again.returncode == 0, again.stdout + again.stderr
    assert "with written tests 100.0% meets --fail-under 80%" in " ".join(again.stdout.split())


@pytest.mark.slow
def test_kernel_lib_softmax_scores_apart(tmp_path):
    project = tmp_path / "kernel_lib"
    shutil.copytree(ROOT / "examples" / "kernel_lib", project)
    out = run_cli(
        "run",
        "src/kernel_lib/ops/softmax.py",
        "--tests",
        "tests/test_layers.py",
        "--cache-dir",
        str(tmp_path / "c"),
        "--json",
        str(tmp_path / "r.json"),
        cwd=project,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    s = json.loads((tmp_path / "r.json").read_text())["score"]
    assert (s["killed"], s["total"], s["raw"]) == (12, 20, 60.0)
    assert (s["with_written"]["killed"], s["with_written"]["raw"]) == (
        20,
        100.0,
    )  # the probe's first tries (a zero row, float16 overflow) kill one more
    said = " ".join(out.stdout.split())
    assert "your tests: 12/20 killed, raw 60.0%" in said
    assert "with the tests mutant-gate wrote: 20/20 killed, raw 100.0%" in said
