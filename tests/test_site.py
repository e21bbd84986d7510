"""The replay site (``mutant-gate report RUN... --site DIR``) from recorded runs.

Three recorded runs of two kernel files are imported into a fresh cache: the layer
norm's twice (an older run and a newer one) and an affine kernel's once. ``latest``
must pick the newer layer-norm run and the affine run; every file written must open
offline (no address, no ``src``, no stylesheet link, no link off the page) and hold
nothing secret, though the runs' settings carry a token in an address and a key.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from mutant_gate.cli.main import main
from mutant_gate.engine.formats.html import esc
from mutant_gate.engine.formats.site import REMOVED, scrub

DATA = Path(__file__).parent / "data"
SECRET = "nvapi-Zq81xLw0pPq4Rr7sT9uV2wX5yZ8aB1cD"
URL_TOKEN = "hunter2-password"


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def check_offline(path: Path) -> list[tuple[str, dict]]:
    """Every reference in a written file stays inside it; returns its tags."""
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"https?://", text, re.I), f"{path.name} names an address"
    assert not re.search(r"<script[^>]*\bsrc\s*=", text, re.I)
    assert not re.search(r"<link\b", text, re.I)
    assert not re.search(r"url\(|@import", text, re.I), "the stylesheet fetches nothing"
    page = _Tags()
    page.feed(text)
    for tag, attrs in page.tags:
        assert "src" not in attrs, (tag, attrs)
        href = attrs.get("href")
        assert href is None or href.startswith("#"), (tag, href)
    ids = [a["id"] for _, a in page.tags if "id" in a]
    assert len(ids) == len(set(ids)), "element ids are unique"
    return page.tags


def _recorded(name: str, run_id: str, secret_settings: bool) -> dict:
    report = json.loads((DATA / name).read_text())
    report["run_id"] = run_id
    if secret_settings:
        llm = report["settings"]["writers"]["llm"]
        llm["base_url"] = f"https://team:{URL_TOKEN}@llm.example.test/v1/?api_key={URL_TOKEN}"
        report["settings"]["extra"] = {"api_key": SECRET, "note": SECRET}
    return report


@pytest.fixture
def cache(tmp_path, monkeypatch) -> tuple[Path, dict]:
    monkeypatch.setenv("NEBIUS_API_KEY", SECRET)
    cache = tmp_path / "cache"
    runs = {
        "old": _recorded("layer_norm_checks_report.json", "20261101-000000-aaaaaaaa", False),
        "new": _recorded("layer_norm_checks_report.json", "20261102-000000-bbbbbbbb", True),
        "affine": _recorded("tui_affine_oracle_report.json", "20261103-000000-cccccccc", True),
    }
    runs["old"]["mutants"][0]["verdict"] = "error"  # tells the two layer-norm runs apart
    # the key itself in a reason (a model quoting it back): blanked wherever it is
    runs["new"]["mutants"][1]["reason"] += f" (sent with {SECRET})"
    # a survivor with a claim, the oracle's evidence and a verdict change on record
    row = next(r for r in runs["new"]["mutants"] if r["verdict"] == "survived")
    row["claims"] = [
        {
            "by": "model",
            "claim": "EQUIVALENT",
            "reason": "the mask is all-true here",
            "oracle": "outputs differ in Y (max abs 2)",
        },
    ]
    row["changes"] = [
        {
            "stage": "claims",
            "was": "equivalent",
            "now": "survived",
            "evidence": "outputs differ in Y (max abs 2)",
        }
    ]
    for run in runs.values():
        path = tmp_path / f"{run['run_id']}.json"
        path.write_text(json.dumps(run))
        assert main(["cache", "import", str(path), "--cache-dir", str(cache)]) == 0
    return cache, runs


def test_site_of_the_latest_run_per_kernel_file(cache, tmp_path, capsys):
    cache_dir, runs = cache
    site = tmp_path / "site"
    code = main(["report", "latest", "--site", str(site), "--cache-dir", str(cache_dir)])
    assert code == 0, capsys.readouterr().err
    assert "2 runs (2 kernel files)" in capsys.readouterr().out
    written = sorted(p for p in site.rglob("*") if p.is_file())
    assert [p.name for p in written] == ["index.html"]
    tags = check_offline(written[0])
    text = written[0].read_text(encoding="utf-8")
    assert SECRET not in text and URL_TOKEN not in text
    assert REMOVED in text

    grids = [a["id"] for t, a in tags if t == "section" and "kernel" in a.get("class", "")]
    assert len(grids) == 2, "one grid per kernel file"
    cells = [a for t, a in tags if t == "a" and "cell" in a.get("class", "")]
    shown = {runs["new"]["run_id"], runs["affine"]["run_id"]}
    assert runs["old"]["run_id"] not in text and shown <= set(
        re.findall(r"\d{8}-\d{6}-\w{8}", text)
    )
    expected = len(runs["new"]["mutants"]) + len(runs["affine"]["mutants"])
    assert len(cells) == expected
    panels = {a["id"] for t, a in tags if t == "section" and "detail" in a.get("class", "")}
    assert {c["href"][1:] for c in cells} == panels, "every square opens its own panel"
    for cell in cells:
        assert f"v-{cell['data-verdict']}" in cell["class"]

    # a panel: the diff, the verdict and reason, the killing test, the claim and evidence
    new = runs["new"]
    index = [r["run_id"] for r in (new, runs["affine"])].index(new["run_id"])
    for row in new["mutants"]:
        section = text.split(f'id="m-r{index}-{row["id"]}"', 1)[1].split("</section>", 1)[0]
        assert f"<b>{row['verdict']}</b>" in section
        added = next(ln for ln in row["diff"].splitlines() if ln.startswith("+") and ln[1:2] != "+")
        assert esc(added) in section
        if row["by"] == "own-check":
            slot = re.search(r'data-test="(r\d-t-\d+)-src"', section)
            assert slot, "the killing test is named"
            own = next(t for t in new["tests"] if t["origin"] == "own")
            assert f'id="{slot.group(1)}-src">{esc(own["source"])}</pre>' in text
        if row.get("claims"):
            assert esc("model: EQUIVALENT (the mask is all-true here)") in section
            assert esc("claims: equivalent → survived: outputs differ in Y (max abs 2)") in section


def test_site_of_named_runs_and_bad_input(cache, tmp_path, capsys):
    cache_dir, runs = cache
    site = tmp_path / "named"
    old, new = runs["old"]["run_id"], runs["new"]["run_id"]
    args = ["--cache-dir", str(cache_dir)]
    assert main(["report", old, new[:12], old, "--site", str(site), *args]) == 0
    text = (site / "index.html").read_text(encoding="utf-8")
    assert old in text and new in text and text.count('class="kernel"') == 2
    check_offline(site / "index.html")
    capsys.readouterr()
    assert main(["report", old, new, *args]) == 2
    assert "one RUN per report" in capsys.readouterr().err
    assert main(["report", "nope", "--site", str(site), *args]) == 2
    assert "no run 'nope'" in capsys.readouterr().err
    assert main(["report", old, "--site", str(site), "--out", "x.html", *args]) == 2
    (tmp_path / "file").write_text("")
    assert main(["report", old, "--site", str(tmp_path / "file"), *args]) == 2
    assert "not a directory" in capsys.readouterr().err.splitlines()[-1]


def test_scrub_removes_key_like_settings():
    settings = {
        "base_url": "https://u:p4ss@host.test:8443/v1/?key=abc#frag",
        "max_tokens": 16384,
        "api_key": "anything",
        "auth_token": "x",
        "model": "nvidia/nemotron-3-super-120b-a12b",
        "extra": {"headers": ["Bearer", "sk-abcdef123456"], "seed": 0},
        "long": "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7",
        "price_in": None,
    }
    out = scrub(settings)
    assert out["base_url"] == "https://host.test:8443/v1/"
    assert out["max_tokens"] == 16384 and out["model"] == settings["model"]
    assert out["api_key"] == out["auth_token"] == out["long"] == REMOVED
    assert out["extra"] == {"headers": ["Bearer", REMOVED], "seed": 0}
    assert out["price_in"] is None
