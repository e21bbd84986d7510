"""A case reaches a jit function when a kernel it launches calls it, wherever that
kernel was defined or generated: a library whose pointwise kernels are written to a
cache module at run time (calling the op module's ``@triton.jit`` function) has that
module's mutants judged by the cases that run through them."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from mutant_gate.engine.harness.project import launch_reaches, reaches_of
from mutant_gate.engine.project import jit_callers, record_reaches

from .conftest import run_cli

FIXTURE = Path(__file__).parent / "data" / "generated_lib"

OPS = textwrap.dedent(
    """
    import triton
    import triton.language as tl


    @triton.jit
    def inner(x):
        return x * 2.0


    @triton.jit
    def helper(x):
        return inner(x) + tl.sum(x, axis=0)


    @triton.jit
    def activation(x):
        return tl.where(x > 0, x, 0.0)


    @triton.jit
    def unused(x):
        return x
    """
)

GENERATED = textwrap.dedent(
    """
    import triton
    import triton.language as tl

    import {ops} as ops_module
    from {ops} import helper as _scalar


    @triton.jit
    def gen_kernel_rank_1(x_ptr, n, ACT: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        y = ACT(_scalar(x))
        tl.store(x_ptr + offs, ops_module.activation(y), mask=offs < n)
    """
)


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def generated(tmp_path):
    """An op module and a kernel generated into another directory that calls it."""
    (tmp_path / "mg_gen_ops.py").write_text(OPS)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "mg_gen_cache.py").write_text(GENERATED.format(ops="mg_gen_ops"))
    ops = load("mg_gen_ops", tmp_path / "mg_gen_ops.py")
    gen = load("mg_gen_cache", cache / "mg_gen_cache.py")
    yield ops, gen
    for name in ("mg_gen_ops", "mg_gen_cache"):
        sys.modules.pop(name, None)


def test_a_generated_kernel_reaches_the_op_modules_functions_transitively(generated):
    ops, gen = generated
    found = reaches_of(gen.gen_kernel_rank_1)
    # through an imported name, a module attribute, and a helper's own call; Triton's own
    # functions (tl.sum) are left out, and so is what the kernel never names
    assert found == {
        "mg_gen_cache:gen_kernel_rank_1",
        "mg_gen_ops:helper",
        "mg_gen_ops:inner",
        "mg_gen_ops:activation",
    }
    assert reaches_of(ops.inner) == {"mg_gen_ops:inner"}


def test_a_jit_function_passed_to_the_launch_is_reached(generated):
    ops, gen = generated
    found = launch_reaches(gen.gen_kernel_rank_1, (object(), 4), {"ACT": ops.unused})
    assert "mg_gen_ops:unused" in found
    assert "mg_gen_ops:unused" not in reaches_of(gen.gen_kernel_rank_1)


INJECTED = textwrap.dedent(
    """
    import triton
    import triton.language as tl


    @triton.jit
    def gen_kernel_rank_1(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(x_ptr + offs, _scalar(x), mask=offs < n)
    """
)


def test_a_callee_put_into_the_generated_modules_globals_is_reached(generated, tmp_path):
    """As a large library does it: the generated module names the scalar function, which
    is put into its globals (with the op module's) once it is imported. A kernel that
    library launches again from its compiled form (``compiled[grid](...)``) is recorded
    from the jit function it was compiled from."""
    import triton
    from triton.runtime.jit import JITFunction

    from mutant_gate.engine.harness import project

    ops, _ = generated
    (tmp_path / "cache" / "mg_gen_injected.py").write_text(INJECTED)
    gen = load("mg_gen_injected", tmp_path / "cache" / "mg_gen_injected.py")
    gen.__dict__.update(ops.__dict__)  # the op module's globals, its __name__ too
    gen.__dict__["_scalar"] = ops.inner
    try:
        assert reaches_of(gen.gen_kernel_rank_1) == {
            "mg_gen_injected:gen_kernel_rank_1",
            "mg_gen_ops:inner",
        }
        if not isinstance(gen.gen_kernel_rank_1, JITFunction):
            return  # the interpreter compiles nothing
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        signature = {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
        source = ASTSource(gen.gen_kernel_rank_1, signature, {(2,): 16})
        compiled = triton.compile(source, GPUTarget("cuda", 80, 32))
        project.record_launches()
        try:
            compiled[(1,)]
        except Exception:  # noqa: BLE001 - no GPU here: the record comes before the launch
            pass
        assert "mg_gen_ops:inner" in project.reached()
        assert "gen_kernel_rank_1" in project.launched()
    finally:
        sys.modules.pop("mg_gen_injected", None)


def test_a_record_reaches_a_function_by_its_module_and_name():
    names = {"shifted_relu_func"}
    new = {
        "functions": ["shifted_relu_func_kernel_rank_1"],
        "reaches": ["cache_mod:shifted_relu_func_kernel_rank_1", "genlib.ops.a:shifted_relu_func"],
    }
    assert record_reaches(new, "genlib.ops.a", names)
    assert not record_reaches(new, "genlib.ops.b", names)  # the same name in another module
    assert record_reaches(new, None, names)  # a kernel file's own run: any module
    assert not record_reaches({**new, "left_out": "failed"}, "genlib.ops.a", names)


def test_a_record_without_reaches_matches_by_the_launched_kernels_name_as_before():
    source = FIXTURE.joinpath("src/genlib/ops/shifted_relu.py").read_text()
    names = jit_callers(source, "shifted_relu_func")
    old = {"functions": ["shifted_relu_func_kernel_rank_1"]}
    assert not record_reaches(old, "genlib.ops.shifted_relu", names)
    assert record_reaches({"functions": ["shifted_relu_func"]}, "genlib.ops.shifted_relu", names)


@pytest.mark.slow
def test_the_library_run_judges_a_module_whose_kernels_are_generated(tmp_path):
    """genlib's op module holds only the scalar jit function; its kernel is written to a
    cache module and imported at run time. The run selects the cases that launch that
    kernel for the module's mutants and kills some of them: none is "not reached"."""
    root = tmp_path / "genlib"
    shutil.copytree(FIXTURE, root)
    proc = run_cli(
        "run",
        "src/genlib/ops/shifted_relu.py",
        "--tests",
        "tests/test_shifted_relu.py",
        "--writer",
        "none",
        "--no-cache",
        "--json",
        "r.json",
        cwd=root,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((root / "r.json").read_text())
    verdicts = [m["verdict"] for m in report["mutants"]]
    assert verdicts.count("killed") >= 3, verdicts
    assert all(m.get("reached") is not False for m in report["mutants"])
    assert sorted(report["judged_by"]["shifted_relu_func"]) == [
        "tests/test_shifted_relu.py::test_shifted_relu[300]",
        "tests/test_shifted_relu.py::test_shifted_relu[7]",
    ]
