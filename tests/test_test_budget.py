"""Written tests priced right, through the real command line, the loopback model server
(tests/fake_openai.py) and the real sandbox: each mutant runs only the written tests that
launch its kernel, fastest first, under a limit from those tests' times on the original;
a test slower than its budget goes back to the model with its time, then is refused.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from .conftest import run_cli
from .fake_openai import FakeOpenAI, Reply, python_reply

TWO_KERNELS = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.store(out_ptr, tl.sum(x, axis=0))


    @triton.jit
    def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(out_ptr + offs, x * 2, mask=offs < n)


    def total(x):
        out = torch.empty(1)
        sum_kernel[(1,)](x, out, x.numel(), BLOCK=64)
        return out[0]


    def double(x):
        out = torch.empty_like(x)
        double_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
        return out


    if __name__ == "__main__":
        x = torch.randn(64)  # a block multiple: no mask matters here
        torch.testing.assert_close(total(x), x.sum())
        torch.testing.assert_close(double(x), 2 * x)
""")

# Four tests: two reach sum_kernel (the first, 40 launches, is the slower), one reaches
# double_kernel after a 1.5 s wait, one launches no kernel at all.
FOUR_TESTS = """
import time

import torch

from two_kernels import double, total


def test_total_many_sizes():
    for n in range(10, 50):
        x = torch.randn(n)
        torch.testing.assert_close(total(x), x.sum())


def test_total_odd():
    x = torch.randn(50)
    torch.testing.assert_close(total(x), x.sum())


def test_double_slow():
    end = time.process_time() + 1.5  # CPU seconds: what a limit counts
    while time.process_time() < end:
        pass
    x = torch.randn(50)
    torch.testing.assert_close(double(x), 2 * x)


def test_nothing_launched():
    assert torch.ones(3).sum() == 3
"""

SLOW_AND_FAST = """
import time

import torch

from two_kernels import total


def test_fast_odd():
    x = torch.randn(50)
    torch.testing.assert_close(total(x), x.sum())


def test_sleepy():
    time.sleep(3)
    x = torch.randn(50)
    torch.testing.assert_close(total(x), x.sum())
"""


def _env() -> dict:
    return {"NEBIUS_API_KEY": "sk-test-budget", "OPENAI_API_KEY": ""}


def _run(tmp_path, replies, *flags: str):
    (tmp_path / "two_kernels.py").write_text(TWO_KERNELS)
    with FakeOpenAI(replies) as fake:
        proc = run_cli(
            "run",
            "two_kernels.py",
            "--operators",
            "mask-drop",
            "--writer",
            "llm",
            "--probes",
            "2",
            "--base-url",
            fake.base_url,
            "--json",
            "r.json",
            *flags,
            cwd=tmp_path,
            env=_env(),
        )
        chats = fake.chats
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads((tmp_path / "r.json").read_text()), chats, proc


def test_select_tests_keeps_the_own_check_and_orders_the_cases_that_launch_the_kernel(tmp_path):
    """Fast, no sandbox: the selection a mutant's job gets from a launch record."""
    from dataclasses import replace

    from mutant_gate.engine.kernel_file import TestFile, load_kernel_file
    from mutant_gate.engine.stage import select_tests

    path = tmp_path / "two_kernels.py"
    path.write_text(TWO_KERNELS)
    kernel = load_kernel_file(str(path))
    tests = tuple(TestFile("", name, "def test_x():\n    pass\n") for name in ("a.py", "b.py"))
    kernel = replace(kernel, tests=(*tests, TestFile("", "c.py", "", origin="stage1")))
    coverage = {
        "a.py::test_slow_sum": {"functions": ["sum_kernel"], "duration_s": 2.0},
        "a.py::test_double": {"functions": ["double_kernel"], "duration_s": 0.1},
        "a.py::test_none": {"functions": [], "duration_s": 0.0},
        "b.py::test_fast_sum[1]": {"functions": ["sum_kernel"], "duration_s": 0.2},
        "b.py::test_fast_sum[0]": {"functions": ["sum_kernel", "double_kernel"], "duration_s": 0.1},
    }
    checks = select_tests(kernel, kernel.checks, coverage, "sum_kernel")
    # The own check first, then b.py (0.3 s) before a.py (2 s), each fastest case first;
    # c.py has no record: it runs whole, last.
    assert [(c.path, c.select) for c in checks] == [
        ("two_kernels.py", ()),
        ("b.py", ("test_fast_sum[0]", "test_fast_sum[1]")),
        ("a.py", ("test_slow_sum",)),
        ("c.py", ()),
    ]
    checks = select_tests(kernel, kernel.checks, coverage, "double_kernel")
    assert [(c.path, c.select) for c in checks] == [
        ("two_kernels.py", ()),
        ("a.py", ("test_double",)),
        ("b.py", ("test_fast_sum[0]",)),
        ("c.py", ()),
    ]


