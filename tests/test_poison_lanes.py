"""Undefined lanes poisoned in the interpreter (engine/harness/bounds_poison.py), through the
real local sandbox and Triton's interpreter: a masked ``tl.load`` without ``other=``
reads NaN (or the integer maximum) on masked-off lanes, unless the job turns it off."""

from __future__ import annotations

import json
import textwrap

import pytest

from mutant_gate.engine.job import Check, CheckKind, Job, JobStatus
from mutant_gate.engine.verdicts import summarize_error

from .conftest import run_cli

ROW_SUM = textwrap.dedent(
    """
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def row_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0)  # LOAD
        tl.store(out_ptr + row, tl.sum(x, axis=0))


    def row_sum(x):
        out = torch.empty(x.shape[0])
        row_sum_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=64)
        return out


    if __name__ == "__main__":
        x = torch.rand(4, 50)
        torch.testing.assert_close(row_sum(x), x.sum(dim=1))
    """
)
#: the other-drop mutant: the masked-off lanes (50..63 of each row) feed the sum
ROW_SUM_DROPPED = ROW_SUM.replace(", other=0.0)  # LOAD", ")  # LOAD")

VECTOR_ADD = textwrap.dedent(
    """
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + y, mask=mask)


    if __name__ == "__main__":
        x, y = torch.rand(1000), torch.rand(1000)
        out = torch.empty(1000)
        add_kernel[(4,)](x, y, out, 1000, BLOCK=256)
        torch.testing.assert_close(out, x + y)
    """
)


def _line(source: str, marker: str) -> int:
    return next(i for i, t in enumerate(source.splitlines(), start=1) if marker in t)


def kernel_job(source: str, **kw) -> Job:
    return Job(
        files=(("kernel.py", source),),
        checks=(Check(CheckKind.MAIN, "kernel.py", "own-check"),),
        timeout_s=60.0,
        **kw,
    )


def test_row_sum_with_other_passes_and_reads_no_undefined_lane(sandbox):
    result = sandbox.run(kernel_job(ROW_SUM))
    assert result.status is JobStatus.PASSED, result.error
    assert "undefined_lanes" not in result.extra


def test_other_drop_mutant_fails_when_poisoned_and_passes_without(sandbox):
    poisoned = sandbox.run(kernel_job(ROW_SUM_DROPPED))
    assert poisoned.status is JobStatus.FAILED, poisoned.error
    assert "nan" in poisoned.error.lower()  # the NaN reached the sum the check compares
    zero_filled = sandbox.run(kernel_job(ROW_SUM_DROPPED, poison_undefined=False))
    assert zero_filled.status is JobStatus.PASSED, zero_filled.error
    assert "undefined_lanes" not in zero_filled.extra


def test_an_original_reading_undefined_lanes_is_told_which_load(sandbox):
    result = sandbox.run(kernel_job(ROW_SUM_DROPPED))
    assert result.status is JobStatus.FAILED
    line = _line(ROW_SUM_DROPPED, "# LOAD")
    expected = (
        f"UndefinedLanesError: reads undefined lanes: tl.load without other= at "
        f"row_sum_kernel line {line} (56 masked-off lanes filled with NaN; on a GPU they "
        "are undefined: add other=)"
    )
    assert result.error.splitlines()[-1] == expected
    assert summarize_error(result.error) == expected
    assert result.extra["undefined_lanes"] == [
        {
            "kernel": "row_sum_kernel",
            "function": "row_sum_kernel",
            "file": "kernel.py",
            "line": line,
            "kernel_line": line,
            "lanes": 56,  # 4 rows x 14 masked-off lanes
            "fill": "NaN",
            "dtype": "fp32",
        }
    ]


