"""Every report format written from one replayed run, each validated as its readers would.

The fast tests replay a real recorded run (``tests/data/layer_norm_checks_report.json``:
``mutant-gate run examples/layer_norm.py --operators masks --writer none --diff-oracle
--compile-check``) imported into a fresh cache, and write every format with
``mutant-gate report``. The slow tests make a real run with the report flags and check
that ``report`` from the cache writes the same, that the gate says by how much a score
falls short, and that ``rerun`` judges survivors again.
"""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import jsonschema
import pytest

from mutant_gate.cli.main import main
from mutant_gate.engine.formats import FORMATS, render
from mutant_gate.engine.formats.markdown import COMMENT_LIMIT
from mutant_gate.engine.formats.stryker import status_of
from mutant_gate.engine.formats.words import kernel_source

from .conftest import run_cli

DATA = Path(__file__).parent / "data"
RECORDED = DATA / "layer_norm_checks_report.json"
SCHEMA = json.loads((DATA / "stryker_report_schema.json").read_text())
KERNEL = DATA / "two_kernels.py"


# -- validators: what each format's readers need -------------------------------------------
def check_json(report: dict, text: str) -> None:
    assert json.loads(text) == report


def check_stryker(report: dict, text: str) -> None:
    data = json.loads(text)
    jsonschema.validate(data, SCHEMA)
    (name, entry), *others = data["files"].items()
    assert not others and name == Path(report["kernel"]["path"]).name
    assert entry["source"].strip(), "the kernel's source is needed to show each mutant"
    rows = {r["id"]: r for r in report["mutants"]}
    assert [m["id"] for m in entry["mutants"]] == list(rows)
    tests = {t["id"] for f in data["testFiles"].values() for t in f["tests"]}
    lines = entry["source"].splitlines(keepends=True)

    def offset(pos: dict) -> int:
        return sum(len(line) for line in lines[: pos["line"] - 1]) + pos["column"] - 1

    for m in entry["mutants"]:
        row = rows[m["id"]]
        start, end = m["location"]["start"], m["location"]["end"]
        assert entry["source"][offset(start) : offset(end)] == row["before"], m["id"]
        assert m["status"] == status_of(row)
        assert m["mutatorName"] == row["operator"]
        assert m["replacement"] == row["after"]
        assert set(m.get("killedBy", [])) <= tests
    statuses = [m["status"] for m in entry["mutants"]]
    detected = statuses.count("Killed") + statuses.count("Timeout")
    assert detected == report["score"]["killed"]
    assert statuses.count("Survived") == report["score"]["by_verdict"].get("survived", 0)


def check_junit(report: dict, text: str) -> None:
    root = ET.fromstring(text.encode())
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    verdicts = {r["id"]: r["verdict"] for r in report["mutants"]}
    assert int(suite.get("tests")) == len(cases) == len(verdicts)
    assert int(suite.get("failures")) == list(verdicts.values()).count("survived")
    for case in cases:
        mutant_id = case.get("name").split()[0]
        verdict = verdicts.pop(mutant_id)
        failed = case.find("failure") is not None
        assert failed == (verdict == "survived"), mutant_id
        assert (case.find("skipped") is not None) == (
            verdict in ("equivalent", "not_compilable", "pending")
        )
        assert (case.find("error") is not None) == (verdict == "error")
        if failed:
            assert "+++" in case.find("failure").text  # the diff is the failure text
    assert not verdicts
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["run_id"] == report["run_id"]


def check_markdown(report: dict, text: str) -> None:
    assert len(text) < COMMENT_LIMIT
    score = report["score"]
    assert f"**{score['killed']}/{score['total']} mutants killed**" in text
    for row in report["mutants"]:
        assert (f"`{row['id']}`" in text) == (row["verdict"] == "survived"), row["id"]
    assert text.count("```diff") == sum(r["verdict"] == "survived" for r in report["mutants"])


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if "id" in attrs:
            self.ids.append(attrs["id"])