def test_cases_a_few_milliseconds_apart_run_in_one_order_whatever_the_load(tmp_path):
    """The case that kills a mutant must not follow the load: cases whose times on the
    original differ by noise run in one order (by node id) in either measurement, and
    whatever order the original's record lists them in (shares merged)."""
    from dataclasses import replace

    from mutant_gate.engine.kernel_file import TestFile, load_kernel_file
    from mutant_gate.engine.stage import select_tests

    path = tmp_path / "two_kernels.py"
    path.write_text(TWO_KERNELS)
    kernel = load_kernel_file(str(path))
    kernel = replace(kernel, tests=(TestFile("", "a.py", "def test_x():\n    pass\n"),))
    orders = set()
    # idle, then busy: the same cases, their milliseconds swapped by the load
    for first, second in ((0.0091, 0.0086), (0.0136, 0.0176)):
        coverage = {
            "a.py::test_sum[shape0]": {"functions": ["sum_kernel"], "duration_s": first},
            "a.py::test_sum[shape1]": {"functions": ["sum_kernel"], "duration_s": second},
            "a.py::test_sum_big": {"functions": ["sum_kernel"], "duration_s": 0.9},
        }
        for record in (coverage, dict(reversed(coverage.items()))):
            checks = select_tests(kernel, kernel.checks, record, "sum_kernel")
            orders.add(checks[-1].select)
    assert orders == {("test_sum[shape0]", "test_sum[shape1]", "test_sum_big")}


@pytest.mark.slow
def test_each_mutant_runs_the_tests_of_its_kernel_fastest_first_under_their_limit(tmp_path):
    report, _, proc = _run(tmp_path, [python_reply(FOUR_TESTS)], "--test-budget-min", "10")
    assert report["stage1"]["accepted"]["tests"] == [
        "test_total_many_sizes",
        "test_total_odd",
        "test_double_slow",
        "test_nothing_launched",
    ]
    # Each accepted test's time and launches on the original, from its proof.
    timings = report["stage1"]["accepted"]["timings"]
    assert timings["test_double_slow"]["launches"] == ["double_kernel"]
    assert timings["test_double_slow"]["duration_s"] >= 1.5
    assert timings["test_total_odd"]["launches"] == ["sum_kernel"]
    assert timings["test_nothing_launched"]["launches"] == []
    tests = {t["name"]: t for t in report["tests"]}
    assert tests["test::test_double_slow"]["original_s"] >= 1.5
    assert tests["test::test_total_many_sizes"]["launches"] == ["sum_kernel"]
    assert "s on the original" in proc.stdout

    rows = {(m["function"], m["line"]): m for m in report["mutants"]}
    on_sum = [m for (f, _), m in rows.items() if f == "sum_kernel"]
    on_double = [m for (f, _), m in rows.items() if f == "double_kernel"]
    assert len(on_sum) == 1 and len(on_double) == 2
    for m in on_sum:
        # Only the two tests that launch sum_kernel were selected; the fast one ran first
        # and killed it (stop at the first kill), so the 40-launch one never ran.
        assert m["tests_selected"] == 2
        assert m["tests_run"] == ["test_total_odd"], m
        assert m["verdict"] == "killed" and m["by"] == "bounds", m  # fired in that test
    for m in on_double:
        assert m["tests_selected"] == 1
        assert m["tests_run"] == ["test_double_slow"], m
        assert m["verdict"] == "killed" and m["by"] == "bounds", m
    assert report["selection"]["suite_cases"] == 4
    assert report["selection"]["cases_run"] == 2 + 1 + 1
    # The limit follows the selected tests: the original's CPU seconds less the cases a
    # mutant is spared (each at its CPU seconds in the original's run), times the factor,
    # plus the base.
    baseline = report["baseline"]["cpu_s"]
    assert baseline <= report["baseline"]["duration_s"] + 0.05
    case_s = {
        c["case"].split("::", 1)[1]: c["cpu_s"]
        for c in report["baseline"]["cases"]
        if "_mg_stage1.py::" in c["case"]
    }
    assert len(case_s) == 4
    assert case_s["test_double_slow"] >= 1.5
    everything = report["sandbox"]["mutant_timeout_s"]
    assert everything == pytest.approx(3 * baseline + 5, abs=0.02)
    fixed = max(baseline - sum(case_s.values()), 0.0)
    sum_limit = 3 * (fixed + case_s["test_total_many_sizes"] + case_s["test_total_odd"]) + 5
    double_limit = 3 * (fixed + case_s["test_double_slow"]) + 5
    assert on_sum[0]["timeout_s"] == pytest.approx(sum_limit, abs=0.1)
    assert all(m["timeout_s"] == pytest.approx(double_limit, abs=0.1) for m in on_double)
    # A sum_kernel mutant is spared the 1.5 CPU s of test_double_slow, times the factor.
    assert on_sum[0]["timeout_s"] <= everything - 3 * 1.5 + 0.1