def test_integer_lanes_get_the_type_maximum(sandbox):
    source = textwrap.dedent(
        """
        import torch
        import triton
        import triton.language as tl


        @triton.jit
        def max_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n)  # LOAD
            tl.store(out_ptr, tl.max(x, axis=0))


        x = torch.arange(10, dtype=torch.int32)
        out = torch.zeros(1, dtype=torch.int32)
        max_kernel[(1,)](x, out, 10, BLOCK=16)
        assert out.item() == 9, out.item()
        """
    )
    result = sandbox.run(kernel_job(source))
    assert result.status is JobStatus.FAILED
    assert "2147483647" in result.error  # the assertion saw the sentinel
    assert summarize_error(result.error) == (
        f"UndefinedLanesError: reads undefined lanes: tl.load without other= at max_kernel "
        f"line {_line(source, '# LOAD')} (6 masked-off lanes filled with 2147483647 (the int32 "
        "maximum); on a GPU they are undefined: add other=)"
    )
    assert sandbox.run(kernel_job(source, poison_undefined=False)).status is JobStatus.PASSED


def test_lanes_loaded_and_stored_under_the_same_mask_pass_poisoned(sandbox):
    result = sandbox.run(kernel_job(VECTOR_ADD))
    assert result.status is JobStatus.PASSED, result.error
    # The poison was read (and recorded) but never stored.
    (x_load, y_load) = result.extra["undefined_lanes"]
    assert (x_load["kernel"], x_load["lanes"], x_load["fill"]) == ("add_kernel", 24, "NaN")
    assert y_load["line"] == x_load["line"] + 1


def test_an_unrelated_failure_keeps_its_own_summary(sandbox):
    # A mutant of the vector add that reads the same (harmless) undefined lanes but
    # fails for its own reason: the poison never reached a store, so the summary is
    # the check's own error and the undefined lanes are a note before it.
    source = VECTOR_ADD.replace("x + y, mask=mask", "x - y, mask=mask")
    result = sandbox.run(kernel_job(source))
    assert result.status is JobStatus.FAILED
    assert summarize_error(result.error).startswith("AssertionError: Tensor-likes are not close")
    assert result.error.splitlines()[0].startswith(
        "note: this job reads undefined lanes: tl.load without other= at add_kernel line"
    )
    # A NaN of the mutant's own making is not the poison's either.
    own_nan = VECTOR_ADD.replace("x + y, mask=mask", "(x - x) / (y - y), mask=mask")
    result = sandbox.run(kernel_job(own_nan))
    assert result.status is JobStatus.FAILED
    assert summarize_error(result.error).startswith("AssertionError")


def test_job_json_round_trips_the_setting_and_old_json_reads_as_on():
    job = kernel_job(ROW_SUM, poison_undefined=False)
    data = job.to_json()
    assert data["poison_undefined"] is False
    assert Job.from_json(json.loads(json.dumps(data))) == job
    on = kernel_job(ROW_SUM)
    assert on.to_json()["poison_undefined"] is True
    old = {k: v for k, v in on.to_json().items() if k != "poison_undefined"}
    assert Job.from_json(old).poison_undefined is True
    assert Job.from_json(old) == on
    tc = {"triton": "3.9", "torch": "2"}
    assert on.cache_key(tc) != job.cache_key(tc)


def test_the_no_poison_flag_turns_the_run_setting_off(capsys):
    from mutant_gate.cli.flags import run_settings
    from mutant_gate.cli.main import build_parser

    parser = build_parser()
    assert run_settings(parser.parse_args(["run", "k.py"])).poison_undefined is True
    off = run_settings(parser.parse_args(["run", "k.py", "--no-poison"]))
    assert off.poison_undefined is False
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--help"])
    assert "--no-poison" in capsys.readouterr().out


@pytest.mark.slow
def test_the_baseline_names_the_load_of_an_original_that_reads_undefined_lanes(tmp_path):
    path = tmp_path / "row_sum.py"
    path.write_text(ROW_SUM_DROPPED)
    proc = run_cli("run", str(path), "--writer", "none", "--no-cache", "-q", "-j", "1")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (
        "the original fails its own check (failed): UndefinedLanesError: reads undefined "
        f"lanes: tl.load without other= at row_sum_kernel line {_line(ROW_SUM_DROPPED, '# LOAD')}"
    ) in proc.stdout + proc.stderr
    off = run_cli(
        "run",
        str(path),
        *("--writer", "none", "--no-cache", "-q", "-j", "1", "--no-poison"),
        *("--operators", "compare-lt-le"),
    )
    assert off.returncode == 0, off.stdout + off.stderr
