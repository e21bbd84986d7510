"""The race hint: the original's run in the interpreter records which program stored to
which address; two programs of one launch storing to one address get a note in the
report (``races``) and one line in the summary, since identical values hide a race
from every value check."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .conftest import run_cli

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

# Every program stores its flag to flag[0]: always the same value, so every check passes.
RACY_KERNEL = """
import torch
import triton
import triton.language as tl


@triton.jit
def seen_kernel(x_ptr, flag_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(flag_ptr, tl.sum(x, axis=0) * 0.0 + 1.0)


def seen(x):
    flag = torch.zeros(1)
    seen_kernel[(triton.cdiv(x.numel(), 32),)](x, flag, x.numel(), BLOCK=32)
    return flag


if __name__ == "__main__":
    assert seen(torch.rand(100)).item() == 1.0
"""


def _run(tmp_path: Path, name: str) -> tuple[dict, str]:
    args = ["run", name, "--operators", "add-sub", "--writer", "none", "--json", "r.json"]
    proc = run_cli(*args, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return json.loads((tmp_path / "r.json").read_text()), proc.stdout


def test_every_program_storing_to_one_address_gets_the_race_hint(tmp_path):
    (tmp_path / "racy.py").write_text(RACY_KERNEL)
    report, out = _run(tmp_path, "racy.py")
    races = report["races"]
    (race,) = races["found"]
    assert race["kernel"] == "seen_kernel" and race["line"] == 11
    assert race["argument"] == "flag_ptr" and race["element"] == 0
    assert race["programs"] == [[0, 0, 0], [1, 0, 0]] and race["addresses"] == 1
    assert "no value check" in races["note"]
    flat = " ".join(out.split())  # the console wraps long lines
    assert (
        "race hint: kernel seen_kernel: programs (0, 0, 0) and (1, 0, 0) both store to "
        "element 0 of flag_ptr (racy.py:11)" in flat
    )


def test_vector_add_gets_no_race_hint(tmp_path):
    shutil.copy(EXAMPLES / "vector_add.py", tmp_path / "vector_add.py")
    report, out = _run(tmp_path, "vector_add.py")
    assert report["races"] == {
        "checked": "the original's checks, in the interpreter",
        "found": [],
        "note": "",
    }
    assert "race hint" not in out