def check_html(report: dict, text: str) -> None:
    assert "http://" not in text and "https://" not in text
    assert not re.search(r"<script[^>]*\bsrc\s*=", text, re.I)
    assert not re.search(r"<link\b", text, re.I)
    page = _Page()
    page.feed(text)
    assert len(page.ids) == len(set(page.ids)), "element ids are unique"
    assert not [a for _, a in page.tags if "src" in a], "nothing is loaded from anywhere"
    cells = {a["data-id"] for t, a in page.tags if t == "a" and "cell" in a.get("class", "")}
    assert cells == {r["id"] for r in report["mutants"]}
    for row in report["mutants"]:
        section = text.split(f'id="m-{row["id"]}"', 1)[1].split("</section>", 1)[0]
        assert f"<b>{row['verdict']}</b>" in section
        added = next(ln for ln in row["diff"].splitlines() if ln.startswith("+") and ln[1:2] != "+")
        assert _escaped(added) in section, "the diff is shown"
        sentence = (row.get("oracle") or {}).get("sentence")
        if sentence:
            assert _escaped(sentence) in section, "the oracle's sentence is shown"
        if row["by"] == "own-check":
            slot = re.search(r'data-test="(t-\d+)-src"', section)
            assert slot, "the killing test is named"
            own = next(t for t in report["tests"] if t["origin"] == "own")
            assert f'id="{slot.group(1)}-src">{_escaped(own["source"])}</pre>' in text


def _escaped(text: str) -> str:
    from mutant_gate.engine.formats.html import esc

    return esc(text)


VALIDATORS = {
    "json": check_json,
    "stryker": check_stryker,
    "junit": check_junit,
    "markdown": check_markdown,
    "html": check_html,
}


def test_every_format_has_a_validator():
    assert set(VALIDATORS) == set(FORMATS)


# -- fast: one recorded run, imported and replayed from the cache ----------------------------
@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> tuple[Path, str, dict]:
    cache = tmp_path_factory.mktemp("reports") / "cache"
    assert main(["cache", "import", str(RECORDED), "--cache-dir", str(cache)]) == 0
    report = json.loads(RECORDED.read_text())
    return cache, report["run_id"], report


def test_recorded_run_has_every_part_the_formats_show():
    report = json.loads(RECORDED.read_text())
    verdicts = {r["verdict"] for r in report["mutants"]}
    assert {"killed", "survived"} <= verdicts
    assert any((r.get("oracle") or {}).get("sentence") for r in report["mutants"])
    assert any(r["by"] == "own-check" for r in report["mutants"])


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_from_a_replayed_run(replayed, fmt, tmp_path, capsys):
    cache, run_id, report = replayed
    out = tmp_path / f"report.{fmt}"
    code = main(
        ["report", run_id[:12], "--format", fmt, "--out", str(out), "--cache-dir", str(cache)]
    )
    assert code == 0, capsys.readouterr().err
    VALIDATORS[fmt](report, out.read_text(encoding="utf-8"))


def test_report_to_stdout_and_format_from_suffix(replayed, tmp_path, capsys):
    cache, run_id, report = replayed
    assert main(["report", "latest", "--format", "junit", "--cache-dir", str(cache)]) == 0
    check_junit(report, capsys.readouterr().out)
    page = tmp_path / "mutants.html"
    assert main(["report", run_id, "--out", str(page), "--cache-dir", str(cache)]) == 0
    check_html(report, page.read_text(encoding="utf-8"))


def test_report_of_a_json_file_and_bad_runs(replayed, tmp_path, capsys):
    cache, _, report = replayed
    assert main(["report", str(RECORDED), "--format", "markdown"]) == 0
    check_markdown(report, capsys.readouterr().out)
    assert main(["report", "nope", "--cache-dir", str(cache)]) == 2
    assert "no run 'nope'" in capsys.readouterr().err
    assert main(["report", "latest", "--cache-dir", str(tmp_path / "none")]) == 2
    assert "no cache at" in capsys.readouterr().err
    assert main(["report", "latest", "--cache-dir", str(cache), "--format", "pdf"]) == 2


