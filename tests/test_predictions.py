"""Pre-registered predictions (``--predict FILE``).

Fast: scoring against a recorded run (one wrong prediction of three), the file's
checks, and ``report`` saying when the file changed after the run stored it. Slow: a
real run stores the predictions before anything executes (a run whose original fails
still has them in its record) and scores them after.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mutant_gate.cli.main import main
from mutant_gate.engine import predictions
from mutant_gate.engine.errors import BadInput

from .conftest import run_cli

DATA = Path(__file__).parent / "data"
RECORDED = DATA / "layer_norm_checks_report.json"


def _recorded() -> dict:
    return json.loads(RECORDED.read_text())


def _three(report: dict) -> str:
    """Three predictions on the recorded run: two right, the third wrong."""
    killed = next(r for r in report["mutants"] if r["by"] == "own-check")
    survivor = next(r for r in report["mutants"] if r["verdict"] == "survived")
    bounds = next(r for r in report["mutants"] if r["by"] == "bounds")
    return (
        f'[[predict]]\nid = "{killed["id"]}"\nverdict = "killed"\nby = "own-check"\n\n'
        f'[[predict]]\noperator = "{bounds["operator"]}"\nline = {bounds["line"]}\n'
        f'function = "{bounds["function"]}"\nverdict = "killed"\n\n'
        f'[[predict]]\nid = "{survivor["id"][:8]}"\nverdict = "killed"\n'
    )


def test_one_wrong_prediction_is_scored_as_such(tmp_path):
    report = _recorded()
    path = tmp_path / "predict.toml"
    path.write_text(_three(report))
    section = predictions.register(str(path))
    result = predictions.score(section, report["mutants"])
    assert (result["right"], result["total"]) == (2, 3)
    (miss,) = result["misses"]
    survivor = next(r for r in report["mutants"] if r["verdict"] == "survived")
    assert miss["prediction"] == survivor["id"][:8]
    assert miss["got"] == [f"{survivor['id']}: verdict survived, predicted killed"]
    # the same predictions as JSON score the same
    items = [{"id": r["id"], "verdict": r["verdict"]} for r in report["mutants"][:4]] + [
        {"operator": "no-such-op", "line": 1, "verdict": "killed"}
    ]
    section = {"text": json.dumps({"predict": items})}
    result = predictions.score(section, report["mutants"])
    assert (result["right"], result["total"]) == (4, 5)
    assert result["misses"][0]["got"] == ["no such mutant in the run"]
    section = {**predictions.register(str(path)), "result": result, "file_now": "same"}
    assert predictions.lines(section)[0].startswith("predicted 4 of 5 (registered before")


@pytest.mark.parametrize(
    "text, says",
    [
        ("", "non-empty list"),
        ("predict = [", "neither valid TOML nor JSON"),
        ('[[predict]]\nverdict = "killed"\n', "name its mutants"),
        ('[[predict]]\nid = "ab"\n', "expects nothing"),
        ('[[predict]]\nid = "ab"\nverdict = "dead"\n', "verdict must be killed"),
        ('[[predict]]\nid = "ab"\noracle = "same"\n', "oracle must be identical, differs"),
        ('[[predict]]\nid = "ab"\nverdict = "killed"\nwhy = 1\n', "unknown key 'why'"),
        ('[[predict]]\noperator = "x"\nline = "3"\nverdict = "killed"\n', "whole number"),
    ],
)
def test_bad_prediction_files(tmp_path, text, says):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(BadInput) as err:
        predictions.register(str(path))
    assert says in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(BadInput, match="no such file"):
        predictions.register(str(tmp_path / "none.toml"))


def test_report_says_when_the_file_changed_after_the_run(tmp_path, capsys):
    report = _recorded()
    path = tmp_path / "predict.toml"
    path.write_text(_three(report))
    section = predictions.register(str(path))
    section["result"] = predictions.score(section, report["mutants"])
    section["file_now"] = predictions.file_now(section)
    report["predictions"] = section
    recorded = tmp_path / "report.json"
    recorded.write_text(json.dumps(report))
    cache = tmp_path / "cache"
    assert main(["cache", "import", str(recorded), "--cache-dir", str(cache)]) == 0
    capsys.readouterr()

    def markdown() -> tuple[str, str]:
        assert main(["report", "latest", "--format", "markdown", "--cache-dir", str(cache)]) == 0
        out = capsys.readouterr()
        return out.out, out.err

    text, err = markdown()
    assert "predicted 2 of 3" in text and "missed: " in text
    assert "hash mismatch" not in text + err
    # edited after the run: said on stderr and in the report; the score is the stored one
    path.write_text(_three(report).replace('verdict = "killed"\n', 'verdict = "survived"\n'))
    text, err = markdown()
    assert "predicted 2 of 3" in text
    assert "changed after the run stored it (hash mismatch)" in text
    assert "hash mismatch" in err and err.count("\n") == 1
    site = tmp_path / "site"
    assert main(["report", "latest", "--site", str(site), "--cache-dir", str(cache)]) == 0
    assert "hash mismatch" in (site / "index.html").read_text(encoding="utf-8")
    path.unlink()
    text, _ = markdown()
    assert "is gone" in text


@pytest.mark.slow
def test_a_run_stores_predictions_first_and_scores_them(tmp_path):
    kernel = tmp_path / "two_kernels.py"
    shutil.copy(DATA / "two_kernels.py", kernel)
    cache = tmp_path / "cache"
    path = tmp_path / "predict.json"
    lines = [ln for ln in kernel.read_text().splitlines()]
    load_line = lines.index("    x = tl.load(x_ptr + offs, mask=mask)") + 1
    store_line = lines.index("    tl.store(out_ptr + offs, x + y, mask=mask)") + 1
    path.write_text(
        json.dumps(
            {
                "predict": [
                    {"operator": "mask-drop", "line": load_line, "verdict": "survived"},
                    {"operator": "mask-drop", "line": store_line, "verdict": "killed"},
                ]
            }
        )
    )
    base = ["run", str(kernel), "--operators", "mask-drop", "--writer", "none", "-q"]
    base += ["--cache-dir", str(cache), "--predict", str(path)]
    proc = run_cli(*base, "--json", str(tmp_path / "r.json"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    section = json.loads((tmp_path / "r.json").read_text())["predictions"]
    assert section["result"]["right"] == 1 and section["result"]["total"] == 2
    assert section["result"]["misses"][0]["prediction"] == f"mask-drop line {store_line}"
    assert section["file_now"] == "same"
    assert "predicted 1 of 2" in proc.stdout

    # the original fails: nothing is judged, yet the predictions are in the run record
    source = kernel.read_text()
    kernel.write_text(source.replace("x + y)\n", "x + y + 1)\n", 1))
    failed = run_cli(*base, cwd=tmp_path)
    assert failed.returncode == 2, failed.stdout + failed.stderr
    shown = run_cli("cache", "show", "latest", "--json", "--cache-dir", str(cache), cwd=tmp_path)
    record = json.loads(shown.stdout)
    assert record["report"] is None
    assert record["predictions"]["sha256"] == section["sha256"]
    assert record["predictions"]["text"] == path.read_text()
