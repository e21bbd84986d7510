"""The checks' pure parts: the exact comparison, target parsing, the oracle's sentence."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mutant_gate.engine.checks import parse_targets
from mutant_gate.engine.checks.diff_oracle import describe_arguments, sentence
from mutant_gate.engine.checks.harness_jobs import reached_kernels
from mutant_gate.engine.errors import BadInput
from mutant_gate.engine.harness.compiler import _one_line, parse_target
from mutant_gate.engine.harness.oracle import compare_arrays
from mutant_gate.engine.kernel_file import load_kernel_file
from mutant_gate.engine.records import Mutant, Verdict

# -- compare_arrays ---------------------------------------------------------------------


def test_identical_arrays_including_nan_at_the_same_place_compare_equal():
    a = np.array([1.0, np.nan, -0.0, np.inf], dtype=np.float32)
    b = np.array([1.0, np.nan, 0.0, np.inf], dtype=np.float32)
    assert compare_arrays(a, b) is None


def test_nan_against_a_number_is_a_nonfinite_difference_without_a_magnitude():
    a = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    b = np.array([1.0, np.nan, 3.0], dtype=np.float32)
    diff = compare_arrays(a, b)
    assert diff == {
        "count": 1,
        "first_index": [1],
        "max_abs": None,
        "max_rel": None,
        "nonfinite": 1,
    }


def test_first_index_is_the_first_in_c_order_and_magnitudes_are_the_largest():
    a = np.zeros((3, 4), dtype=np.float64)
    b = a.copy()
    b[2, 0] = 5.0
    b[1, 3] = -0.5
    diff = compare_arrays(a, b)
    assert diff["first_index"] == [1, 3]
    assert diff["count"] == 2
    assert diff["max_abs"] == 5.0
    assert diff["max_rel"] is None  # the original is 0 wherever they differ


def test_max_rel_is_relative_to_the_original():
    a = np.array([2.0, 100.0, 4.0])
    b = np.array([3.0, 101.0, 4.0])
    diff = compare_arrays(a, b)
    assert diff["max_abs"] == 1.0
    assert diff["max_rel"] == 0.5  # |3 - 2| / 2 beats |101 - 100| / 100
    assert diff["nonfinite"] == 0


def test_integer_and_bool_arrays_compare_exactly():
    assert compare_arrays(np.arange(5), np.arange(5)) is None
    diff = compare_arrays(np.array([1, 2, 3], dtype=np.int32), np.array([1, 7, 3], np.int32))
    assert (diff["count"], diff["first_index"], diff["max_abs"]) == (1, [1], 5.0)
    flags = compare_arrays(np.array([True, False]), np.array([True, True]))
    assert flags["first_index"] == [1]


def test_a_shape_change_is_a_difference_of_every_element():
    diff = compare_arrays(np.zeros(4), np.zeros(6))
    assert diff["count"] == 6 and diff["shape"] == [[4], [6]]


def test_comparison_results_are_strict_json():
    diff = compare_arrays(np.array([np.inf, 1.0]), np.array([1.0, np.nan]))
    json.dumps(diff, allow_nan=False)
    assert diff["nonfinite"] == 2


# -- targets ----------------------------------------------------------------------------


def test_targets_parse_and_dedupe():
    assert parse_targets("sm_80, 90,sm_80") == ("sm_80", "sm_90")
    assert parse_targets("sm_90a") == ("sm_90a",)
    assert parse_target("sm_90a") == 90


@pytest.mark.parametrize("bad", ["gfx90a", "sm_7", "sm_30", "", " , "])
def test_bad_targets_are_bad_input(bad):
    with pytest.raises(BadInput, match="--compile-target"):
        parse_targets(bad)


def test_compiler_messages_become_one_line():
    text = 'at 20:4:\n    for off in range(0, N, B):\n    ^\nAssertionError("Loop-carried variable _mean")'
    assert _one_line(text) == "Loop-carried variable _mean"
    mlir = "loc(x.py:3): error: 'tt.dot' op operand types mismatch\nnote: see current op"
    assert _one_line(mlir) == "loc(x.py:3): error: 'tt.dot' op operand types mismatch"


# -- which kernels a mutant reaches -----------------------------------------------------

HELPERS = """
import triton
import triton.language as tl


@triton.jit
def _square(x):
    return x * x


@triton.jit
def _twice_square(x):
    return 2 * _square(x)


@triton.jit
def a_kernel(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, _twice_square(tl.load(p + offs)))


@triton.jit
def b_kernel(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs) + 1)


if __name__ == "__main__":
    pass
"""


def _mutant(function: str) -> Mutant:
    return Mutant("x", "add-sub", "arith", function, 1, 0, 1, 1, "+", "-", "", "")


def test_a_helper_mutant_reaches_the_kernels_that_call_it_transitively(tmp_path):
    path = tmp_path / "helpers.py"
    path.write_text(HELPERS)
    kernel = load_kernel_file(str(path))
    launched = ["a_kernel", "b_kernel"]
    assert reached_kernels(kernel, _mutant("_square"), launched) == ["a_kernel"]
    assert reached_kernels(kernel, _mutant("b_kernel"), launched) == ["b_kernel"]
    assert reached_kernels(kernel, _mutant("a_kernel"), ["b_kernel"]) == []


# -- the oracle's sentence --------------------------------------------------------------


def _data(**changes) -> dict:
    data = {
        "launches": 12,
        "identical": True,
        "launches_differing": 0,
        "by_argument": [],
        "divergence": None,
        "masked_only": False,
        "interpreter_dependent": False,
        "poisoned": None,
        "timed_out": False,
        "checks": {"original": "passed", "mutant": "passed"},
    }
    data.update(changes)
    return data


RSTD = {
    "kernel": "_layer_norm_fwd_fused",
    "argument": "Rstd",
    "launches": 2,
    "count": 5,
    "max_abs": 316.2,
    "max_rel": 2.5,
    "nonfinite": 0,
    "first_launch": 0,
    "first_index": [3],
}


def test_sentences_say_identical_or_where_outputs_differ():
    assert sentence(_data(), Verdict.SURVIVED, 1) == "outputs identical on all 12 launches"
    differs = _data(identical=False, launches_differing=2, by_argument=[RSTD])
    assert sentence(differs, Verdict.SURVIVED, 1) == (
        "outputs differ in Rstd (max abs 316, first at [3]) on 2 of 12 launches; "
        "the test passes anyway"
    )
    assert "passes anyway" not in sentence(differs, Verdict.EQUIVALENT, 1)


def test_sentences_name_interpreter_dependence():
    masked = sentence(_data(masked_only=True, interpreter_dependent=True), Verdict.SURVIVED, 1)
    assert "only on masked-off lanes" in masked and "interpreter-dependent" in masked
    poisoned = {"identical": False, "masked_only": False, "by_argument": [RSTD]}
    text = sentence(_data(interpreter_dependent=True, poisoned=poisoned), Verdict.SURVIVED, 1)
    assert "fills undefined masked-off lanes with 0" in text and "Rstd" in text


def test_many_differing_arguments_are_summarised():
    args = [dict(RSTD, argument=f"A{i}") for i in range(5)]
    assert describe_arguments(args).endswith("and 2 more")
