"""Accepted survivors (``--accepted``, ``mutant-gate accept``).

Fast: the content hash, the file's format, ``accept`` on a recorded run, the
score. Slow: real runs of ``tests/data/two_kernels.py`` (five dropped masks survive
its whole-block check) with ``--fail-under 100``: exit 1; every survivor accepted:
exit 0; one mutated line edited: that survivor is back, exit 1.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mutant_gate.cli.main import main
from mutant_gate.engine import accepted
from mutant_gate.engine.errors import BadInput
from mutant_gate.engine.report import score
from mutant_gate.engine.settings import DEFAULT_BASELINE

from .conftest import run_cli

DATA = Path(__file__).parent / "data"
RECORDED = DATA / "layer_norm_checks_report.json"


def _row(report: dict, verdict: str) -> dict:
    return next(r for r in report["mutants"] if r["verdict"] == verdict)


def test_content_hash_follows_the_function_not_the_file():
    report = json.loads(RECORDED.read_text())
    source = report["kernel"]["source"]
    row = _row(report, "survived")
    before = accepted.content_hash(source, row)
    # lines added above the file's functions move the mutant: same hash
    moved = {**row, "line": row["line"] + 3}
    assert accepted.content_hash("# one\n# two\n# three\n" + source, moved) == before
    # an edit inside the mutated function: another hash
    lines = source.split("\n")
    lines[row["line"] - 1] += "  # edited"
    assert accepted.content_hash("\n".join(lines), row) != before
    # another mutant of the same function: another hash
    other = next(
        r
        for r in report["mutants"]
        if r["function"] == row["function"] and (r["line"], r["col"]) != (row["line"], row["col"])
    )
    assert accepted.content_hash(source, other) != before


def test_file_round_trip_and_bad_files(tmp_path):
    path = tmp_path / "mutant-gate-baseline.toml"
    entry = accepted.Entry(
        hash="ab" * 16,
        reason='pads to a block: "always" \\ safe\tê\x7f',
        id="8dc9e4fa6a81",
        line=28,
    )
    added, present = accepted.add(str(path), [entry])
    assert added == [entry] and not present
    assert accepted.load(str(path)) == [entry]
    added, present = accepted.add(str(path), [entry])
    assert not added and present == [entry]
    assert path.read_text().count("[[accepted]]") == 1

    bad = {
        "no_file": None,
        "toml": "accepted = [",
        "version": "version = 2\n",
        "reason": '[[accepted]]\nhash = "' + "ab" * 16 + '"\nreason = " "\n',
        "hash": '[[accepted]]\nhash = "not hex"\nreason = "ok"\n',
        "key": '[[accepted]]\nhash = "' + "ab" * 16 + '"\nreason = "ok"\nwho = "me"\n',
        "top": 'accept = "x"\n',
    }
    for name, text in bad.items():
        file = tmp_path / f"{name}.toml"
        if text is not None:
            file.write_text(text)
        with pytest.raises(BadInput) as err:
            accepted.load(str(file))
        assert "\n" not in str(err.value) and str(file) in str(err.value), name


def test_score_leaves_accepted_survivors_out_never_as_killed():
    rows = [
        {"id": "a", "verdict": "killed"},
        {"id": "b", "verdict": "survived"},
        {"id": "c", "verdict": "survived", "accepted": {"reason": "fine"}},
        {"id": "d", "verdict": "killed", "accepted": {"reason": "stale"}},
    ]
    s = score(rows)
    assert s["killed"] == 2 and s["total"] == 4 and s["raw"] == 50.0
    assert s["adjusted"] == round(100 * 2 / 3, 2)
    assert s["accepted"] == [{"id": "c", "reason": "fine"}]
    assert s["by_verdict"]["survived"] == 2


def test_accept_from_a_recorded_run(tmp_path, capsys, monkeypatch):
    cache = tmp_path / "cache"
    assert main(["cache", "import", str(RECORDED), "--cache-dir", str(cache)]) == 0
    report = json.loads(RECORDED.read_text())
    survivor, killed = _row(report, "survived"), _row(report, "killed")
    file = tmp_path / "accepted.toml"
    args = ["--cache-dir", str(cache), "--accepted", str(file)]
    capsys.readouterr()
    code = main(["accept", "latest", survivor["id"][:8], "--reason", "pads", *args])
    assert code == 0, capsys.readouterr().err
    (entry,) = accepted.load(str(file))
    assert entry.id == survivor["id"] and entry.reason == "pads"
    assert entry.hash == accepted.content_hash(report["kernel"]["source"], survivor)
    assert "accepted 1 survivor" in capsys.readouterr().out
    assert main(["accept", "latest", survivor["id"], "--reason", "again", *args]) == 0
    assert "already accepted" in capsys.readouterr().out
    assert len(accepted.load(str(file))) == 1
    # bad input: one line, exit 2, the file untouched
    for argv, says in [
        (["latest", killed["id"], "--reason", "x"], "is killed, not a survivor"),
        (["latest", "zzzz", "--reason", "x"], "no mutant 'zzzz'"),
        (["latest", survivor["id"], "--reason", "  "], "--reason"),
    ]:
        assert main(["accept", *argv, *args]) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1, err
    assert len(accepted.load(str(file))) == 1
    # the default file, in the current directory
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "accept",
                "latest",
                survivor["id"],
                "--reason",
                "x",
                "--cache-dir",
                str(cache),
            ]
        )
        == 0
    )
    assert len(accepted.load(str(tmp_path / DEFAULT_BASELINE))) == 1


def test_accepted_from_the_configuration_and_a_missing_file(tmp_path, capsys, monkeypatch):
    cache = tmp_path / "cache"
    assert main(["cache", "import", str(RECORDED), "--cache-dir", str(cache)]) == 0
    survivor = _row(json.loads(RECORDED.read_text()), "survived")
    (tmp_path / "ci").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.mutant-gate]\naccepted = "ci/accepted.toml"\n')
    monkeypatch.chdir(tmp_path)
    argv = ["accept", "latest", survivor["id"], "--reason", "ok", "--cache-dir", "cache"]
    assert main(argv) == 0, capsys.readouterr().err
    assert [e.id for e in accepted.load(str(tmp_path / "ci" / "accepted.toml"))] == [survivor["id"]]
    kernel = DATA / "two_kernels.py"
    capsys.readouterr()
    assert main(["run", str(kernel), "--accepted", str(tmp_path / "none.toml")]) == 2
    err = capsys.readouterr().err
    assert "--accepted: no such file" in err and err.count("\n") == 1


@pytest.mark.slow
def test_accepted_survivors_pass_the_gate_until_their_code_changes(tmp_path):
    kernel = tmp_path / "two_kernels.py"
    shutil.copy(DATA / "two_kernels.py", kernel)
    cache, file = tmp_path / "cache", tmp_path / "mutant-gate-baseline.toml"
    run = ["run", str(kernel), "--operators", "mask-drop", "--writer", "none", "-q"]
    run += ["--cache-dir", str(cache), "--fail-under", "100", "--json"]

    first = run_cli(*run, str(tmp_path / "1.json"), cwd=tmp_path)
    assert first.returncode == 1, first.stderr
    survivors = [r["id"] for r in json.loads((tmp_path / "1.json").read_text())["mutants"]]
    assert len(survivors) == 5
    add = run_cli(
        "accept", "latest", *survivors, "--reason", "whole blocks only",
        "--cache-dir", str(cache), cwd=tmp_path,
    )  # fmt: skip
    assert add.returncode == 0, add.stderr
    assert "accepted 5 survivors" in add.stdout

    second = run_cli(*run, str(tmp_path / "2.json"), "--accepted", str(file), cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    report = json.loads((tmp_path / "2.json").read_text())
    assert report["score"]["killed"] == 0, "accepted is never killed"
    assert report["score"]["adjusted"] is None
    assert {a["id"] for a in report["score"]["accepted"]} == set(survivors)
    assert all(r["verdict"] == "survived" and r["accepted"] for r in report["mutants"])
    assert report["accepted"]["unmatched"] == []
    assert "accepted (not counted): 5 of the 5 entries" in second.stdout

    # the mutated line of one survivor changes: its entry no longer covers it
    source = kernel.read_text()
    old = "    x = tl.load(x_ptr + offs, mask=mask)\n"
    assert source.count(old) == 1
    kernel.write_text(source.replace(old, "    x = tl.load(x_ptr + offs, mask=mask) + 0.0\n"))
    third = run_cli(*run, str(tmp_path / "3.json"), "--accepted", str(file), cwd=tmp_path)
    assert third.returncode == 1, third.stdout + third.stderr
    report = json.loads((tmp_path / "3.json").read_text())
    back = [r for r in report["mutants"] if r["verdict"] == "survived" and not r.get("accepted")]
    assert back, "the edited function's survivors are plain survivors again"
    assert {r["function"] for r in back} == {"add_kernel"}
    assert all(r.get("accepted") for r in report["mutants"] if r["function"] == "scale_kernel")
    assert report["accepted"]["unmatched"], "entries that no longer match are listed"


def test_the_old_spellings_still_work_and_say_once_that_they_are_old(tmp_path, capsys):
    """``baseline add`` and ``--baseline`` are the old names of ``accept`` and
    ``--accepted``: they do the same, and say so once per process."""
    from mutant_gate.cli import config

    config._said.clear()
    cache = tmp_path / "cache"
    assert main(["cache", "import", str(RECORDED), "--cache-dir", str(cache)]) == 0
    survivor = _row(json.loads(RECORDED.read_text()), "survived")
    file = tmp_path / "accepted.toml"
    old = ["baseline", "add", "latest", survivor["id"], "--reason", "pads"]
    capsys.readouterr()
    assert main([*old, "--cache-dir", str(cache), "--baseline", str(file)]) == 0
    err = capsys.readouterr().err
    assert "--baseline is deprecated: it is called --accepted now" in err
    assert "`mutant-gate baseline add` is deprecated: it is called `mutant-gate accept` now" in err
    assert [e.id for e in accepted.load(str(file))] == [survivor["id"]]
    assert main([*old, "--cache-dir", str(cache), "--baseline", str(file)]) == 0
    assert "deprecated" not in capsys.readouterr().err  # once
