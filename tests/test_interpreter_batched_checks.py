"""The harness's own checks under the batched executor (engine/harness/batched_checks.py): the
bounds checker's records and messages, the diff-oracle's lane digests and undefined-lane
counts, and whole runs' verdicts, each against Triton's own loop."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import run_cli
from .test_harness_bounds import DRIVER, KERNELS

ROOT = Path(__file__).resolve().parents[1]
INTERPRET = {**os.environ, "TRITON_INTERPRET": "1"}


def _json_line(stdout: str) -> dict:
    line = next(ln for ln in stdout.splitlines() if ln.startswith("JSON"))
    return json.loads(line[4:])


def _bounds_report(tmp_path: Path, mode: str | None) -> dict:
    """test_harness_bounds's cases, under ``mode`` (None: the executor not installed)."""
    driver = DRIVER
    if mode is not None:
        install = f"from mutant_gate.engine.harness import batched\nbatched.install({mode!r})\n"
        driver = driver.replace("import kernels as k\n", install + "import kernels as k\n", 1)
        driver = driver.replace(
            'print("JSON"', 'out["launches"] = batched.launches()\nprint("JSON"'
        )
    d = tmp_path / (mode or "plain")
    d.mkdir()
    (d / "kernels.py").write_text(KERNELS)
    (d / "driver.py").write_text(driver)
    proc = subprocess.run(
        [sys.executable, "driver.py"], cwd=d, env=INTERPRET, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # addresses differ between processes; everything else must not
    return json.loads(re.sub(r"0x[0-9a-f]{6,}", "ADDRESS", json.dumps(_json_line(proc.stdout))))


@pytest.mark.slow
def test_bounds_records_and_messages_are_the_loops(tmp_path: Path) -> None:
    loop = _bounds_report(tmp_path, None)
    batched = _bounds_report(tmp_path, "batched")
    launches = batched.pop("launches")
    assert batched == loop
    # every checked launch ran batched, out-of-bounds ones and those of one program included
    ran = {(x["kernel"], x["executor"]) for x in launches}
    assert ran == {
        (kernel, "batched")
        for kernel in (
            "add_kernel",
            "add_load_nomask",
            "add_store_nomask",
            "add_le_mask",
            "shifted_copy",
            "wild_masked_off",
            "copy_2d",
            "scalar_double",
            "histogram_atomic",
        )
    }
    message = loop["load_nomask"]["violations"][0]["message"]
    assert "program_id (3, 0, 0)" in message and "24 of 256 active lanes" in message


TRACED = textwrap.dedent(
    """
    import json, sys
    import torch
    import triton
    import triton.language as tl
    from mutant_gate.engine.harness import batched, bounds, trace

    batched.install(sys.argv[1])
    bounds.install()
    bounds.set_races(True)


    @triton.jit
    def rows(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + row * n + offs, mask=mask)  # no other=: undefined lanes
        w = tl.load(x_ptr + offs, mask=mask, other=1.0)  # the same in every program
        tl.store(out_ptr + row * BLOCK + offs, x * w)  # masked-off lanes stored too
        tl.store(out_ptr + row * BLOCK, tl.sum(tl.where(mask, x, 0.0), axis=0))


    @triton.jit
    def guarded(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        if pid * BLOCK >= n:
            return
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


    @triton.jit
    def same_address(out_ptr):
        tl.store(out_ptr, 1.0)


    @triton.jit
    def row_loop(x_ptr, out_ptr, last_ptr, n, n_rows, BLOCK: tl.constexpr):
        # one program's loop over rows, its iterations together
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        w = tl.load(x_ptr + n + offs, mask=mask)  # before the loop: digested before it
        for row in range(0, n_rows):
            x = tl.load(x_ptr + row * n + offs, mask=mask)  # no other=: undefined lanes
            tl.store(out_ptr + row * BLOCK + offs, x * w)  # masked-off lanes stored too
            tl.store(last_ptr, tl.sum(tl.where(mask, x, 0.0), axis=0))  # one address, no race
            acc += tl.where(mask, x, 0.0)
        tl.store(out_ptr + n_rows * BLOCK + offs, acc)


    @triton.jit
    def late_rows(x_ptr, out_ptr, n, K, BLOCK: tl.constexpr):
        # rows from K on read the row before, which another program writes: the chunk that
        # holds them falls back (with small chunks, after those before it stood)
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + row * n + offs, mask=mask)  # no other=: undefined lanes
        tl.store(out_ptr + row * BLOCK + offs, x * 2.0)  # masked-off lanes stored too
        src = tl.where(row >= K, row - 1, row)
        prev = tl.load(out_ptr + src * BLOCK + offs, mask=mask)
        tl.store(out_ptr + row * BLOCK + offs, x + prev, mask=mask)


    headers = []
    for poison in (False, True):
        bounds.reset()
        trace.start("values", sink=lambda header, tensors: headers.append(header), poison=poison)
        torch.manual_seed(0)
        x = torch.rand(6, 10)
        out = torch.zeros(6, 16)
        rows[(6,)](x, out, 10, BLOCK=16)
        y = torch.zeros(40)
        guarded[(8,)](torch.rand(40), y, 40, BLOCK=8)
        same_address[(4,)](torch.zeros(1))
        looped, last = torch.zeros(5, 16), torch.zeros(1)
        row_loop[(1,)](torch.rand(4, 10), looped, last, 10, 4, BLOCK=16)
        late = torch.zeros(12, 16)
        late_rows[(12,)](torch.rand(12, 10), late, 10, 9, BLOCK=16)
        trace.stop()
        headers.append({"outputs": [out.tolist(), y.tolist(), looped.tolist(), last.tolist(),
                                    late.tolist()],
                        "undefined": bounds.undefined_lanes(),
                        "stored": bounds.poison_stored(),
                        "races": bounds.races()})
    print("JSON" + json.dumps({"headers": headers, "launches": batched.launches()}))
    """
)


def _traced(tmp_path: Path, mode: str, env: dict | None = None) -> dict:
    script = tmp_path / "traced.py"
    script.write_text(TRACED)
    proc = subprocess.run(
        [sys.executable, str(script), mode],
        env={**INTERPRET, **(env or {})},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(json.dumps(_json_line(proc.stdout)).replace("NaN", "null"))


@pytest.mark.slow
def test_lane_digests_undefined_lanes_and_race_hints_are_the_loops(tmp_path: Path) -> None:
    loop, batched = _traced(tmp_path, "triton"), _traced(tmp_path, "batched")
    assert batched["headers"] == loop["headers"]
    lanes = [h["lanes"] for h in batched["headers"] if "lanes" in h]
    assert lanes[0]["undefined"] == 6 * 6  # 6 masked-off lanes in each of 6 rows
    # the checker poisons where the tracer does not (round 1), and the poison is stored
    checked, traced = [h for h in batched["headers"] if "stored" in h]
    assert checked["undefined"][0]["lanes"] == 36 and checked["stored"] and checked["races"]
    assert traced["undefined"] == [] and traced["races"]
    executors = {(x["kernel"], x["executor"]) for x in batched["launches"]}
    assert executors == {
        ("rows", "batched"),
        ("guarded", "batched"),
        ("same_address", "batched"),
        ("row_loop", "batched"),
        ("late_rows", "triton"),
    }
    looped = [x.get("masked") for x in batched["launches"] if x["kernel"] == "row_loop"]
    assert looped == [[ITERATIONS]] * 2, looped
    late = [x.get("batched_programs") for x in batched["launches"] if x["kernel"] == "late_rows"]
    assert late == [None, None], late  # one chunk: Triton's loop runs the whole launch


@pytest.mark.slow
def test_a_launch_resumed_after_the_chunks_that_stood_is_the_loops(tmp_path: Path) -> None:
    """Small chunks: late_rows' first chunk (8 programs) stands, its writes, digests, undefined
    lanes and poison kept; the next one's programs talk, so its writes and records are put
    back and Triton's loop runs on from program 8. Every record is the loop's."""
    small = {"MUTANT_GATE_BATCH_ELEMENTS": "1024"}
    loop, batched = _traced(tmp_path, "triton"), _traced(tmp_path, "batched", small)
    assert batched["headers"] == loop["headers"]
    late = [x for x in batched["launches"] if x["kernel"] == "late_rows"]
    assert [(x["executor"], x.get("batched_programs")) for x in late] == [("triton", 8)] * 2


ITERATIONS = "a single program's loop, its iterations together"

LOOP_BOUNDS = textwrap.dedent(
    """
    import json, sys
    import torch
    import triton
    import triton.language as tl
    from mutant_gate.engine.harness import batched, bounds

    batched.install(sys.argv[1])
    bounds.install()
    bounds.set_races(True)


    @triton.jit
    def rows_past_end(x_ptr, out_ptr, n_rows, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for row in range(0, n_rows):
            x = tl.load(x_ptr + row * BLOCK + offs)  # row 5 of x's 5 is past its end
            tl.store(out_ptr + row * BLOCK + offs, x + 1.0)
            acc += x
        tl.store(out_ptr + offs, acc)


    torch.manual_seed(0)
    x, out = torch.rand(5, 8), torch.zeros(7, 8)
    error = None
    try:
        rows_past_end[(1,)](x, out, 7, BLOCK=8)
    except Exception as e:  # noqa: BLE001
        error = f"{type(e).__name__}: {e}"
    print("JSON" + json.dumps({"error": error, "violations": bounds.violations(),
                               "races": bounds.races(), "out": out.tolist(),
                               "launches": batched.launches()}))
    """
)


@pytest.mark.slow
def test_a_bounds_violation_in_a_loop_run_together_is_the_loops(tmp_path: Path) -> None:
    """A single program's loop whose iteration 5 reads past its argument: the iterations run
    together, and the violation, its message (the program, the lanes), the memory the earlier
    iterations wrote and the race hint (none: one program) are Triton's loop's."""
    script = tmp_path / "loop_bounds.py"
    script.write_text(LOOP_BOUNDS)
    found = {}
    for mode in ("triton", "batched"):
        proc = subprocess.run(
            [sys.executable, str(script), mode], env=INTERPRET, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        text = re.sub(r"0x[0-9a-f]{6,}", "ADDRESS", json.dumps(_json_line(proc.stdout)))
        found[mode] = json.loads(text)
    launches = found["batched"].pop("launches")
    found["triton"].pop("launches")
    assert found["batched"] == found["triton"]
    assert found["triton"]["violations"] and "program_id (0, 0, 0)" in found["triton"]["error"]
    assert found["triton"]["races"] == []
    assert [(x["executor"], x["masked"]) for x in launches] == [("batched", [ITERATIONS])]


def _verdicts(tmp_path: Path, example: str, operators: str, mode: str) -> dict:
    out = tmp_path / f"{example}.{mode}.json"
    proc = run_cli(
        "run",
        str(ROOT / "examples" / f"{example}.py"),
        "--writer",
        "none",
        "--no-write-tests",
        "--operators",
        operators,
        "--interpreter",
        mode,
        "--json",
        str(out),
        "--cache-dir",
        str(tmp_path / f"cache.{mode}"),
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(out.read_text())


def _timed_out(m: dict) -> bool:
    """A row the CPU limit decided: a timeout, flaky (two runs near the limit), or a
    diff-oracle whose runs timed out (Triton's loop on a loaded machine)."""
    return (
        m["verdict"] == "flaky"
        or str(m.get("reason") or "").startswith("timed out")
        or bool((m.get("oracle") or {}).get("timed_out"))
    )


def _row(m: dict) -> tuple:
    oracle = m.get("oracle") or {}
    return (m["verdict"], m.get("reason"), oracle.get("sentence"), oracle.get("undefined_lanes"))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("example", "operators"),
    [
        ("layer_norm", "masks,boundaries"),
        ("vector_add", "mask-drop,compare-lt-le,offset-term-drop"),
        ("softmax", "masks,boundaries"),  # a loop whose bounds differ between programs
    ],
)
def test_whole_runs_give_the_loops_verdicts(tmp_path: Path, example: str, operators: str) -> None:
    loop = _verdicts(tmp_path, example, operators, "triton")
    batched = _verdicts(tmp_path, example, operators, "batched")
    assert loop["mutants"], "no mutant"
    # A timeout (a flaky verdict, two runs near the limit, or the diff-oracle's runs timed
    # out) is the one outcome that rests on the interpreter's speed: a mutant that makes the
    # kernel slower can time out in Triton's loop and finish in time batched. Left out.
    timed = {m["id"] for r in (loop, batched) for m in r["mutants"] if _timed_out(m)}
    assert len(timed) <= len(loop["mutants"]) // 4, timed
    assert {m["id"]: _row(m) for m in batched["mutants"] if m["id"] not in timed} == {
        m["id"]: _row(m) for m in loop["mutants"] if m["id"] not in timed
    }
    assert loop["interpreter"]["mode"] == "triton"
    section = batched["interpreter"]
    assert section["mode"] == "batched"
    assert sum(k["batched"] for k in section["kernels"].values()) >= 1, section
    if example == "softmax":  # its rows loop starts at the program's id: run under masks
        masked = section["kernels"]["softmax_kernel"]["masked"]
        assert masked == {"a loop whose bounds differ between programs": 2}, section
