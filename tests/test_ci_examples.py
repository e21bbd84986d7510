"""examples/ci's matrix workflow: it parses, its shards cover 1..N once each, and the
flags its commands use exist (the workflow is not run here)."""

from __future__ import annotations

import re

import yaml

from mutant_gate.cli.config import subparser
from mutant_gate.cli.main import build_parser

from .conftest import EXAMPLES

WORKFLOW = EXAMPLES / "ci" / "mutant-gate-shards.yml"


def _script(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"]).replace("\\\n", " ")


def _flags(script: str, command: str) -> set[str]:
    line = next(ln for ln in script.splitlines() if command in ln)
    return {word.split("=")[0] for word in line.split() if word.startswith("--")}


def _known(command: str) -> set[str]:
    return {s for a in subparser(build_parser(), command)._actions for s in a.option_strings}


def test_the_matrix_runs_every_shard_once_then_merges():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    jobs = workflow["jobs"]
    shards = jobs["shard"]["strategy"]["matrix"]["shard"]
    n = int(workflow["env"]["SHARDS"])
    assert shards == list(range(1, n + 1)), "matrix.shard must be 1..SHARDS"
    assert jobs["merge"]["needs"] == "shard"
    run = _script(jobs["shard"])
    assert re.search(r'--shard "\$\{\{ matrix\.shard \}\}/\$SHARDS"', run), run
    assert {"--shard", "--json"} <= _flags(run, "mutant-gate run") <= _known("run")
    assert "--changed-since" in run and "--changed-since" in _known("run")
    merge = _script(jobs["merge"])
    assert "mutant-gate merge reports/shard-*.json" in merge
    assert {"--json", "--fail-under"} <= _flags(merge, "mutant-gate merge") <= _known("merge")
    # each shard's report reaches the merge: uploaded by name, downloaded by pattern
    uploads = [s for s in jobs["shard"]["steps"] if "upload-artifact" in s.get("uses", "")]
    downloads = [s for s in jobs["merge"]["steps"] if "download-artifact" in s.get("uses", "")]
    assert uploads and downloads
    prefix = uploads[0]["with"]["name"].split("${{")[0]
    assert downloads[0]["with"]["pattern"] == prefix + "*"
