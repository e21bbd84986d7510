"""A library's report in every face: the console's module and kernel tables, Stryker's
``files`` (every module), the HTML page and the site (the module list first), the
Markdown summary's module table, the explorer (grouped and filtered by module), and a
merge of shards that renders as the unsharded run.

One real library run of ``examples/kernel_lib`` (and its two shards, merged) at module
scope; each face is checked on that report.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from rich.console import Console

from mutant_gate.cli.library import module_table
from mutant_gate.engine.formats import render
from mutant_gate.engine.formats.modules import is_library, kernel_counts
from mutant_gate.tui.app import create_app
from mutant_gate.tui.model import Filters, RunModel
from mutant_gate.tui.screens.filter import FilterScreen
from mutant_gate.tui.widgets.mutant_grid import MutantGrid

from .conftest import run_cli
from .test_library_run import QUICK, copy_lib
from .test_output_width import wide
from .test_reports import SCHEMA, _escaped, _Page, check_html

DATA = Path(__file__).parent / "data"
SIZE = (140, 40)


@pytest.fixture(scope="module")
def lib(tmp_path_factory) -> dict:
    """The library's report (``whole``), its run's output, and the merge of two shards:
    about two minutes on 2 cores, so every test that takes it is marked slow."""
    root = copy_lib(tmp_path_factory.mktemp("faces"))
    # a fixed mutant limit (not one scaled by the original's time on a loaded machine): the
    # shards' jobs are the whole run's, served from its cache, their verdicts its verdicts
    fixed = ("--timeout-factor", "0", "--timeout-base", "60")
    common = ("run", "src/kernel_lib", "--tests", "tests", *QUICK, *fixed)
    proc = run_cli(*common, "--json", "whole.json", cwd=root, env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for k in (1, 2):  # from the cache the whole run filled
        shard = run_cli(*common, "--shard", f"{k}/2", "--json", f"s{k}.json", cwd=root)
        assert shard.returncode == 0, shard.stdout + shard.stderr
    merged = run_cli("merge", "s1.json", "s2.json", "--json", "merged.json", cwd=root)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    return {
        "root": root,
        "stdout": proc.stdout,
        "whole": json.loads((root / "whole.json").read_text()),
        "merged": json.loads((root / "merged.json").read_text()),
    }


def judged(report: dict) -> list[dict]:
    return [f for f in report["files"] if f["status"] == "judged"]


# -- the console -------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_console_shows_each_modules_kernels_by_survivors_in_80_columns(lib):
    report, out = lib["whole"], lib["stdout"]
    assert wide(out) == [], out
    lines = out.splitlines()
    start = next(n for n, ln in enumerate(lines) if ln.strip() == "kernels")
    table = []
    for line in lines[start + 4 :]:  # under the title, a blank line, the header and its rule
        if not line.strip():
            break
        table.append(line)
    for f in judged(report):
        for kernel in kernel_counts(report, f):
            row = next(ln for ln in table if f" {kernel['function']} " in ln)
            numbers = [int(n) for n in row.split()[-3:]]
            assert numbers == [kernel["mutants"], kernel["killed"], kernel["survived"]], row
    # the kernels' survivors add up to their module's, and the most survivors come first
    for f in judged(report):
        assert sum(k["survived"] for k in kernel_counts(report, f)) == f["survived"]
    survived = [
        int(ln.split()[-1]) for ln in table[: len(kernel_counts(report, judged(report)[0]))]
    ]
    assert survived == sorted(survived, reverse=True)
    most = max(judged(report), key=lambda f: f["survived"])
    assert table[0].split()[0] == most["module"], table[0]


def test_a_kernel_no_case_reaches_says_so_in_the_kernel_table():
    report = json.loads(json.dumps(_small_library()))
    console = Console(width=80, record=True)
    module_table(console, report)
    text = console.export_text()
    assert wide(text) == [], text
    line = next(ln for ln in text.splitlines() if " helper_kernel " in ln)
    assert line.rstrip().endswith("not reached"), line


# -- Stryker -------------------------------------------------------------------------------------
@pytest.mark.slow
def test_stryker_carries_every_module_with_its_source_and_mutants(lib, monkeypatch):
    monkeypatch.chdir(lib["root"])  # where the run was: its paths are relative to it
    report = lib["whole"]
    data = json.loads(render(report, "stryker"))
    jsonschema.validate(data, SCHEMA)
    root = data["projectRoot"]
    assert set(data["files"]) == {str(Path(f["path"]).relative_to(root)) for f in report["files"]}
    rows = {r["id"]: r for r in report["mutants"]}
    seen = []
    for name, entry in data["files"].items():
        path = str(Path(root) / name)
        source = Path(path).read_text()
        assert entry["source"] == source, name
        lines = source.splitlines(keepends=True)

        def offset(pos: dict, lines=lines) -> int:
            return sum(len(line) for line in lines[: pos["line"] - 1]) + pos["column"] - 1

        for m in entry["mutants"]:
            row = rows[m["id"]]
            assert row["file"] == path
            start, end = m["location"]["start"], m["location"]["end"]
            assert source[offset(start) : offset(end)] == row["before"], m["id"]
            seen.append(m["id"])
    assert sorted(seen) == sorted(rows)
    statuses = [m["status"] for e in data["files"].values() for m in e["mutants"]]
    assert statuses.count("Killed") + statuses.count("Timeout") == report["score"]["killed"]


# -- HTML and the site -------------------------------------------------------------------------
@pytest.mark.slow
def test_the_html_page_opens_on_the_module_list_linking_to_each_modules_mutants(lib):
    report = lib["whole"]
    text = render(report, "html")
    check_html(report, text)
    listed = text.index("Kernel modules")
    assert listed < text.index('class="cell ')  # the list first, the grid below it
    rows = re.findall(r'<tr class="s-(\w+)"><td><a href="#(f-\d+)"><code>([^<]+)</code>', text)
    by_survivors = sorted(report["files"], key=lambda f: (-f["survived"], f["path"]))
    assert [path for _, _, path in rows] == [_escaped(f["path"]) for f in by_survivors]
    for status, anchor, path in rows:
        record = next(f for f in report["files"] if _escaped(f["path"]) == path)
        assert status == record["status"]
        section = text.split(f'id="{anchor}"', 1)[1].split('<section class="module"', 1)[0]
        cells = set(re.findall(r'data-id="([0-9a-f]+)"', section))
        assert cells == {r["id"] for r in report["mutants"] if r["file"] == record["path"]}
        assert f"{record['survived']} survived" in section


def test_a_one_file_report_has_no_module_list():
    report = json.loads((DATA / "layer_norm_checks_report.json").read_text())
    assert not is_library(report)
    for fmt in ("html", "markdown"):
        assert "Kernel modules" not in render(report, fmt)


@pytest.mark.slow
def test_the_site_opens_a_library_run_on_its_module_list(lib, tmp_path):
    report = lib["whole"]
    path = lib["root"] / "whole.json"
    proc = run_cli("report", str(path), "--site", str(tmp_path / "site"), cwd=lib["root"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (tmp_path / "site" / "index.html").read_text()
    page = _Page()
    page.feed(text)
    assert len(page.ids) == len(set(page.ids)), "element ids are unique"
    assert text.index("Kernel modules") < text.index('class="cell ')
    for n in range(len(report["files"])):
        assert f'href="#r0-f-{n}"' in text and f'id="r0-f-{n}"' in text
    cells = {a["data-id"] for t, a in page.tags if t == "a" and "cell" in a.get("class", "")}
    assert cells == {"r0-" + r["id"] for r in report["mutants"]}
    assert all(f"m-{c}" in page.ids for c in cells), "every cell opens its mutant's panel"


# -- Markdown ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_markdown_summary_has_a_per_module_table(lib):
    report = lib["whole"]
    text = render(report, "markdown")
    table = text.split("### Kernel modules", 1)[1].split("\n\n", 2)[1].splitlines()[2:]
    assert len(table) == len(report["files"])
    for line, f in zip(table, sorted(report["files"], key=lambda f: -f["survived"]), strict=True):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[:4] == [
            f"`{f['path']}`",
            str(f["mutants"]),
            str(f["killed"]),
            str(f["survived"]),
        ]
        assert cells[5].startswith("judged")
    for row in report["mutants"]:
        assert (f"`{row['id']}`" in text) == (row["verdict"] == "survived"), row["id"]


# -- the explorer -----------------------------------------------------------------------------
@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.slow
def test_the_model_groups_and_filters_a_library_by_module(lib):
    report = lib["whole"]
    model = RunModel.from_report(report)
    assert model.library and model.groupings[0] == "module"
    assert model.kernel_path == "src/kernel_lib"
    paths = [f["path"] for f in report["files"]]
    keys = {model.group_key(i, "module") for i in range(len(model.rows))}
    assert keys == set(paths)
    one = judged(report)[0]["path"]
    shown = [i for i in range(len(model.rows)) if model.matches(i, Filters(modules={one}))]
    assert shown and all(model.rows[i]["file"] == one for i in shown)
    assert len(shown) == judged(report)[0]["mutants"]
    # a one-file report groups as it always has
    single = RunModel.from_report(json.loads((DATA / "tui_layer_norm_report.json").read_text()))
    assert not single.library and single.groupings == ("function", "family")


@pytest.mark.slow
@pytest.mark.anyio
async def test_replay_of_a_library_groups_the_grid_by_module_folds_and_filters(
    lib, tmp_path, monkeypatch
):
    monkeypatch.chdir(lib["root"])  # where the run was: accepting reads the module's source
    report = lib["whole"]
    app = create_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        grid = app.explorer.grid
        paths = [f["path"] for f in report["files"] if f["mutants"]]
        assert grid.grouping == "module" and sorted(grid.group_keys) == sorted(paths)
        assert sorted(grid.visible_ids) == sorted(r["id"] for r in report["mutants"])
        # fold the cursor's module: its cells leave the grid, the cursor goes on past them
        first = app.model.row(grid.current)["file"]
        await pilot.press("z")
        await pilot.pause()
        assert first in grid.folded
        assert {app.model.row(i)["file"] for i in grid.visible_ids} == set(paths) - {first}
        assert app.model.row(grid.current)["file"] != first
        await pilot.press("Z")  # unfold them all
        await pilot.pause()
        assert not grid.folded and len(grid.visible_ids) == len(report["mutants"])
        # the filter screen lists the modules; ticking one shows its mutants only
        await pilot.press("f")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FilterScreen)
        modules = screen.query_one("#modules")
        values = [modules.get_option_at_index(n).value for n in range(modules.option_count)]
        assert sorted(values) == sorted(f["path"] for f in report["files"])
        one = judged(report)[0]["path"]
        modules.select(one)
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert {app.model.row(i)["file"] for i in grid.visible_ids} == {one}
        assert "module " in app.explorer.header.filters_text
        # g: module, function (per module), family, module again
        for grouping in ("function", "family", "module"):
            await pilot.press("g")
            await pilot.pause()
            assert grid.grouping == grouping
        await pilot.press("g")
        await pilot.pause()
        assert all(key.startswith(Path(one).name + ": ") for key in grid.group_keys)
        # a survivor accepted in a library's replay is its module's entry
        survivor = next(r for r in report["mutants"] if r["verdict"] == "survived")
        baseline = tmp_path / "baseline.toml"
        assert app.accept_survivor(survivor["id"], "lets it stand", str(baseline))
        assert survivor["file"] in baseline.read_text() and survivor["id"] in baseline.read_text()


def _as_library(report: dict) -> dict:
    """A one-file report dressed as a library's: its rows split over two modules."""
    rows = [{**r, "file": f"ops/m{n % 2}.py"} for n, r in enumerate(report["mutants"])]
    files = [
        {"path": f"ops/m{k}.py", "status": "judged", "reason": "", "mutants": 0, "survived": 0}
        for k in (0, 1)
    ]
    library = {k: v for k, v in report.items() if k != "kernel"}
    return {**library, "library": {"paths": ["ops"]}, "files": files, "mutants": rows}


