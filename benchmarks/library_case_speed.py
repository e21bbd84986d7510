"""A real library's test cases under Triton's own interpreter and under the batched executor,
case by case, side by side in one run (issue 45's first done-when).

Run: ``TRITON_INTERPRET=1 python benchmarks/library_case_speed.py ROOT TEST... [-k EXPR]
[--case-cap S] [--budget S] [--out FILE.json]``, ROOT a library's checkout (its ``src/`` put on
the path when there is one), TEST its test files or directories as pytest takes them.

One pytest process collects the cases; each case's test function is called twice in a row,
with the same fixtures: once with Triton's interpreter as it is (``batched.uninstall()``: its own
loop, one program after another) and once with the batched executor (``batched.install()``).
The harness's shims (a CPU driver, the interpreter-parity fixes: libdevice, bfloat16, scalar
floats) are on in both, as in a sandbox job: without them most real cases cannot run on a
CPU. A stock call that runs past ``--case-cap`` seconds is stopped there (its figure is then
a lower bound, marked ``>``); a test file's cases stop after ``--budget`` seconds of them. For
each case: both times, whole and inside its kernel launches (``InterpretedFunction.run``: a
case's torch reference and autograd are the same work in both), both outcomes (passed, failed
with the exception's type), and the batched launches (programs, executor, the reason of any
that ran in Triton's loop).

The summary prints the distribution of speed-ups over the cases whose largest launch has 64
or more programs, the median, and every case below 10x with its launches.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PLUGIN = r"""
import json, os, signal, time
import pytest

OUT = os.environ["MG_CASE_SPEED_OUT"]
CAP = float(os.environ["MG_CASE_SPEED_CAP"])
BUDGET = float(os.environ["MG_CASE_SPEED_BUDGET"])
SPENT = {}  # test file -> seconds its cases took


class Capped(Exception):
    pass


def _alarm(signum, frame):
    raise Capped()


def _call(fn, kwargs, cap):
    signal.signal(signal.SIGALRM, _alarm)
    if cap:
        signal.setitimer(signal.ITIMER_REAL, cap)
    start = time.perf_counter()
    try:
        fn(**kwargs)
        outcome = "passed"
    except Capped:
        outcome = "capped"
    except pytest.skip.Exception:
        outcome = "skipped"
    except BaseException as e:  # noqa: BLE001 - the outcome is the figure
        seen = e
        while seen is not None and not isinstance(seen, Capped):
            seen = seen.__cause__ or seen.__context__
        # Triton's interpreter wraps what a launch raised: the cap, inside it
        outcome = "capped" if seen is not None else f"failed: {type(e).__name__}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return time.perf_counter() - start, outcome


KERNEL_S = [0.0]  # seconds inside kernel launches (Triton's ``InterpretedFunction.run``)


def pytest_configure(config):
    from triton.runtime import interpreter

    from mutant_gate.engine.harness import shims

    shims.install()
    run = interpreter.InterpretedFunction.run

    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return run(self, *args, **kwargs)
        finally:
            KERNEL_S[0] += time.perf_counter() - start

    interpreter.InterpretedFunction.run = timed


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    from mutant_gate.engine.harness import batched

    where = str(pyfuncitem.path)
    if SPENT.get(where, 0.0) > BUDGET:
        pytest.skip("the benchmark's budget for this file is spent")
    began = time.perf_counter()
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {k: pyfuncitem.funcargs[k] for k in names}
    batched.uninstall()
    KERNEL_S[0] = 0.0
    stock_s, stock = _call(pyfuncitem.obj, kwargs, CAP)
    stock_k = KERNEL_S[0]
    batched.install("batched")
    batched.clear()
    KERNEL_S[0] = 0.0
    ours_s, ours = _call(pyfuncitem.obj, kwargs, 0)
    ours_k = KERNEL_S[0]
    launches = batched.launches()
    batched.uninstall()
    SPENT[where] = SPENT.get(where, 0.0) + time.perf_counter() - began
    with open(OUT, "a") as f:
        f.write(json.dumps({
            "case": pyfuncitem.nodeid, "stock_s": stock_s, "stock": stock,
            "batched_s": ours_s, "batched": ours,
            "stock_kernel_s": stock_k, "batched_kernel_s": ours_k,
            "launches": [{k: x.get(k) for k in ("kernel", "programs", "executor", "reason")}
                         for x in launches],
        }) + "\n")
    return True
