"""What slow written tests cost a run, before and after pricing them, side by side.

Run: ``python benchmarks/slow_tests.py [-j N]`` on ``examples/softmax.py``.
The model is the loopback fake server of the tests (``tests/fake_openai.py``), scripted:
its first stage-1 reply is two slow tests (a large batch, and a loop over ten row
widths); asked again with a measured time and a budget, it answers with the same two
tests shrunk. The file runs twice with ``--writer llm``, each with a fresh cache:

- before: ``--test-budget-factor 0 --no-select``: no time budget (the slow tests are
  accepted as they are), every mutant runs every test, the limit from the original's
  time with all of them (how runs went before);
- after: the defaults: the slow tests go back to the model with their times, each
  mutant runs only the tests that launch its kernel, fastest first, to the first kill,
  under a limit from those tests' times.

Prints, per run: the original's time with the accepted tests, the per-mutant limit
(after: the largest and the median of the mutants' own), the run's wall time, the
accepted stage-1 tests and the refused attempts, the verdicts; then the ratios, and
every mutant whose verdict differs between the two runs. The softmax file has one
kernel, so every test launches it: what the selection saves here is the runs after a
kill; `tests/test_test_budget.py` shows a test spared on another kernel's mutants.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fake_openai import FakeOpenAI, Reply, python_reply  # noqa: E402

SLOW = """
import torch

from softmax import softmax


def test_large_batch():
    torch.manual_seed(0)
    x = torch.randn(1024, 781)
    torch.testing.assert_close(softmax(x), torch.softmax(x, dim=1))


def test_many_row_widths():
    torch.manual_seed(1)
    for n_cols in range(97, 2000, 200):
        x = torch.randn(150, n_cols)
        torch.testing.assert_close(softmax(x), torch.softmax(x, dim=1))
"""

SHRUNK = """
import torch

from softmax import softmax


def test_large_batch():
    torch.manual_seed(0)
    x = torch.randn(40, 781)
    torch.testing.assert_close(softmax(x), torch.softmax(x, dim=1))


def test_many_row_widths():
    torch.manual_seed(1)
    for n_cols in (97, 128, 255, 1000):
        x = torch.randn(19, n_cols)
        torch.testing.assert_close(softmax(x), torch.softmax(x, dim=1))
"""


def answer(body: dict) -> Reply:
    """The slow tests first; the shrunk ones once told they are too slow."""
    last = body["messages"][-1]["content"]
    return python_reply(SHRUNK if "too slow" in last else SLOW)


def run(kernel: Path, workdir: Path, base_url: str, workers: int, flags: list[str]) -> dict:
    argv = [
        sys.executable, "-m", "mutant_gate.cli", "run", str(kernel), "--writer", "llm",
        "--probes", "4", "-j", str(workers), "--base-url", base_url, "--json", "r.json",
        "--cache-dir", "cache", "-q", *flags,
    ]  # fmt: skip
    env = {**os.environ, "NEBIUS_API_KEY": "sk-benchmark", "OPENAI_API_KEY": ""}
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"run failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    report = json.loads((workdir / "r.json").read_text())
    rows = report["mutants"]
    own = [r.get("timeout_s") for r in rows if r.get("timeout_s") is not None]
    stage1 = report.get("stage1") or {}
    accepted = stage1.get("accepted") or {}
    return {
        "original_s": report["baseline"]["duration_s"],
        "limit_all_s": report["sandbox"]["mutant_timeout_s"],
        "limit_max_s": max(own) if own else report["sandbox"]["mutant_timeout_s"],
        "limit_median_s": statistics.median(own) if own else report["sandbox"]["mutant_timeout_s"],
        "wall_s": wall,
        "accepted": accepted.get("tests", []),
        "accepted_s": accepted.get("duration_s"),
        "refused": [a["why"] for a in stage1.get("attempts", [])],
        "verdicts": dict(Counter(r["verdict"] for r in rows)),
        "rows": {r["id"]: r for r in rows},
        "mutant_job_s": sum(r.get("duration_s") or 0.0 for r in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-j", type=int, default=2, help="sandbox workers (default 2)")
    args = parser.parse_args()
    kernel = ROOT / "examples" / "softmax.py"
    modes = {"before": ["--test-budget-factor", "0", "--no-select"], "after": []}
    results = {}
    with FakeOpenAI(answer) as fake, tempfile.TemporaryDirectory() as tmp:
        for name, flags in modes.items():
            workdir = Path(tmp) / name
            workdir.mkdir()
            results[name] = run(kernel, workdir, fake.base_url, args.j, flags)
    before, after = results["before"], results["after"]
    print(f"{kernel.name}, --writer llm, {args.j} workers, the model's first tests slow")
    print(f"{'':28}{'before':>12}{'after':>12}{'ratio':>8}")
    for label, key in (
        ("original with its tests (s)", "original_s"),
        ("mutant limit, largest (s)", "limit_max_s"),
        ("mutant limit, median (s)", "limit_median_s"),
        ("mutants' job time, sum (s)", "mutant_job_s"),
        ("run wall time (s)", "wall_s"),
    ):
        b, a = before[key], after[key]
        print(f"{label:28}{b:12.2f}{a:12.2f}{b / a if a else float('nan'):8.1f}")
    for name, r in results.items():
        took = f" ({r['accepted_s']:.2f} s on the original)" if r["accepted_s"] else ""
        print(f"{name}: accepted {', '.join(r['accepted']) or 'nothing'}{took}")
        for why in r["refused"]:
            print(f"  refused: {why}")
        print(f"  verdicts: {r['verdicts']}")
    for mid, b in before["rows"].items():
        a = after["rows"].get(mid, {})
        if (a.get("verdict"), a.get("by")) != (b["verdict"], b["by"]):
            print(
                f"differs: {mid} {b['operator']} line {b['line']} ({b['after'].strip()}): "
                f"before {b['verdict']} by {b['by']}, after {a.get('verdict')} by {a.get('by')}"
            )


if __name__ == "__main__":
    main()
