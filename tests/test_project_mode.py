"""A kernel module inside a package, judged by the project's own pytest suite."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mutant_gate.engine.project import jit_callers, module_path

from .conftest import EXAMPLES, run_cli

LIB = EXAMPLES / "kernel_lib"
MODULE = LIB / "src" / "kernel_lib" / "ops" / "rms_norm.py"


def test_module_path_follows_the_package():
    assert module_path(str(MODULE)) == (str(LIB / "src"), "kernel_lib.ops.rms_norm")
    assert module_path(str(EXAMPLES / "vector_add.py")) is None


def test_a_folder_without_init_inside_a_package_is_a_namespace_portion_of_it(tmp_path):
    """``pkg/ops/experimental/k.py`` with no ``experimental/__init__.py`` imports as
    ``pkg.ops.experimental.k`` (PEP 420), as a real library's experimental kernels do; a
    folder of loose files outside any package stays outside."""
    experimental = tmp_path / "src" / "pkg" / "ops" / "experimental"
    experimental.mkdir(parents=True)
    for package in (tmp_path / "src" / "pkg", tmp_path / "src" / "pkg" / "ops"):
        (package / "__init__.py").write_text("")
    (experimental / "k.py").write_text("x = 1\n")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "k.py").write_text("x = 1\n")
    located = module_path(str(experimental / "k.py"))
    assert located == (str(tmp_path / "src"), "pkg.ops.experimental.k")
    probe = "import importlib, sys; sys.path.insert(0, sys.argv[1]); importlib.import_module(sys.argv[2])"
    done = subprocess.run([sys.executable, "-c", probe, *located], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr  # Python imports it by that name
    assert module_path(str(tmp_path / "scripts" / "k.py")) is None


def test_helpers_are_reached_through_their_callers():
    source = MODULE.read_text()
    assert jit_callers(source, "_mean_square") == {"_mean_square", "rms_norm_kernel"}
    assert jit_callers(source, "rms_norm_kernel") == {"rms_norm_kernel"}
    # The call graph is kept per source: another source gives its own answer.
    extra = source + "\n\ndef outer_kernel(x):\n    rms_norm_kernel(x)\n"
    assert jit_callers(extra, "_mean_square") == {"_mean_square", "rms_norm_kernel", "outer_kernel"}
    assert jit_callers(source, "_mean_square") == {"_mean_square", "rms_norm_kernel"}


@pytest.mark.slow
def test_a_test_file_whose_cases_launch_no_kernel_of_the_module_is_bad_input(tmp_path):
    """Judged by the original's run: test_scale.py's cases launch the scale kernel,
    never rms_norm's, so they can never kill an rms_norm mutant."""
    root = copy_lib(tmp_path)
    proc = run_cli(
        "run",
        "src/kernel_lib/ops/rms_norm.py",
        "--tests",
        "tests/test_scale.py",
        "--writer",
        "none",
        "--no-cache",
        cwd=root,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "launches a kernel of kernel_lib.ops.rms_norm" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_a_test_importing_the_kernel_through_re_exports_is_accepted(tmp_path):
    """``from kernel_lib.ops import rms_norm_op`` (a package re-export) reaches the
    mutant at its import path: the test runs and kills, with no direct import line."""
    root = copy_lib(tmp_path)
    init = root / "src" / "kernel_lib" / "ops" / "__init__.py"
    init.write_text(init.read_text() + "from .rms_norm import rms_norm as rms_norm_op\n")
    test = root / "tests" / "test_reexport.py"
    source = (root / "tests" / "test_rms_norm.py").read_text()
    reexport = "from kernel_lib.ops import rms_norm_op as rms_norm"
    test.write_text(source.replace("from kernel_lib.ops.rms_norm import rms_norm", reexport))
    assert "kernel_lib.ops.rms_norm" not in test.read_text()
    proc = run_cli(
        "run",
        "src/kernel_lib/ops/rms_norm.py",
        "--tests",
        "tests/test_reexport.py",
        "--writer",
        "none",
        "--operators",
        "mask-drop",
        "--no-cache",
        "--json",
        "r.json",
        cwd=root,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads((root / "r.json").read_text())["mutants"]
    assert rows and any(r["verdict"] == "killed" for r in rows), rows


def copy_lib(tmp_path: Path) -> Path:
    root = tmp_path / "kernel_lib"
    shutil.copytree(LIB, root)
    return root


@pytest.mark.slow
def test_selection_runs_fewer_cases_with_the_same_verdicts(tmp_path):
    root = copy_lib(tmp_path)
    base = [
        "run",
        "src/kernel_lib/ops/rms_norm.py",
        "--tests",
        "tests/test_rms_norm.py",
        "--writer",
        "none",
        "--operators",
        "masks,arith",
        "--no-cache",
        "-v",  # the selection's line
    ]
    selected = run_cli(*base, "--json", str(tmp_path / "sel.json"), cwd=root)
    assert selected.returncode == 0, selected.stderr
    full = run_cli(*base, "--no-select", "--json", str(tmp_path / "full.json"), cwd=root)
    assert full.returncode == 0, full.stderr
    a = json.loads((tmp_path / "sel.json").read_text())
    b = json.loads((tmp_path / "full.json").read_text())
    selection = a["selection"]
    suite = selection["suite_cases"]
    assert suite == 5  # 4 parametrised cases + the registry test, counted per case
    print(
        f"cases run: selected {selection['cases_run']}, full suite {suite * selection['mutants']}"
    )
    assert selection["cases_run"] < suite * selection["mutants"]
    said = " ".join(selected.stdout.split())
    assert f"test selection: {selection['cases_run']} test cases for {selection['mutants']}" in said
    assert f"the full suite: {suite} per mutant ({suite * selection['mutants']} in all)" in said

    # Same verdicts; the first failing case may differ (selection runs the fastest first).
    def kinds(report):
        return {m["id"]: (m["verdict"], (m["by"] or "").split(":")[0]) for m in report["mutants"]}

    assert kinds(a) == kinds(b)
    helper = [m for m in a["mutants"] if m["function"] == "_mean_square"]
    assert helper and all(m["tests_selected"] == 4 for m in helper)  # reached through its caller


@pytest.mark.slow
def test_failing_project_test_is_named(tmp_path):
    root = copy_lib(tmp_path)
    test = root / "tests" / "test_rms_norm.py"
    test.write_text(test.read_text().replace('{"rms_norm", "scale"}', '{"rms_norm"}'))
    proc = run_cli(
        "run",
        "src/kernel_lib/ops/rms_norm.py",
        "--tests",
        "tests/test_rms_norm.py",
        "--writer",
        "none",
        cwd=root,
    )
    # the case the original fails is left out, named with its reason; the run goes on
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = " ".join(proc.stdout.split())
    assert "1 test case left out: 1 failed on the original" in said, said
    assert "tests/test_rms_norm.py::test_registry_has_both_ops" in said
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_module_that_cannot_be_imported(tmp_path):
    root = copy_lib(tmp_path)
    module = root / "src" / "kernel_lib" / "ops" / "rms_norm.py"
    module.write_text("import no_such_dependency\n" + module.read_text())
    proc = run_cli(
        "run",
        "src/kernel_lib/ops/rms_norm.py",
        "--tests",
        "tests/test_rms_norm.py",
        "--writer",
        "none",
        cwd=root,
    )
    assert proc.returncode == 2, proc.stderr
    assert "cannot import kernel_lib.ops.rms_norm" in proc.stderr
    assert "no_such_dependency" in proc.stderr


@pytest.mark.slow
def test_the_baseline_reports_each_case_as_it_finishes(tmp_path, sandbox):
    """A project's suite can take minutes: its cases stream from the sandbox while the
    original runs, before the baseline is done, and add up to what it ran."""
    from mutant_gate.engine import events
    from mutant_gate.engine.pipeline import Run
    from mutant_gate.engine.settings import RunSettings, WriterSettings

    root = copy_lib(tmp_path)
    settings = RunSettings(
        kernel_path=str(root / "src/kernel_lib/ops/rms_norm.py"),
        tests=(str(root / "tests/test_rms_norm.py"),),
        operators="mask-drop",
        use_cache=False,
        writers=WriterSettings(writer="none"),
    )
    seen = []
    for event in Run(settings, sandbox, None).events():
        seen.append(event)
        if isinstance(event, events.BaselineFinished):
            break
    progress = [e for e in seen if isinstance(e, events.BaselineProgress)]
    finished = next(e for e in seen if isinstance(e, events.BaselineFinished))
    collected = [e for e in progress if not e.case]
    cases = [e for e in progress if e.case]
    assert collected and collected[0].total == len(cases) > 1, progress
    assert [e.done for e in cases] == list(range(1, len(cases) + 1))
    assert {e.status for e in cases} == {"passed"}
    assert all("test_rms_norm.py::" in e.case for e in cases)
    assert seen.index(cases[-1]) < seen.index(finished)
    ran = {o.name.split("::", 1)[1] for o in finished.result.outcomes if "::" in o.name}
    assert {e.case.split("::", 1)[1] for e in cases} == ran


def test_pytest_selection_is_part_of_every_job_of_the_given_tests():
    """-k / -m ride on the given test files' checks (so on every job's cache key); node
    ids given as FILE::CASE select cases of that file, a whole file wins over them."""
    from dataclasses import replace

    from mutant_gate.engine.job import Job
    from mutant_gate.engine.kernel_file import EXTRA_TESTS, load_kernel_file
    from mutant_gate.engine.settings import RunSettings
    from mutant_gate.engine.stage import with_pytest_selection

    test = str(LIB / "tests" / "test_rms_norm.py")
    kernel = load_kernel_file(str(MODULE), [f"{test}::test_a", f"{test}::test_b[1]"])
    assert [c.select for c in kernel.checks] == [("test_a", "test_b[1]")]
    whole = load_kernel_file(str(MODULE), [f"{test}::test_a", test])
    assert [c.select for c in whole.checks] == [()]

    settings = RunSettings(kernel_path=str(MODULE), tests=(test,), keyword="not large")
    chosen = with_pytest_selection(whole, whole.checks, settings)
    assert [(c.name, c.keyword, c.marker) for c in chosen] == [(EXTRA_TESTS, "not large", "")]
    plain = Job(files=whole.files(), checks=whole.checks)
    toolchain = {"torch": "t", "triton": "t"}
    assert replace(plain, checks=chosen).cache_key(toolchain) != plain.cache_key(toolchain)
    marked = with_pytest_selection(whole, whole.checks, replace(settings, marker="not gpu"))
    assert replace(plain, checks=marked).cache_key(toolchain) != replace(
        plain, checks=chosen
    ).cache_key(toolchain)
    # nothing asked: the checks (and every cache key) stay as they were
    assert with_pytest_selection(whole, whole.checks, replace(settings, keyword=None)) == (
        whole.checks
    )


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["-k", "shape0 and ("], "-k 'shape0 and (': not a pytest expression"),
        (["-m", "gpu or"], "-m 'gpu or': not a pytest expression"),
    ],
)
def test_a_bad_selection_expression_is_one_line(tmp_path, flags, said):
    proc = run_cli(
        "run", str(MODULE), "--tests", str(LIB / "tests" / "test_rms_norm.py"), *flags,
        "--writer", "none", "--cache-dir", str(tmp_path / "c"),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_selection_without_test_files_is_bad_input(tmp_path):
    proc = run_cli("run", str(MODULE), "-k", "fast", "--cache-dir", str(tmp_path / "c"))
    assert proc.returncode == 2 and "-k selects cases of the --tests files" in proc.stderr


@pytest.mark.slow
def test_k_leaves_a_case_out_of_the_original_and_of_every_mutant(tmp_path):
    """shape0 is (4, 64), a whole block: a dropped mask changes nothing there, while the
    (3, 100) cases kill every mask-drop mutant (the next test). With -k leaving them out,
    and --no-select so each mutant's job runs its test file whole, nothing is killed:
    the original never ran them and neither did any mutant."""
    root = copy_lib(tmp_path)
    proc = run_cli(
        "run", "src/kernel_lib/ops/rms_norm.py", "--tests", "tests/test_rms_norm.py",
        "-k", "shape0 and not registry", "--no-select", "--operators", "mask-drop",
        "--writer", "none", "--no-cache", "-j", "2",
        "--json", "r.json", "--markdown", "r.md", "-v",  # -v: the slowest cases' line
        cwd=root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((root / "r.json").read_text())
    ran = [c["case"] for c in report["baseline"]["cases"]]
    assert sorted(ran) == [
        "tests/test_rms_norm.py::test_rms_norm[dtype0-shape0]",
        "tests/test_rms_norm.py::test_rms_norm[dtype1-shape0]",
    ]
    durations = [c["duration_s"] for c in report["baseline"]["cases"]]
    assert durations == sorted(durations, reverse=True) and all(d > 0 for d in durations)
    rows = report["mutants"]
    assert len(rows) == 3 and {r["verdict"] for r in rows} == {"survived"}, rows
    status = {t["name"]: t["status"] for t in report["tests"]}
    assert status["test::test_registry_has_both_ops"] == "deselected"
    # the report says which cases judged each kernel, in JSON and in markdown
    assert report["judged_by"] == {"rms_norm_kernel": ran}
    markdown = (root / "r.md").read_text()
    assert "### Test cases per kernel" in markdown
    assert f"- `rms_norm_kernel`: 2 cases: `{ran[0]}`, `{ran[1]}`" in markdown
    said = " ".join(proc.stdout.split())
    assert f"the original's 2 test cases, slowest: {ran[0]}" in said
    bound = report["bound"]
    assert bound["workers"] == 2 and bound["wall_s"] > 0
    assert bound["bound_s"] == pytest.approx(
        bound["original_s"] + sum(r["duration_s"] for r in rows) / 2, abs=0.02
    )
    assert f"over 2 workers = {bound['bound_s']:.1f} s; took {bound['wall_s']:.1f} s" in said


@pytest.mark.slow
def test_a_node_id_runs_that_case_alone(tmp_path):
    root = copy_lib(tmp_path)
    case = "tests/test_rms_norm.py::test_rms_norm[dtype0-shape1]"
    proc = run_cli(
        "run", "src/kernel_lib/ops/rms_norm.py", "--tests", case, "--operators", "mask-drop",
        "--writer", "none", "--no-cache", "-j", "2", "--json", "r.json",
        cwd=root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((root / "r.json").read_text())
    assert [c["case"] for c in report["baseline"]["cases"]] == [case]
    assert report["judged_by"] == {"rms_norm_kernel": [case]}
    assert any(r["verdict"] == "killed" for r in report["mutants"]), report["mutants"]


@pytest.mark.slow
def test_a_node_id_pytest_cannot_find_is_named(tmp_path):
    root = copy_lib(tmp_path)
    proc = run_cli(
        "run", "src/kernel_lib/ops/rms_norm.py", "--tests", "tests/test_rms_norm.py::test_nope",
        "--writer", "none", "--no-cache",
        cwd=root,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "not found:" in proc.stderr and "test_rms_norm.py::test_nope" in proc.stderr
    assert "Traceback" not in proc.stderr


SLOW_TESTS = """
import time

import torch
from kernel_lib.ops.rms_norm import rms_norm


def test_quick(device):
    x = torch.ones(2, 8, device=device)
    assert rms_norm(x, torch.ones(8, device=device)).shape == x.shape


def test_waits(device):
    rms_norm(torch.ones(2, 8, device=device), torch.ones(8, device=device))
    time.sleep(1.5)


def test_hangs():
    time.sleep(600)
"""


@pytest.mark.slow
def test_an_original_that_times_out_names_its_slow_cases(tmp_path):
    root = copy_lib(tmp_path)
    (root / "tests" / "test_slow.py").write_text(SLOW_TESTS)
    proc = run_cli(
        "run", "src/kernel_lib/ops/rms_norm.py", "--tests", "tests/test_slow.py",
        "--writer", "none", "--timeout", "12", "--cache-dir", str(tmp_path / "c"),
        cwd=root,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    said = lines[0]
    # it sleeps: its CPU limit (12 s) never fires, the wall clock's backstop does
    assert "timed out by the wall-clock backstop (70 s, for a limit of 12 CPU s" in said
    assert "while running tests/test_slow.py::test_hangs" in said
    assert "2 of 3 test cases finished" in said
    assert "slowest: tests/test_slow.py::test_waits 1.5 s" in said
    assert "--timeout S" in said and "-k 'not test_hangs'" in said
    # the timeout is cached with its record of the cases: a second run says the same
    again = run_cli(*proc.args[3:], cwd=root)
    assert again.returncode == 2 and again.stderr.strip() == said


@pytest.mark.slow
def test_the_probe_learns_calls_through_a_module_and_writes_tests_a_maintainer_can_fold_in(
    tmp_path,
):
    """The library's tests reach ``softmax_forward`` only through ``layers.Softmax`` (an
    nn.Module over ``layers.SoftmaxFunction``, an autograd Function in another module of
    the package), on a row of 64 columns (a block multiple). The probe learns the calls
    at the Function (its module's copy made against each mutant), with the test case
    each came from, and kills what those tests let through: ``cols <= n`` on a row of
    63, ``x + max`` on logits of magnitude 100; its tests call ``SoftmaxFunction.apply``
    as the library's layer does."""
    root = copy_lib(tmp_path)
    args = ["run", "src/kernel_lib/ops/softmax.py", "--tests", "tests/test_layers.py"]
    operators = ["--operators", "compare-lt-le,add-sub", "-j", "2", "--no-cache"]
    proc = run_cli(
        *args, *operators, "--write-tests", "written", "--json", "r.json", "-v", cwd=root
    )  # -v: what the probe learned
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((root / "r.json").read_text())
    said = " ".join(proc.stdout.split())
    assert "learned 2 wrapper calls from the project's tests: SoftmaxFunction.apply((2, 64)" in said
    assert "tests/test_layers.py::test_softmax_module[2]" in said
    rows = {m["after"]: m for m in report["mutants"]}
    bound, shift = rows["cols <= n"], rows["x + tl.max(x, axis=0)"]
    for row, kind in ((bound, "size"), (shift, "magnitude")):
        assert row["verdict"] == "killed" and row["by"].startswith("test:test_SoftmaxFunction_"), (
            row
        )
        assert row["probe"]["trigger"] == kind, row["probe"]
    assert report["score"]["by_verdict"] == {"killed": len(report["mutants"])}
    written = sorted((root / "written").glob("*.py"))
    assert len(written) == 2, written
    for test in written:
        text = test.read_text()
        assert "from kernel_lib.layers import SoftmaxFunction" in text
        assert "    result = SoftmaxFunction.apply(x)" in text
        assert "varies the call made by tests/test_layers.py::test_softmax_module[" in " ".join(
            text.split()
        )
    # the written tests pass the original under plain pytest, from the project's root
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(root / "src")}
    plain = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "written"]
    done = subprocess.run(plain, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    # ... and fail the x + max mutant
    module = root / "src" / "kernel_lib" / "ops" / "softmax.py"
    module.write_text(module.read_text().replace("x - tl.max(x, axis=0)", "x + tl.max(x, axis=0)"))
    done = subprocess.run(plain, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr


@pytest.mark.slow
def test_the_probe_calls_an_autograd_function_of_the_module_as_the_library_does(tmp_path):
    """A library's op module often holds its autograd Function beside the kernels (and
    its forward may call private helpers only): the probe wraps the Function's ``apply``,
    learns ``SoftmaxFunction.apply(x)`` through the Module that calls it, and its written
    tests call ``SoftmaxFunction.apply`` as the library's own layers do."""
    root = copy_lib(tmp_path)
    ops = root / "src" / "kernel_lib" / "ops" / "softmax.py"
    layers = root / "src" / "kernel_lib" / "layers.py"
    text = layers.read_text()
    function = text[text.index("class SoftmaxFunction") : text.index("class Softmax(nn.Module)")]
    ops.write_text(ops.read_text() + "\n\n" + function.rstrip() + "\n")
    layers.write_text(
        text.replace(function, "").replace("import softmax_forward", "import SoftmaxFunction")
    )
    args = ["run", "src/kernel_lib/ops/softmax.py", "--tests", "tests/test_layers.py"]
    flags = ["--operators", "compare-lt-le,add-sub", "-j", "2", "--no-cache", "--json", "r.json"]
    proc = run_cli(*args, *flags, "--write-tests", "written", "-v", cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = " ".join(proc.stdout.split())
    assert "from the project's tests: SoftmaxFunction.apply((2, 64)" in said, said
    report = json.loads((root / "r.json").read_text())
    assert report["score"]["by_verdict"] == {"killed": len(report["mutants"])}
    probed = [m for m in report["mutants"] if m.get("probe", {}).get("trigger")]
    assert {m["probe"]["trigger"] for m in probed} == {"size", "magnitude"}, probed
    for test in (root / "written").glob("*.py"):
        text = test.read_text()
        assert "from kernel_lib.ops.softmax import SoftmaxFunction" in text
        assert "    result = SoftmaxFunction.apply(x)" in text


RELU_MODULE = '''"""ReLU with a kernel each way, behind an autograd Function."""

import torch
import triton
import triton.language as tl


@triton.jit
def relu_forward_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


@triton.jit
def relu_backward_kernel(x_ptr, dy_ptr, dx_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    dy = tl.load(dy_ptr + offs, mask=mask)
    tl.store(dx_ptr + offs, tl.where(x > 0, dy, 0.0), mask=mask)


def _launch(kernel, n, *args):
    kernel[(triton.cdiv(n, 64),)](*args, n, BLOCK=64)


class ReluFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.empty_like(x)
        _launch(relu_forward_kernel, x.numel(), x, y)
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        dx = torch.empty_like(x)
        _launch(relu_backward_kernel, x.numel(), x, dy.contiguous(), dx)
        return dx
'''

RELU_TESTS = """import torch
from kernel_lib.ops.relu import ReluFunction


def test_relu_forward_and_backward(device):
    x = torch.randn(4, 64, device=device, requires_grad=True)
    y = ReluFunction.apply(x)
    torch.testing.assert_close(y, torch.relu(x))
    y.sum().backward()
    torch.testing.assert_close(x.grad, (x > 0).float())
"""


@pytest.mark.slow
def test_the_probe_reaches_a_functions_backward_kernel_through_its_gradients(tmp_path):
    """The Function's backward launches a kernel only when a test calls ``.backward()``:
    the probe follows it, so a mutant of the backward kernel (its mask bound, which the
    test's 256 elements, a block multiple, never reach) is probed with the call and its
    gradients, and dies on 255 elements."""
    root = copy_lib(tmp_path)
    (root / "src" / "kernel_lib" / "ops" / "relu.py").write_text(RELU_MODULE)
    (root / "tests" / "test_relu.py").write_text(RELU_TESTS)
    args = ["run", "src/kernel_lib/ops/relu.py", "--tests", "tests/test_relu.py"]
    flags = ["--operators", "compare-lt-le", "-j", "2", "--no-cache", "--json", "r.json"]
    proc = run_cli(*args, *flags, "--write-tests", "written", "-v", cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((root / "r.json").read_text())
    (backward,) = [m for m in report["mutants"] if m["function"] == "relu_backward_kernel"]
    assert backward["verdict"] == "killed" and backward["by"].startswith("test:"), backward
    assert backward["probe"]["trigger"] in ("size", "npot", "small"), backward["probe"]
    sources = [t["source"] for t in report["tests"] if t["origin"] == "probe"]
    assert any("result = _mg_grad(ReluFunction.apply, x)" in s for s in sources), sources


#: a project test that launches the kernel itself: no public function of the module is on
#: its path (256 elements in one block of 256: the mask's bound never matters there)
DIRECT_TESTS = """import torch
from kernel_lib.ops.scale import scale, scale_kernel


def test_scale_function(device):
    x = torch.randn(256, device=device)
    torch.testing.assert_close(scale(x, 2.0), x * 2.0)


def test_scale_kernel_launch(device):
    torch.manual_seed(0)
    x = torch.randn(256, device=device)
    out = torch.empty_like(x)
    scale_kernel[(1,)](x, out, 2.0, 256, BLOCK=256)
    torch.testing.assert_close(out, x * 2.0)
"""


@pytest.mark.slow
def test_the_probe_learns_a_launch_the_project_tests_make_themselves(tmp_path):
    """The project's test launches ``scale_kernel`` directly: the probe learns the launch
    (arguments, grid, constexprs, the test case), keeps its tensors and grid, runs it
    with ``n`` one short of their extent, and kills ``offs <= n``; the written test
    launches the kernel as the project's test does and says which case it varies."""
    root = copy_lib(tmp_path)
    (root / "tests" / "test_scale_kernel.py").write_text(DIRECT_TESTS)
    args = ["run", "src/kernel_lib/ops/scale.py", "--tests", "tests/test_scale_kernel.py"]
    flags = ["--operators", "compare-lt-le", "-j", "2", "--no-cache", "--json", "r.json"]
    # -k leaves the case through scale() out: of the run, and of what the probe learns from
    proc = run_cli(*args, *flags, "-k", "launch", "--write-tests", "written", "-v", cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = " ".join(proc.stdout.split())
    assert "learned 1 wrapper calls (1 of them kernel launches" in said, said
    assert "scale_kernel[(1,)]((256,) float32, (256,) float32, 2.0, 256, 256)" in said, said
    report = json.loads((root / "r.json").read_text())
    (row,) = report["mutants"]
    assert row["verdict"] == "killed" and row["probe"]["trigger"] == "size", row
    (test,) = (root / "written").glob("*.py")
    text = test.read_text()
    assert "from kernel_lib.ops.scale import scale_kernel" in text
    assert "    scale_kernel[(1,)](x_ptr, out_ptr, 2.0, 255, BLOCK=256)" in text
    assert "tests/test_scale_kernel.py::test_scale_kernel_launch" in " ".join(text.split())


@pytest.mark.slow
def test_the_big_index_check_replays_the_project_tests_launches(tmp_path):
    """A row offset made 64-bit (``tl.program_id(0).to(tl.int64)``): the mutants that
    drop or narrow the cast pass the library's small tests; the big-index check replays
    the launch those tests made past 2^31 elements and sees their offsets wrap."""
    root = copy_lib(tmp_path)
    module = root / "src" / "kernel_lib" / "ops" / "rms_norm.py"
    text = module.read_text()
    assert "    row = tl.program_id(0)\n" in text
    module.write_text(
        text.replace("    row = tl.program_id(0)\n", "    row = tl.program_id(0).to(tl.int64)\n")
    )
    args = ["run", "src/kernel_lib/ops/rms_norm.py", "--tests", "tests/test_rms_norm.py"]
    flags = ["--operators", "int64-cast-drop,int-narrow", "-j", "2", "--no-cache"]
    proc = run_cli(*args, *flags, "--json", "r.json", cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((root / "r.json").read_text())
    assert {m["operator"] for m in report["mutants"]} == {"int64-cast-drop", "int-narrow"}
    for m in report["mutants"]:
        assert m["verdict"] == "killed" and m["by"] == "big-index", m
        assert "an offset that wraps past 2^31 elements" in m["reason"], m["reason"]
