"""Write docs/tui.svg: the explorer on a replayed run, a survivor under the cursor.

    python docs/make_tui_svg.py [REPORT.json | RUN] [--cache-dir DIR] [--out docs/tui.svg]

Default: the layer-norm report the TUI tests replay (tests/data), so the picture is
reproducible. RUN may be any cached run (id, unique prefix or ``latest``). Offline:
no sandbox, no key.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from mutant_gate.cache import DEFAULT_DIR
from mutant_gate.engine.session import find_report
from mutant_gate.tui.app import create_app

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REPORT = ROOT / "tests" / "data" / "tui_layer_norm_report.json"
SIZE = (120, 36)


async def screenshot(report: dict, out: Path) -> None:
    app = create_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        survivors = [m for m in report["mutants"] if m["verdict"] == "survived"]
        # a test gap first: a survivor whose outputs differ, where the oracle saw one
        survivors.sort(key=lambda m: (m.get("survivor") or {}).get("kind") != "differs")
        survivor = survivors[0]["id"] if survivors else None
        if survivor is not None:
            app.explorer.grid.select(survivor)
        await pilot.pause()
        out.write_text(app.export_screenshot(title="mutant-gate replay"), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", default=str(DEFAULT_REPORT))
    parser.add_argument("--cache-dir", default=DEFAULT_DIR)
    parser.add_argument("--out", default=str(ROOT / "docs" / "tui.svg"))
    args = parser.parse_args()
    if args.run.endswith(".json"):
        report = json.loads(Path(args.run).read_text())
    else:
        report = find_report(args.run, args.cache_dir)
    out = Path(args.out)
    asyncio.run(screenshot(report, out))
    print(f"{out} ({out.stat().st_size // 1024} KiB) from run {report.get('run_id')}")


if __name__ == "__main__":
    main()
