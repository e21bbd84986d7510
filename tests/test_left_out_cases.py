"""Test cases left out of a run: the ones the original fails (project mode) and, with
``--case-time S``, the ones slower than S on the original, each named in the report with
its reason; the run goes on with the rest. And the original's timeout line, which
suggests a way to leave slow cases out that keeps others."""

from __future__ import annotations

import json

import pytest

from mutant_gate.engine.baseline import left_out_line, nice_seconds, timeout_message

from .conftest import run_cli
from .test_library_run import QUICK, copy_lib, verdicts
from .test_report_schema import validate

#: a test file beside the library's own: a parametrised case the original fails after
#: launching the rms norm (run against a mutant it would "kill" every one), its twin that
#: passes without launching anything, and a case slower than the --case-time given
EXTRA_TESTS = """
import time

import pytest
import torch
from kernel_lib.ops.rms_norm import rms_norm


@pytest.mark.parametrize("n", [8, 16])
def test_rms_wrong(n, device):
    if n == 16:
        rms_norm(torch.ones(2, n, device=device), torch.ones(n, device=device))
    assert n == 8, "only eight"


def test_rms_slow(device):
    time.sleep(3)
    x = torch.ones(2, 8, device=device)
    assert rms_norm(x, torch.ones(8, device=device)).shape == x.shape
"""

#: test_scale.py with an expectation the original never meets: every case fails
BROKEN_SCALE = """
import torch
from kernel_lib.ops.scale import scale


def test_scale(device):
    x = torch.randn(64, device=device)
    torch.testing.assert_close(scale(x, 1.5), x * 1.0)
"""


def _finished(*pairs: tuple[str, float]) -> list[dict]:
    return [{"case": c, "status": "passed", "duration_s": d} for c, d in pairs]


def test_the_timeout_line_keeps_cases_of_a_parametrised_test():
    """The case running at the limit is named with its parameters, so ``-k`` leaves out
    that one case, not every case of its test function; ``--case-time`` is chosen from
    the finished cases' times so that some stay."""
    cases = {
        "collected": 8,
        "finished": _finished(
            ("tests/t.py::test_layers[64]", 0.5),
            ("tests/t.py::test_layers[128]", 0.7),
            ("tests/t.py::test_layers[1024]", 4.0),
        ),
        "running": "tests/t.py::test_layers[4096]",
    }
    said = timeout_message("ops/x.py", 12, cases)
    assert "-k 'not test_layers[4096]'" in said
    assert "-k 'not test_layers'" not in said
    assert "--case-time 5 " in said and "keeping the 3 finished cases" in said
    assert "--timeout S" in said
    # no case running at the limit (the suite's end ran out): above the median case
    said = timeout_message("ops/x.py", 12, {**cases, "running": ""})
    assert "--case-time 1 " in said and "keeping 2 of the 3 finished cases" in said
    assert "-k" not in said


def test_the_timeout_line_never_suggests_a_selection_that_keeps_no_case():
    """A file whose one test function is its one case: no ``-k`` and no ``--case-time``
    would leave anything to run, so the line says only to give it longer."""
    said = timeout_message(
        "ops/x.py", 12, {"collected": 1, "finished": [], "running": "tests/t.py::test_one"}
    )
    assert said.endswith("give them longer with --timeout S")
    assert "-k" not in said and "--case-time" not in said
    # a case id pytest's -k cannot name is not offered either
    odd = {"collected": 4, "finished": [], "running": "tests/t.py::test_x[a b]"}
    assert "-k" not in timeout_message("ops/x.py", 12, odd)


def test_case_time_values_and_the_left_out_line():
    assert [nice_seconds(s) for s in (0.34, 1.5, 3.2, 17, 100)] == [0.5, 2, 5, 20, 100]
    records = [
        {"case": "a", "why": "failed", "reason": "failed on the original: x"},
        {"case": "b", "why": "failed", "reason": "failed on the original: y"},
        {"case": "c", "why": "case-time", "reason": "took 9.00 s on the original, over "
         "--case-time 5 s"},
    ]  # fmt: skip
    assert left_out_line(records) == (
        "3 test cases left out: 2 failed on the original, 1 over --case-time 5 s"
    )