@pytest.mark.anyio
async def test_a_click_on_a_modules_title_folds_it_and_keeps_the_cursor_elsewhere():
    report = _as_library(json.loads((DATA / "tui_layer_norm_report.json").read_text()))
    app = create_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        grid = app.explorer.grid
        assert grid.group_keys == ["ops/m0.py", "ops/m1.py"]
        await pilot.press("end")  # the cursor in the second module
        await pilot.pause()
        before = grid.current
        await pilot.click(MutantGrid, offset=(1, 0))  # the first module's title
        await pilot.pause()
        assert grid.folded == {"ops/m0.py"} and grid.current == before
        assert all(app.model.row(i)["file"] == "ops/m1.py" for i in grid.visible_ids)
        await pilot.click(MutantGrid, offset=(1, 0))
        await pilot.pause()
        assert not grid.folded and len(grid.visible_ids) == len(report["mutants"])
        await pilot.press("z")  # the cursor's module
        await pilot.pause()
        assert grid.folded == {"ops/m1.py"} and grid.current is not None
        assert app.model.row(grid.current)["file"] == "ops/m0.py"


# -- merge ------------------------------------------------------------------------------------
#: what differs between a run and the same run served from the cache: the time it took
RUN_FIELDS = ("cached", "duration_s")


def _verdicts_only(report: dict) -> dict:
    """The report without the ids of its runs, the times they took, and the order each
    test's kills were joined in."""
    rows = []
    for row in report["mutants"]:
        row = {k: v for k, v in row.items() if k not in RUN_FIELDS}
        if isinstance(row.get("oracle"), dict):
            row["oracle"] = {k: v for k, v in row["oracle"].items() if k != "seconds"}
        rows.append(row)
    files = [{**f, "run_id": None} for f in report["files"]]
    tests = [{**t, "kills": sorted(t.get("kills") or [])} for t in report["tests"]]
    return {**report, "run_id": "run", "files": files, "mutants": rows, "tests": tests}


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["stryker", "markdown", "html", "junit"])
def test_merged_shards_render_as_the_unsharded_run(lib, fmt):
    whole, merged = _verdicts_only(lib["whole"]), _verdicts_only(lib["merged"])
    assert render(merged, fmt) == render(whole, fmt)


