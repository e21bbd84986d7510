"""Every bad input is one clear line on stderr and exit code 2, never a traceback."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

from mutant_gate.cli.main import main

from .conftest import EXAMPLES, run_cli


def assert_one_line_error(proc, *fragments: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert lines[0].startswith("mutant-gate: error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_missing_file(tmp_path):
    assert_one_line_error(
        run_cli("run", str(tmp_path / "nope.py"), cwd=tmp_path), "not found", "nope.py"
    )


def test_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path, "broken.py", "import triton\n\ndef f(:\n    pass\n")
    assert_one_line_error(
        run_cli("run", str(path), cwd=tmp_path), "broken.py:3", "not valid Python"
    )


def test_binary_file_is_not_python(tmp_path):
    path = tmp_path / "blob.py"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe")
    assert_one_line_error(run_cli("run", str(path), cwd=tmp_path), "not")


def test_directory_is_not_a_file(tmp_path):
    assert_one_line_error(run_cli("run", str(tmp_path), cwd=tmp_path), "directory")


def test_no_jit_function(tmp_path):
    path = write(
        tmp_path,
        "plain.py",
        """
        import torch

        def add(x, y):
            return x + y

        if __name__ == "__main__":
            assert add(1, 2) == 3
    """,
    )
    assert_one_line_error(run_cli("run", str(path), cwd=tmp_path), "no @triton.jit function")


def test_no_check_at_all(tmp_path):
    path = write(
        tmp_path,
        "nocheck.py",
        """
        import triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr):
            tl.store(x_ptr, 1)
    """,
    )
    assert_one_line_error(run_cli("run", str(path), cwd=tmp_path), "no check to run")


def test_unknown_operator(tmp_path):
    proc = run_cli(
        "run", str(EXAMPLES / "vector_add.py"), "--operators", "masks,no-such-op", cwd=tmp_path
    )
    assert_one_line_error(proc, "--operators", "no-such-op")


def test_unknown_flag(tmp_path):
    assert_one_line_error(
        run_cli("run", str(EXAMPLES / "vector_add.py"), "--frobnicate", cwd=tmp_path),
        "--frobnicate",
    )


def test_missing_tests_file(tmp_path):
    proc = run_cli(
        "run", str(EXAMPLES / "vector_add.py"), "--tests", str(tmp_path / "t.py"), cwd=tmp_path
    )
    assert_one_line_error(proc, "test file not found")


BROKEN_KERNEL = """
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) - tl.load(y_ptr + offs, mask=mask), mask=mask)

    def add(x, y):
        out = torch.empty_like(x)
        add_kernel[(triton.cdiv(x.numel(), 64),)](x, y, out, x.numel(), BLOCK=64)
        return out

    if __name__ == "__main__":
        x, y = torch.ones(100), torch.ones(100)
        {check}