@pytest.mark.parametrize("value", ["-1", "0", "nan"])
def test_a_bad_case_time_is_one_line(tmp_path, value):
    root = copy_lib(tmp_path)
    proc = run_cli("run", "src/kernel_lib", "--tests", "tests", "--case-time", value, *QUICK,
                   cwd=root)  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--case-time must be a positive number" in lines[0], proc.stderr


def test_case_time_comes_from_the_configuration(tmp_path):
    root = copy_lib(tmp_path)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + '\n[tool.mutant-gate]\ncase-time = "x"\n')
    proc = run_cli("run", "src/kernel_lib", "--tests", "tests", *QUICK, cwd=root)
    assert proc.returncode == 2 and "case-time: expected a number" in proc.stderr
    pyproject.write_text(pyproject.read_text().replace('case-time = "x"', "case-time = -2"))
    proc = run_cli("run", "src/kernel_lib", "--tests", "tests", *QUICK, cwd=root)
    assert proc.returncode == 2 and "--case-time must be a positive number" in proc.stderr


@pytest.mark.slow
def test_failing_and_slow_cases_are_left_out_and_the_run_goes_on(tmp_path):
    """A library whose suite has cases the original fails, one slower than --case-time and
    a test file pytest cannot collect: each is named in the report with its reason and runs for no mutant (the
    rms norm's verdicts are those of its own run with its own test file); a module every
    case of which was left out is left out, saying so, and not scored."""
    root = copy_lib(tmp_path)
    (root / "tests" / "test_extra.py").write_text(EXTRA_TESTS)
    (root / "tests" / "test_scale.py").write_text(BROKEN_SCALE)
    # a test file pytest cannot collect here (a real library's GPU-only file on a CPU)
    (root / "tests" / "test_gpu_only.py").write_text(
        "import no_such_module\n\n\ndef test_x():\n    pass\n"
    )
    alone = tmp_path / "alone.json"
    proc = run_cli(
        "run", "src/kernel_lib/ops/rms_norm.py", "--tests", "tests/test_rms_norm.py",
        *QUICK, "--json", str(alone), cwd=root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = run_cli(
        "run", "src/kernel_lib/ops/scale.py", "src/kernel_lib/ops/rms_norm.py",
        "--tests", "tests", "--case-time", "2.5", *QUICK, "--json", "lib.json", cwd=root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((root / "lib.json").read_text())
    validate(report)
    left = {r["case"]: r for r in report["left_out_cases"]}
    assert set(left) == {
        "tests/test_scale.py::test_scale",
        "tests/test_extra.py::test_rms_wrong[16]",
        "tests/test_extra.py::test_rms_slow",
        "tests/test_gpu_only.py",
    }
    assert left["tests/test_gpu_only.py"]["why"] == "collect"
    assert left["tests/test_gpu_only.py"]["reason"] == (
        "failed to collect on the original: ModuleNotFoundError: No module named 'no_such_module'"
    )
    assert left["tests/test_extra.py::test_rms_wrong[16]"]["why"] == "failed"
    assert "only eight" in left["tests/test_extra.py::test_rms_wrong[16]"]["reason"]
    assert left["tests/test_extra.py::test_rms_slow"]["why"] == "case-time"
    # stopped at 2.5 s by the original's clock, not run to its end
    said = "ran past --case-time 2.5 s on the original (stopped there)"
    assert left["tests/test_extra.py::test_rms_slow"]["reason"] == said
    files = {f["path"].rsplit("/", 1)[-1]: f for f in report["files"]}
    assert files["scale.py"]["status"] == "left_out"
    assert "every test case that reaches it was left out" in files["scale.py"]["reason"]
    assert files["rms_norm.py"]["status"] == "judged"
    mine = {r["id"]: r["verdict"] for r in report["mutants"] if r["file"].endswith("rms_norm.py")}
    assert mine == verdicts(json.loads(alone.read_text()))
    assert report["score"]["total"] == files["rms_norm.py"]["mutants"]  # scale: not scored
    said = (
        "3 test cases left out: 2 failed on the original, 1 over --case-time 2.5 s; "
        "1 test file pytest could not collect left out"
    )
    # said once for the library's suite, not again by the module that took its original
    assert " ".join(proc.stdout.split()).count(said) == 1, proc.stdout


@pytest.mark.slow
def test_a_suite_with_no_case_left_is_one_line(tmp_path):
    """Every case over --case-time: nothing is left to judge a mutant, said in one line."""
    root = copy_lib(tmp_path)
    proc = run_cli(
        "run", "src/kernel_lib/ops/scale.py", "--tests", "tests", "--case-time", "0.000001",
        *QUICK, cwd=root,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "no test case is left to judge a mutant" in lines[0]
    assert "over --case-time 1e-06 s" in lines[0]


#: a suite with a case that never ends and one slower than the --case-time given
SLOW_SUITE = """
import os
import signal
import subprocess
import sys
import tempfile
import time

import torch
from kernel_lib.ops.rms_norm import rms_norm


def test_quick(device):
    x = torch.ones(2, 8, device=device)
    assert rms_norm(x, torch.ones(8, device=device)).shape == x.shape


def test_waits(device):
    rms_norm(torch.ones(2, 8, device=device), torch.ones(8, device=device))
    time.sleep(3)


def test_hangs():
    time.sleep(600)


SPAWNED = os.path.join(tempfile.gettempdir(), "spawned.pid")


def test_spawns():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(SPAWNED, "w") as fh:
        fh.write(str(child.pid))
    time.sleep(600)


def test_spawned_is_gone():  # the stopped case's process: killed with it
    if not os.path.exists(SPAWNED):  # deselected (a rerun without the slow cases)
        return
    with open(SPAWNED) as fh:
        pid = int(fh.read())
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return
    assert state == "Z", f"the stopped case's process {pid} still runs ({state})"


def test_hangs_deaf():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # the clock cannot stop it
    time.sleep(600)
"""


def _run_slow_suite(root, suite: str, timeout: int):
    """The rms norm judged by ``suite`` as its test file, --case-time 2: (the process, its
    JSON report); the run must pass."""
    (root / "tests" / "test_slow.py").write_text(suite)
    proc = run_cli(
        "run", "src/kernel_lib/ops/rms_norm.py", "--tests", "tests/test_slow.py",
        "--operators", "mask-drop", "--timeout", str(timeout), "--case-time", "2",
        *QUICK, "--json", "r.json", cwd=root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, json.loads((root / "r.json").read_text())


@pytest.mark.slow
def test_the_originals_slow_cases_are_stopped_at_the_case_time(tmp_path):
    """With --case-time S, each case of the original is stopped once it has run S seconds:
    a case that would hang costs S, not the original's limit, and is left out as slow. A
    case the clock cannot stop (it blocks the signal) runs to the limit: the original runs
    again without it; the run goes on with the rest, each left-out case named with its
    reason."""
    root = copy_lib(tmp_path)
    proc, report = _run_slow_suite(root, SLOW_SUITE.replace("def test_hangs_deaf", "def _x"), 300)
    validate(report)
    left = {r["case"]: r for r in report["left_out_cases"]}
    for case in ("test_hangs", "test_waits", "test_spawns"):
        entry = left[f"tests/test_slow.py::{case}"]
        assert entry["why"] == "case-time", entry
        assert entry["reason"] == "ran past --case-time 2 s on the original (stopped there)"
    assert report["baseline"]["duration_s"] < 60  # not the 600 s the hanging case asks
    assert set(report["judged_by"]["rms_norm_kernel"]) == {"tests/test_slow.py::test_quick"}
    said = " ".join(proc.stdout.split())
    assert "3 test cases left out: 3 over --case-time 2 s" in said

    proc, report = _run_slow_suite(root, SLOW_SUITE, 20)
    left = {r["case"]: r for r in report["left_out_cases"]}
    assert left["tests/test_slow.py::test_hangs_deaf"]["why"] == "limit"
    assert left["tests/test_slow.py::test_hangs"]["why"] == "case-time"
    assert left["tests/test_slow.py::test_waits"]["why"] == "case-time"
    assert set(report["judged_by"]["rms_norm_kernel"]) == {"tests/test_slow.py::test_quick"}
    said = " ".join(proc.stdout.split())
    assert "4 test cases left out: 1 ran past the original's limit, 3 over --case-time 2 s" in said


#: cases that read past a tensor's end on the original (n larger than the row the buffer
#: holds), one of them catching the checker's exception
OUT_OF_BOUNDS_TESTS = """
import torch
from kernel_lib.ops.rms_norm import rms_norm_kernel


def _past_the_end():
    x, w, y = torch.randn(2, 8), torch.ones(16), torch.empty(2, 16)
    rms_norm_kernel[(2,)](x, w, y, 8, 16, 1e-6, BLOCK=16)  # row 1 reads past x's end


def test_reads_past_the_end():
    _past_the_end()


def test_reads_past_the_end_quietly():
    try:
        _past_the_end()
    except Exception:
        pass
"""


@pytest.mark.slow
def test_an_original_case_out_of_bounds_is_left_out_and_the_run_goes_on(tmp_path):
    """A case of the suite that reads out of bounds on the original (a real library's
    grpo loss backward on this CPU) is that case's failure, not the whole original's: it
    is left out, named, with the checker's words, even where the test caught the
    exception; the other cases judge the module with the verdicts they give alone."""
    root = copy_lib(tmp_path)
    alone = tmp_path / "alone.json"
    proc = run_cli(
        "run", "src/kernel_lib/ops/rms_norm.py", "--tests", "tests/test_rms_norm.py",
        *QUICK, "--json", str(alone), cwd=root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (root / "tests" / "test_out_of_bounds.py").write_text(OUT_OF_BOUNDS_TESTS)
    proc = run_cli(
        "run", "src/kernel_lib/ops/rms_norm.py", "--tests", "tests/test_rms_norm.py",
        "--tests", "tests/test_out_of_bounds.py", *QUICK, "--json", "r.json", cwd=root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((root / "r.json").read_text())
    validate(report)
    left = {r["case"]: r for r in report["left_out_cases"]}
    assert set(left) == {
        "tests/test_out_of_bounds.py::test_reads_past_the_end",
        "tests/test_out_of_bounds.py::test_reads_past_the_end_quietly",
    }
    for record in left.values():
        assert record["why"] == "failed"
        assert "out-of-bounds load in kernel rms_norm_kernel" in record["reason"], record
    mine = {r["id"]: r["verdict"] for r in report["mutants"]}
    assert mine == verdicts(json.loads(alone.read_text()))


def test_a_library_run_says_the_suites_left_out_cases_once_not_for_every_module():
    """A library's modules share one original: its left-out line comes once (a real
    library's run said the same line for each of its 54 modules), and again only where a
    module's original left out other cases."""
    from rich.console import Console

    from mutant_gate.cli.gates import left_out

    records = [{"case": "t.py::a", "reason": "failed on the original: x", "why": "failed"}]
    other = [{"case": "u.py::b", "reason": "failed on the original: y", "why": "failed"}]
    console = Console(record=True, width=200)
    said: set[str] = set()
    for report in ({"left_out_cases": records},) * 3 + ({"left_out_cases": other},):
        left_out(console, report, said)
    text = console.export_text()
    assert text.count("1 test case left out") == 2, text
    assert "(first: t.py::a," in text and "(first: u.py::b," in text
    alone = Console(record=True, width=200)
    for _ in range(2):  # a kernel file's own run: no set, every call says it
        left_out(alone, {"left_out_cases": records})
    assert alone.export_text().count("1 test case left out") == 2


def test_a_module_is_left_out_only_for_cases_that_reached_its_own_functions():
    """A backend's copy of a module defines kernels of the same names: a left-out case
    that reached the main module's kernel does not make the copy "left out"; the copy is
    not reached (a real library's 8 Ascend backend modules were said left out on a CPU)."""
    from mutant_gate.engine.library import LEFT_OUT, NOT_REACHED, _counted

    rows = [{"file": "ops/k.py", "function": "k", "verdict": "survived", "reached": False,
             "survivor": "", "id": "a"}]  # fmt: skip
    case = {"case": "t.py::a", "why": "case-time", "reason": "slow", "duration_s": 0.5,
            "functions": ["k"], "reaches": ["pkg.ops.k:k"]}  # fmt: skip
    main = {"path": "ops/k.py", "module": "pkg.ops.k", "jit_functions": ["k"]}
    copy = {"path": "ops/backend/k.py", "module": "pkg.ops.backend.k", "jit_functions": ["k"]}
    assert _counted(main, rows, frozenset(), [case])["status"] == LEFT_OUT
    assert _counted(copy, rows, frozenset(), [case])["status"] == NOT_REACHED
    older = {key: v for key, v in case.items() if key != "reaches"}  # a record kept before
    assert _counted(copy, rows, frozenset(), [older])["status"] == LEFT_OUT  # names only