"""


def run(root: Path, tests: list[str], k: str | None, cap: float, budget: float) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        plugin = Path(tmp) / "mg_case_speed.py"
        plugin.write_text(PLUGIN)
        out = Path(tmp) / "cases.jsonl"
        path = [tmp, str(root / "src") if (root / "src").is_dir() else str(root)]
        env = {
            **os.environ,
            "TRITON_INTERPRET": "1",
            "PYTHONPATH": os.pathsep.join(path + [os.environ.get("PYTHONPATH", "")]),
            "MG_CASE_SPEED_OUT": str(out),
            "MG_CASE_SPEED_CAP": str(cap),
            "MG_CASE_SPEED_BUDGET": str(budget),
        }
        env.pop("MUTANT_GATE_INTERPRETER", None)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "mg_case_speed", "-p",
               "no:cacheprovider", *tests]  # fmt: skip
        if k:
            cmd += ["-k", k]
        subprocess.run(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL)
        if not out.exists():
            return []
        return [json.loads(line) for line in out.read_text().splitlines()]


def summary(cases: list[dict]) -> list[str]:
    ran = [c for c in cases if c["stock"] != "skipped" and c["launches"]]
    big = [c for c in ran if max(x["programs"] or 0 for x in c["launches"]) >= 64]
    lines = [
        f"{len(cases)} cases run, {len(ran)} launched a kernel, {len(big)} with a launch of "
        "64 or more programs",
        "",
        "| case | largest launch | stock s | batched s | speed-up | in kernels: stock s | "
        "batched s | speed-up | outcomes | fell back |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    ratios, kernel_ratios = [], []
    for c in sorted(ran, key=lambda c: c["case"]):
        most = max(x["programs"] or 0 for x in c["launches"])
        ratio = c["stock_s"] / max(c["batched_s"], 1e-9)
        low = ">" if c["stock"] == "capped" else ""
        k_ratio = c["stock_kernel_s"] / max(c["batched_kernel_s"], 1e-9)
        if c in big:
            ratios.append(ratio)
            kernel_ratios.append(k_ratio)
        back = sorted({x["reason"] for x in c["launches"] if x["executor"] != "batched"})
        same = c["stock"] if c["stock"] == c["batched"] else f"{c['stock']} / {c['batched']}"
        lines.append(
            f"| {c['case']} | {most} | {low}{c['stock_s']:.2f} | {c['batched_s']:.3f} | "
            f"{low}{ratio:.1f}x | {low}{c['stock_kernel_s']:.2f} | {c['batched_kernel_s']:.3f} | "
            f"{low}{k_ratio:.1f}x | {same} | {'; '.join(back) or '-'} |"
        )
    for what, values in (("whole case", ratios), ("in kernel launches", kernel_ratios)):
        if values:
            lines += ["", f"cases with 64+ programs, {what}: {_spread(values)}"]
    return lines


def _spread(values: list[float]) -> str:
    qs = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return (
        f"{len(values)} cases; speed-up median {statistics.median(values):.1f}x, quartiles "
        f"{qs[0]:.1f}x / {qs[2]:.1f}x, min {min(values):.1f}x, max {max(values):.1f}x; "
        f"below 10x: {sum(v < 10 for v in values)}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("tests", nargs="+")
    ap.add_argument("-k", default=None)
    ap.add_argument("--case-cap", type=float, default=60.0)
    ap.add_argument("--budget", type=float, default=300.0, help="seconds a test file")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit("library_case_speed: set TRITON_INTERPRET=1")
    cases = run(args.root.resolve(), args.tests, args.k, args.case_cap, args.budget)
    if args.out:
        args.out.write_text(json.dumps(cases, indent=1) + "\n")
    print("\n".join(summary(cases)))


if __name__ == "__main__":
    main()