def test_kernel_source_is_rebuilt_from_the_diffs_when_not_recorded():
    report = json.loads(RECORDED.read_text())
    report["kernel"].pop("source", None)
    report["kernel"]["path"] = "/nonexistent/layer_norm.py"
    source, how = kernel_source(report)
    assert how == "diffs"
    check_stryker(report, render(report, "stryker"))  # each mutant's text is still in place


def test_stryker_statuses_for_every_verdict():
    """Stryker's score (detected / valid) equals our adjusted score unless a mutant is an error."""
    row = {"verdict": "killed", "by": "own-check"}
    assert status_of(row) == "Killed"
    assert status_of({**row, "by": "test:test_odd"}) == "Killed"
    assert status_of({**row, "by": "bounds"}) == "Killed"
    assert status_of({**row, "by": "crash"}) == "Killed"
    assert status_of({**row, "by": "timeout"}) == "Timeout"
    assert status_of({"verdict": "survived"}) == "Survived"
    assert status_of({"verdict": "equivalent"}) == "Ignored"
    assert status_of({"verdict": "not_compilable"}) == "CompileError"
    assert status_of({"verdict": "error"}) == "RuntimeError"
    assert status_of({"verdict": "pending"}) == "Pending"


def test_html_text_never_becomes_an_address():
    report = json.loads(RECORDED.read_text())
    report["mutants"][0]["reason"] = "see https://example.com/<script>alert(1)</script>"
    page = render(report, "html")
    check_html(report, page)
    assert "<script>alert" not in page


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to parse JavaScript")
def test_html_script_is_valid_javascript(tmp_path):
    import subprocess

    page = render(json.loads(RECORDED.read_text()), "html")
    (script,) = re.findall(r"<script>(.*?)</script>", page, re.S)
    (tmp_path / "page.js").write_text(script)
    proc = subprocess.run(["node", "--check", str(tmp_path / "page.js")], capture_output=True)
    assert proc.returncode == 0, proc.stderr


def test_markdown_stays_under_the_comment_limit():
    report = json.loads(RECORDED.read_text())
    survivor = next(r for r in report["mutants"] if r["verdict"] == "survived")
    many = [{**survivor, "id": f"{i:012x}", "diff": survivor["diff"] * 20} for i in range(300)]
    report = {**report, "mutants": many}
    text = render(report, "markdown")
    assert len(text) < COMMENT_LIMIT
    assert "more survivor diffs are in the full report" in text
    assert "more |" in text  # the table is cut too, saying how many rows are left out


# -- slow: a real run with the report flags, the gate, and rerun --------------------------------
@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> dict:
    """One real run of two_kernels.py: configured in pyproject.toml, a flag overriding it."""
    work = tmp_path_factory.mktemp("real")
    shutil.copy(KERNEL, work / "two_kernels.py")
    (work / "pyproject.toml").write_text(
        '[tool.mutant-gate]\noperators = ["masks", "boundaries", "add-sub"]\nwriter = "none"\n'
        'fail-under = 10\ncache-dir = "cache"\n'
    )
    out = {fmt: work / f"r.{fmt}" for fmt in FORMATS}
    flags = [f"--{fmt}" for fmt in FORMATS]
    proc = run_cli(
        "run",
        "two_kernels.py",
        "-q",
        "--fail-under",
        "60",
        *[x for flag, fmt in zip(flags, FORMATS, strict=True) for x in (flag, str(out[fmt]))],
        cwd=work,
    )
    return {"work": work, "proc": proc, "out": out, "report": json.loads(out["json"].read_text())}