"""


@pytest.mark.slow
def test_original_failing_its_own_check(tmp_path):
    path = write(
        tmp_path,
        "k.py",
        BROKEN_KERNEL.replace("{check}", "torch.testing.assert_close(add(x, y), x + y)"),
    )
    proc = run_cli("run", str(path), "-j", "1", cwd=tmp_path)
    assert_one_line_error(proc, "the original fails its own check", "Mismatched elements")


@pytest.mark.slow
def test_original_check_timing_out(tmp_path):
    path = write(tmp_path, "k.py", BROKEN_KERNEL.replace("{check}", "while True: pass"))
    proc = run_cli("run", str(path), "-j", "1", "--timeout", "3", cwd=tmp_path)
    assert_one_line_error(proc, "timed out after 3 CPU s")


# -- optional extras: a face or writer that is not installed is one line, exit 2 ----------
def without(module: str, *args: str, cwd) -> subprocess.CompletedProcess:
    """The command line in a fresh interpreter where ``import MODULE`` fails."""
    code = (
        f"import sys; sys.modules[{module!r}] = None\n"
        "from mutant_gate.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("command", [["tui", str(EXAMPLES / "vector_add.py")], ["replay"]])
def test_the_explorer_without_textual(tmp_path, command):
    assert_one_line_error(
        without("textual", *command, cwd=tmp_path),
        "the explorer needs textual: pip install 'mutant-gate[tui]'",
    )


@pytest.mark.parametrize(
    ("missing", "flags", "message"),
    [
        (
            "openai",
            ["--writer", "llm"],
            "--writer llm needs openai: pip install 'mutant-gate[llm]'",
        ),
        ("openai", ["--stage2"], "--stage2 needs openai: pip install 'mutant-gate[llm]'"),
        (
            "contree_sdk",
            ["--backend", "contree"],
            "--backend contree needs contree-sdk: pip install 'mutant-gate[contree]'",
        ),
    ],
)
def test_flags_without_their_extra(monkeypatch, capsys, missing, flags, message):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == missing else real(name, *a)
    )
    code = main(["run", str(EXAMPLES / "vector_add.py"), "--no-config", *flags])
    assert code == 2
    assert capsys.readouterr().err.strip() == f"mutant-gate: error: {message}"


def test_mode_auto_without_a_cuda_device_is_the_interpreter_and_imports_no_torch():
    code = (
        "import sys; from mutant_gate.engine.modes import resolve_mode; "
        "print(resolve_mode('auto'), 'torch' in sys.modules)"
    )
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.split() == ["('interpret',", "True)", "False"], out.stdout + out.stderr


def test_argument_errors_name_the_tool_once(tmp_path):
    """argparse's errors read "mutant-gate: error: mutant-gate: ..." before."""
    flag = run_cli("run", str(EXAMPLES / "vector_add.py"), "--frobnicate", cwd=tmp_path)
    assert_one_line_error(flag, "unrecognized arguments: --frobnicate")
    value = run_cli("run", str(EXAMPLES / "vector_add.py"), "-j", "many", cwd=tmp_path)
    assert_one_line_error(value, "mutant-gate: error: run: argument -j/--jobs")
    for proc in (flag, value):
        assert proc.stderr.count("mutant-gate") == 1, proc.stderr
        assert proc.stdout == ""


UNRELATED_TEST = """
    import torch

    def test_ones():
        assert torch.ones(3).sum() == 3

    def test_sum():
        assert 1 + 1 == 2
"""

SKIPPED_TEST = """
    import pytest
    import torch

    from vector_add import add

    pytestmark = pytest.mark.skipif(True, reason="needs a CUDA device")

    def test_add():
        x = torch.rand(100)
        torch.testing.assert_close(add(x, x), 2 * x)

    def test_add_again():
        x = torch.rand(10)
        torch.testing.assert_close(add(x, x), 2 * x)
"""


@pytest.mark.slow
def test_a_tests_file_that_launches_no_kernel_of_the_file(tmp_path):
    """Outside project mode it was accepted silently: every mutant ran it for nothing."""
    (tmp_path / "vector_add.py").write_text((EXAMPLES / "vector_add.py").read_text())
    write(tmp_path, "test_other.py", UNRELATED_TEST)
    proc = run_cli("run", "vector_add.py", "--tests", "test_other.py", "--no-cache", cwd=tmp_path)
    assert_one_line_error(
        proc,
        "test_other.py: none of its 2 test cases launches a kernel of ",
        "vector_add.py, so it cannot kill its mutants",
    )
    assert "0/?" not in proc.stdout  # no progress bar left behind before the error


@pytest.mark.slow
def test_a_tests_file_whose_cases_are_all_skipped(tmp_path):
    (tmp_path / "vector_add.py").write_text((EXAMPLES / "vector_add.py").read_text())
    write(tmp_path, "test_gpu.py", SKIPPED_TEST)
    proc = run_cli("run", "vector_add.py", "--tests", "test_gpu.py", "--no-cache", cwd=tmp_path)
    assert_one_line_error(
        proc, "test_gpu.py: all 2 of its test cases were skipped: needs a CUDA device"
    )
    assert "none of its" not in proc.stderr