@pytest.mark.slow
def test_merged_shards_print_the_unsharded_tables(lib):
    tables = []
    for report in (lib["whole"], lib["merged"]):
        console = Console(width=80, record=True)
        module_table(console, report)
        tables.append(console.export_text())
    assert tables[0] == tables[1]
    assert "kernels" in tables[0]


def test_every_face_says_a_left_out_module_and_an_unreached_kernel():
    report = _small_library()
    left = {
        "path": "ops/b.py",
        "jit_functions": [],
        "mutants": 0,
        "killed": 0,
        "survived": 0,
        "score": None,
        "status": "left_out",
        "reason": "its original fails: tests/test_b.py::test_b",
    }
    report["files"].append(left)
    stryker = json.loads(render(report, "stryker"))
    jsonschema.validate(stryker, SCHEMA)
    assert (
        stryker["files"]["b.py"]["mutants"] == [] and len(stryker["files"]["a.py"]["mutants"]) == 4
    )
    html = render(report, "html")
    assert "left out" in html and _escaped(left["reason"]) in html
    assert "not reached by the tests: helper_kernel" in html
    markdown = render(report, "markdown")
    assert f"| `ops/b.py` | 0 | 0 | 0 | left out | left out: {left['reason']} |" in markdown
    assert "| `ops/a.py` | `helper_kernel` | 1 | not reached |" in markdown


def _small_library() -> dict:
    """A library report of one module whose second kernel no case reaches."""
    places = {"line": 3, "col": 4, "before": "a < n", "after": "a <= n", "diff": ""}
    places.update(operator="lt-le", family="boundaries", file="ops/a.py")
    rows = [
        {"id": f"k{n}", "verdict": v, "function": "main_kernel", **places}
        for n, v in enumerate(["killed", "survived", "killed"])
    ] + [
        {"id": "h0", "verdict": "survived", "function": "helper_kernel", **places},
    ]
    rows[-1]["reached"] = False
    return {
        "library": {"paths": ["ops"]},
        "files": [
            {
                "path": "ops/a.py",
                "jit_functions": ["main_kernel", "helper_kernel"],
                "mutants": 4,
                "killed": 2,
                "survived": 2,
                "score": 50.0,
                "status": "judged",
                "reason": "",
                "not_reached": ["helper_kernel"],
            }
        ],
        "mutants": rows,
        "tests": [],
        "score": {},
    }