@pytest.mark.slow
def test_a_slow_test_goes_back_with_its_time_and_is_refused(tmp_path):
    replies = [python_reply(SLOW_AND_FAST), python_reply(SLOW_AND_FAST)]
    report, chats, proc = _run(tmp_path, replies, "--attempts", "2")
    stage1 = report["stage1"]
    attempts = stage1["attempts"]
    assert [a["attempt"] for a in attempts] == [1, 2]
    for a in attempts:
        assert a["why"].startswith("too slow on the original: test_sleepy "), a["why"]
        assert set(a["slow"]) == {"test_sleepy"} and a["slow"]["test_sleepy"] >= 3.0
        assert "budget 2.00 s per test" in a["why"]
    # The retry the model received says what the test took and what it may take.
    retry = chats[1]["body"]["messages"][-1]["content"]
    took = attempts[0]["slow"]["test_sleepy"]
    assert f"test_sleepy {took:.2f} s on the original" in retry, retry
    assert "the budget is 2.00 s per test function" in retry
    assert "Shrink the shapes" in retry
    assert "rejected attempt 2:" in " ".join(proc.stdout.split())
    # After the last attempt the slow test is refused; the fast one, within the budget, is
    # kept on its own and proved again.
    assert stage1["accepted"]["attempt"] == 2
    assert stage1["accepted"]["tests"] == ["test_fast_odd"]
    names = {t["name"] for t in report["tests"]}
    assert "test::test_fast_odd" in names and "test::test_sleepy" not in names


SLOW_KILLER = """
import time

import torch

from two_kernels import {function}


def test_slow_{function}():
    time.sleep(3)
    x = torch.randn(50)
    torch.testing.assert_close({function}(x), {expected})
"""


SUM_LOAD = "-    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)"


@pytest.mark.slow
def test_stage2_sends_a_slow_killer_back_with_its_time(tmp_path):
    def answer(body: dict) -> Reply:
        on_sum = SUM_LOAD in body["messages"][1]["content"]  # the survivor's diff
        function, expected = ("total", "x.sum()") if on_sum else ("double", "2 * x")
        code = SLOW_KILLER.format(function=function, expected=expected)
        if "too slow" in body["messages"][-1]["content"]:
            code = code.replace("time.sleep(3)", "pass")
        return python_reply(code)

    report, chats, _ = _run(tmp_path, answer, "--writer", "none", "--stage2")
    rows = [m for m in report["mutants"] if m["function"] == "sum_kernel"]
    assert len(rows) == 1
    row = rows[0]
    # The first killer took 3 s on the original: sent back with its time, then refused.
    whys = [a["why"] for a in row["attempts"]]
    assert len(whys) == 1 and whys[0].startswith("too slow on the original: test_slow_total "), whys
    asked = [c for c in chats if SUM_LOAD in c["body"]["messages"][1]["content"]]
    assert len(asked) == 2
    assert "the budget is 2.00 s per test function" in asked[1]["body"]["messages"][-1]["content"]
    # The fast one killed it; its proof recorded its time and that it launches sum_kernel.
    assert row["verdict"] == "killed" and row["by"] in ("bounds", "test:test_slow_total"), row
    killer = next(t for t in report["tests"] if t["name"] == "test::test_slow_total")
    assert killer["kills"] == [row["id"]] and killer["launches"] == ["sum_kernel"]
    assert killer["original_s"] < 2.0
