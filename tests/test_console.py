"""What `run` prints when its output is not a terminal (a pipe, a CI log): progress
lines at a steady pace, whole lines and table cells, the score and the gate last, and
counts that agree with their nouns; the HTML page and the site in sentences."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from mutant_gate.cli.check_lines import summary_lines
from mutant_gate.cli.reporter import Reporter
from mutant_gate.cli.summary import writers_summary
from mutant_gate.engine.errors import BadInput

from .conftest import EXAMPLES, run_cli


def piped() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out), out


def test_without_a_terminal_each_phase_gets_a_progress_line():
    console, out = piped()
    reporter = Reporter(console)
    with reporter:
        reporter.progress.update(reporter.task, description="original", total=12)
        reporter.progress.update(reporter.task, description="mutants", completed=3)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("original: 0/12 mutants done ("), lines
    assert lines[1].startswith("mutants: 3/12 mutants done ("), lines


def test_an_error_leaves_no_progress_line_behind():
    """Piped, a run stopped by bad input printed the bar's last state ("loading 0/?")
    before the error line."""
    console, out = piped()
    with pytest.raises(BadInput):
        with Reporter(console):
            raise BadInput("k.py: no check to run")
    assert out.getvalue() == ""


def test_counts_agree_with_their_nouns():
    report = {
        "mutants": [],
        "checks": {"claims": {"claims": 1, "backed": 1, "refused": 0}},
        "writers": {"probe": {"survivors": 1, "kills_by_trigger": {"size": 1}}},
    }
    text = "\n".join(summary_lines(report) + writers_summary(report))
    assert "checks on 1 survivor:" in text
    assert "1 of 1 equivalence claim backed" in text
    assert "probe: 1 of 1 survivor killed" in text
    assert not re.search(r"\b1 (survivors|claims|checks|tests|mutants)\b", text), text


KERNEL = (
    (EXAMPLES / "vector_add.py")
    .read_text()
    .replace(
        '    print("vector_add: ok")',
        "    triton.testing.do_bench(lambda: add(x, y))  # a shim stands in for it\n"
        '    print("vector_add: ok")',
    )
)


@pytest.mark.slow
def test_a_piped_run_moves_says_lines_whole_and_ends_with_score_and_gate(tmp_path):
    (tmp_path / "vector_add.py").write_text(KERNEL)
    proc = run_cli(
        "run",
        "vector_add.py",
        "--mode",
        "interpret",
        "--writer",
        "none",
        "--fail-under",
        "50",
        "--no-cache",
        "--json",
        "r.json",
        "-v",  # the sandbox and the shims too
        cwd=tmp_path,
        env={"MUTANT_GATE_PROGRESS_S": "0.5"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    # progress as lines (phase, done/total, verdicts, time), no bar drawn once at the end
    assert any(re.match(r"mutants: \d+/12 mutants done, killed \d+", ln) for ln in lines), lines
    assert not any("━" in ln and "/12" in ln for ln in lines), lines  # the bar's last state
    # whole cells and lines, not cut or wrapped at 80 columns
    assert "…" not in proc.stdout
    assert any("operator" in ln and "killed" in ln and "survived" in ln for ln in lines), lines
    assert any(ln.startswith("sandbox: ") and " run " in ln for ln in lines), lines
    # words: counts agree, the shims the file needed are said
    # the file's line first, but for progress lines (a slow load prints "loading: ...")
    said = [ln for ln in lines if not re.match(r"\w+: \d+/\S+ mutants done", ln)]
    assert said[0].endswith(": 1 jit function, 12 mutants" + said[0][said[0].index(" (") :])
    assert "shims the original needed to run here: triton.testing.do_bench: not timed" in lines
    # the score, then the gate, last
    report = json.loads((tmp_path / "r.json").read_text())
    assert lines[-2].startswith(f"your tests: {report['score']['killed']}/12 killed"), lines[-3:]
    assert "--fail-under 50%" in lines[-1] and lines[-1].startswith("your tests' adjusted score"), (
        lines[-1]
    )


REPORT = "tui_affine_oracle_report.json"


def test_html_and_site_say_row_sections_in_sentences(tmp_path):
    report = json.loads((EXAMPLES.parent / "tests" / "data" / REPORT).read_text())
    row = report["mutants"][0]
    row.update(timeout_s=5.5, tests_selected=["t.py::test_a"], reached=False)
    row["probe"] = {"probes": 21, "result": "not distinguished by 21 probes"}
    (tmp_path / "r.json").write_text(json.dumps(report))
    page = run_cli("report", "r.json", "--format", "html", cwd=tmp_path)
    assert page.returncode == 0, page.stderr
    site = run_cli("report", "r.json", "--site", "site", cwd=tmp_path)
    assert site.returncode == 0, site.stderr
    for text in (page.stdout, (tmp_path / "site" / "index.html").read_text()):
        assert "time limit of its job: 5.5 s" in text
        assert "no check launches its kernel" in text
        assert "not distinguished by 21 probes" in text
        assert "{&quot;" not in text and '{"' not in text  # no JSON object shown
        assert "the kernel file&#x27;s own check" in text  # a test's origin, in words
