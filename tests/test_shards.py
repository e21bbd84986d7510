"""``--shard K/N`` and ``mutant-gate merge``: a library's mutants split over CI jobs, and
the shards' reports joined into the report an unsharded run writes."""

from __future__ import annotations

import hashlib
import json

import pytest

from mutant_gate.engine.errors import BadInput
from mutant_gate.engine.library import in_shard, parse_shard

from .conftest import run_cli
from .test_library_run import QUICK, copy_lib, verdicts
from .test_report_schema import validate


def test_every_mutant_is_in_exactly_one_shard():
    ids = [hashlib.sha256(str(n).encode()).hexdigest()[:12] for n in range(300)]
    for n in (1, 2, 3, 7):
        shares = [[i for i in ids if in_shard(i, (k, n))] for k in range(1, n + 1)]
        assert sorted(i for share in shares for i in share) == sorted(ids)
        if n > 1:  # a share by hash: none is empty on 300 ids
            assert all(shares)
    assert all(in_shard(i, None) for i in ids)


@pytest.mark.parametrize("text", ["0/3", "4/3", "1/0", "x", "1/3/2", "-1/3"])
def test_a_shard_out_of_range_is_bad_input(text):
    with pytest.raises(BadInput, match="--shard"):
        parse_shard(text)
    assert parse_shard(" 2/3 ") == (2, 3)


@pytest.mark.parametrize("text", ["0/3", "4/3", "two"])
def test_the_command_line_says_a_bad_shard_in_one_line(tmp_path, text):
    root = copy_lib(tmp_path)
    proc = run_cli("run", "src/kernel_lib", "--tests", "tests", "--shard", text, *QUICK, cwd=root)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--shard {text}" in lines[0], proc.stderr


def test_merge_refuses_what_is_not_a_shard(tmp_path):
    (tmp_path / "one.json").write_text(json.dumps({"mutants": [], "kernel": {}}))
    proc = run_cli("merge", "one.json", "--json", "out.json", cwd=tmp_path)
    assert proc.returncode == 2
    assert "one.json: not a library run's report (no files section)" in proc.stderr
    proc = run_cli("merge", "missing.json", "--json", "out.json", cwd=tmp_path)
    assert proc.returncode == 2 and "missing.json: not a readable JSON report" in proc.stderr


def merged_error(root, *names: str) -> str:
    proc = run_cli("merge", *names, "--json", "bad.json", cwd=root)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.slow
def test_three_merged_shards_give_the_unsharded_report(tmp_path):
    root = copy_lib(tmp_path)
    common = ("run", "src/kernel_lib", "--tests", "tests", *QUICK)
    proc = run_cli(*common, "--no-cache", "--json", "whole.json", cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    whole = json.loads((root / "whole.json").read_text())
    ids = []
    for k in (1, 2, 3):
        proc = run_cli(*common, "--shard", f"{k}/3", "--json", f"s{k}.json", cwd=root)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        shard = json.loads((root / f"s{k}.json").read_text())
        validate(shard)
        assert shard["library"]["shard"] == f"{k}/3"
        assert all(in_shard(row["id"], (k, 3)) for row in shard["mutants"])
        ids += [row["id"] for row in shard["mutants"]]
    assert sorted(ids) == sorted(row["id"] for row in whole["mutants"])  # each once

    proc = run_cli("merge", "s1.json", "s2.json", "s3.json", "--json", "merged.json", cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    merged = json.loads((root / "merged.json").read_text())
    validate(merged)
    assert [row["id"] for row in merged["mutants"]] == [row["id"] for row in whole["mutants"]]
    assert verdicts(merged) == verdicts(whole)
    for key in ("killed", "total", "raw", "adjusted", "excluded", "by_verdict"):
        assert merged["score"][key] == whole["score"][key], key
    assert merged["score"]["with_written"] == whole["score"]["with_written"]
    counts = ("path", "mutants", "killed", "survived", "score", "status")
    assert [{k: f[k] for k in counts} for f in merged["files"]] == [
        {k: f[k] for k in counts} for f in whole["files"]
    ]
    assert merged["library"]["shard"] is None and len(merged["library"]["merged"]) == 3
    score = whole["score"]
    assert f"your tests: {score['killed']}/{score['total']} killed" in proc.stdout

    # Bad input: a shard missing or twice, reports of other files or other settings.
    assert "shard 3/3 is missing" in merged_error(root, "s1.json", "s2.json")
    assert "shard 2/3 is given twice" in merged_error(root, "s1.json", "s2.json", "s2.json")
    other = json.loads((root / "s3.json").read_text())
    other["files"][0]["sha256"] = "0" * 64
    (root / "other_files.json").write_text(json.dumps(other))
    said = merged_error(root, "s1.json", "s2.json", "other_files.json")
    assert "other_files.json judged other files than s1.json" in said
    other = json.loads((root / "s3.json").read_text())
    other["settings"]["timeout_factor"] = 9.0
    (root / "other_settings.json").write_text(json.dumps(other))
    said = merged_error(root, "s1.json", "s2.json", "other_settings.json")
    assert "ran with other settings than s1.json (timeout_factor)" in said
    assert "whole.json: not a shard's report" in merged_error(root, "s1.json", "whole.json")