@pytest.mark.slow
def test_real_run_gate_says_by_how_much(real_run):
    proc, report = real_run["proc"], real_run["report"]
    assert report["settings"]["operators"] == "masks,boundaries,add-sub"  # from the config
    assert report["settings"]["writers"]["writer"] == "none"
    assert report["settings"]["fail_under"] == 60  # the flag wins over the config's 10
    adjusted = report["score"]["adjusted"]
    assert 0 < adjusted < 60
    assert proc.returncode == 1, proc.stderr
    assert f"under --fail-under 60% by {60 - adjusted:.1f} points" in proc.stdout
    assert "configuration: " in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_real_run_formats_match_the_replayed_run(real_run, fmt):
    report, work = real_run["report"], real_run["work"]
    assert report["kernel"]["source"] == KERNEL.read_text()
    written = real_run["out"][fmt].read_text(encoding="utf-8")
    VALIDATORS[fmt](report, written)
    proc = run_cli("report", report["run_id"], "--format", fmt, cwd=work)  # cache-dir: config
    assert proc.returncode == 0, proc.stderr
    if fmt in ("json", "stryker"):  # the cache stores JSON with sorted keys
        assert json.loads(proc.stdout) == json.loads(written)
    else:
        assert proc.stdout == written


@pytest.mark.slow
def test_rerun_survivors_after_adding_a_test(real_run):
    work, report = real_run["work"], real_run["report"]
    survivors = [r["id"] for r in report["mutants"] if r["verdict"] == "survived"]
    assert survivors
    (work / "odd_sizes.py").write_text(
        "import torch\n\nfrom two_kernels import add, scale\n\n\n"
        "def test_odd_sizes():\n"
        "    x, y = torch.rand(300), torch.rand(300)\n"
        "    torch.testing.assert_close(add(x, y), x + y)\n"
        "    torch.testing.assert_close(scale(x, 2.0), x * 2.0)\n"
    )
    proc = run_cli(
        "rerun", report["run_id"][:15], "--survivors", "--tests", "odd_sizes.py",
        "--json", "again.json", "--fail-under", "60", cwd=work,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    new = json.loads((work / "again.json").read_text())
    assert new["rerun"]["of"] == report["run_id"]
    assert new["run_id"] != report["run_id"]
    assert [c["id"] for c in new["rerun"]["mutants"]] == survivors
    assert all(c["was"] == "survived" and c["now"] == "killed" for c in new["rerun"]["mutants"])
    assert new["score"]["killed"] == report["score"]["total"]
    old_rows = {r["id"]: r for r in report["mutants"]}
    for row in new["mutants"]:  # the rest kept their verdicts
        if row["id"] not in survivors:
            assert row["verdict"] == old_rows[row["id"]]["verdict"]
    assert any(t["name"].endswith("test_odd_sizes") for t in new["tests"])
    listed = run_cli("cache", "ls", cwd=work)
    assert f"rerun of {report['run_id']}" in listed.stdout


@pytest.mark.slow
def test_rerun_one_mutant_by_prefix(real_run):
    work, report = real_run["work"], real_run["report"]
    survivor = next(r["id"] for r in report["mutants"] if r["verdict"] == "survived")
    proc = run_cli(
        "rerun", report["run_id"], "--mutant", survivor[:6], "--json", "one.json", cwd=work
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the run's --fail-under 60 holds
    assert "under --fail-under 60%" in proc.stdout
    new = json.loads((work / "one.json").read_text())
    (change,) = new["rerun"]["mutants"]
    assert change["id"] == survivor and change["now"] == "survived"  # no new test: still survives
    assert next(r for r in new["mutants"] if r["id"] == survivor)["cached"]
    forced = run_cli(
        "rerun", report["run_id"], "--mutant", survivor, "--force", "--json", "f.json", cwd=work
    )
    assert forced.returncode == 1, forced.stdout + forced.stderr
    again = json.loads((work / "f.json").read_text())
    assert not next(r for r in again["mutants"] if r["id"] == survivor)["cached"]
    assert f"{survivor}: still survived" in proc.stdout
    bad = run_cli("rerun", report["run_id"], "--mutant", "zzzz", cwd=work)
    assert bad.returncode == 2 and "no such mutant" in bad.stderr
    neither = run_cli("rerun", report["run_id"], cwd=work)
    assert neither.returncode == 2 and "--survivors" in neither.stderr
