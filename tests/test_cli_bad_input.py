"""Every bad input is one clear line on stderr and exit code 2, never a traceback."""

from __future__ import annotations

import textwrap

import pytest

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
    assert_one_line_error(proc, "timed out after 3 s")
