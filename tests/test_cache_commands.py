"""``mutant-gate cache ls|show|clear|export|import``, and matching a rerun's mutants."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from mutant_gate.cache import Store
from mutant_gate.cli.main import main
from mutant_gate.engine.errors import BadInput
from mutant_gate.engine.mutate import generate_mutants
from mutant_gate.engine.records import MutantOutcome, Verdict
from mutant_gate.engine.report import mutant_row
from mutant_gate.engine.rerun import match_mutants, select
from mutant_gate.engine.session import latest_id, replay_lookup

from .conftest import EXAMPLES, run_cli

DATA = Path(__file__).parent / "data"
RECORDED = DATA / "layer_norm_checks_report.json"


@pytest.fixture
def report() -> dict:
    return json.loads(RECORDED.read_text())


def test_export_import_round_trip_replays_elsewhere(report, tmp_path, capsys):
    here, there = tmp_path / "here", tmp_path / "there"
    assert main(["cache", "import", str(RECORDED), "--cache-dir", str(here)]) == 0
    assert f"imported run {report['run_id']}" in capsys.readouterr().out
    for name in ("run.json", "run.json.gz"):
        out = tmp_path / name
        assert (
            main(["cache", "export", report["run_id"][:10], str(out), "--cache-dir", str(here)])
            == 0
        )
        opener = gzip.open if name.endswith(".gz") else open
        with opener(out, "rt") as fh:
            data = json.load(fh)
        assert data["format"] == "mutant-gate-run" and data["record"]["report"] == report
        target = there / name
        assert main(["cache", "import", str(out), "--cache-dir", str(target)]) == 0
        assert (
            f"mutant-gate replay {report['run_id']} --cache-dir {target}" in capsys.readouterr().out
        )
        # the explorer's replay reads it from the new cache, offline
        replayed, _ = replay_lookup(report["run_id"], str(target))
        assert replayed == report
        assert replay_lookup(latest_id("latest", str(target)), str(target))[0] == report
    # importing again replaces, and says so
    assert (
        main(
            ["cache", "import", str(tmp_path / "run.json"), "--cache-dir", str(there / "run.json")]
        )
        == 0
    )
    assert "replaced run" in capsys.readouterr().out


def test_ls_show_and_clear(report, tmp_path, capsys):
    cache = tmp_path / "c"
    assert main(["cache", "import", str(RECORDED), "--cache-dir", str(cache)]) == 0
    with Store(str(cache)) as store:
        store.put_result("abc", {"status": "passed"})
        store.put_run(
            "20990101-000000-unfinish",
            {"run_id": "20990101-000000-unfinish", "kernel": "k.py", "report": None},
        )
    capsys.readouterr()
    assert main(["cache", "ls", "--cache-dir", str(cache)]) == 0
    out = capsys.readouterr().out
    assert report["run_id"] in out and "58.3%" in out and "finished" in out
    assert "20990101-000000-unfinish" in out and "unfinished" in out
    assert "2 runs, 1 job results, 0 model replies" in out
    assert main(["cache", "show", report["run_id"], "--cache-dir", str(cache)]) == 0
    out = capsys.readouterr().out
    survivors = [r["id"] for r in report["mutants"] if r["verdict"] == "survived"]
    assert all(s in out for s in survivors) and "adjusted 58.3%" in out
    assert main(["cache", "show", "latest", "--json", "--cache-dir", str(cache)]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == "20990101-000000-unfinish"
    assert (
        main(["cache", "export", "latest", str(tmp_path / "x.json"), "--cache-dir", str(cache)])
        == 2
    )
    assert "unfinished" in capsys.readouterr().err
    assert main(["cache", "show", "2", "--cache-dir", str(cache)]) == 2
    assert "ambiguous" in capsys.readouterr().err
    assert main(["cache", "clear", "--runs", "--cache-dir", str(cache)]) == 0
    assert "removed 2 runs" in capsys.readouterr().out
    with Store(str(cache)) as store:
        assert store.counts() == {"runs": 0, "results": 1, "replies": 0}
    assert main(["cache", "clear", "--cache-dir", str(cache)]) == 0
    with Store(str(cache)) as store:
        assert store.counts() == {"runs": 0, "results": 0, "replies": 0}


def test_import_rejects_what_is_not_a_run(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    assert main(["cache", "import", str(bad), "--cache-dir", str(tmp_path / "c")]) == 2
    assert "not a mutant-gate export" in capsys.readouterr().err
    assert main(["cache", "import", str(tmp_path / "missing.json")]) == 2


def test_cache_commands_through_the_console_script(tmp_path):
    proc = run_cli("cache", "import", str(RECORDED), "--cache-dir", "c", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("cache", "ls", "--cache-dir", "c", cwd=tmp_path)
    assert proc.returncode == 0 and "layer_norm.py" in proc.stdout


# -- a rerun's mutants match the run's ---------------------------------------------------------
def rows_of(source: str, verdicts: dict[int, str] | None = None) -> list[dict]:
    mutants = generate_mutants(source, "vector_add.py")
    rows = []
    for i, m in enumerate(mutants):
        verdict = Verdict((verdicts or {}).get(i, "killed"))
        rows.append(mutant_row(m, MutantOutcome(m.id, verdict, None, "", 0.1, False)))
    return rows


def test_rerun_matches_mutants_when_only_checks_were_added():
    source = (EXAMPLES / "vector_add.py").read_text()
    rows = rows_of(source)
    same = match_mutants(rows, generate_mutants(source, "vector_add.py"), same_file=True)
    assert all(old == new.id for old, new in same.items())
    grown = source + "\n\ndef test_odd():\n    assert add is not None\n"
    mapping = match_mutants(rows, generate_mutants(grown, "vector_add.py"), same_file=False)
    assert len(mapping) == len(rows)
    for row in rows:
        new = mapping[row["id"]]
        assert (new.operator, new.line, new.before, new.after) == (
            row["operator"], row["line"], row["before"], row["after"],
        )  # fmt: skip
    changed = source.replace("output = x + y", "output = y + x")
    with pytest.raises(BadInput, match="the jit code changed since the run"):
        match_mutants(rows, generate_mutants(changed, "vector_add.py"), same_file=False)


def test_rerun_selects_survivors_and_prefixes():
    rows = rows_of((EXAMPLES / "vector_add.py").read_text(), {1: "survived", 4: "survived"})
    assert select(rows, True, []) == [rows[1]["id"], rows[4]["id"]]
    assert select(rows, False, [rows[2]["id"][:7]]) == [rows[2]["id"]]
    assert select(rows, True, [rows[1]["id"]]) == [rows[1]["id"], rows[4]["id"]]
    with pytest.raises(BadInput, match="no such mutant"):
        select(rows, False, ["zz"])
