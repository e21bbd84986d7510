from pathlib import Path

import pytest
import torch
from wlib.ops.scale import scale

#: written beside this file by each run of the suite; a run never sees an earlier one's
SCRATCH = Path(__file__).with_name("scratch.txt")


def test_a_file_written_beside_the_test_is_this_runs_own():
    assert not SCRATCH.exists(), "a file an earlier run wrote is still there"
    SCRATCH.write_text("written by this run\n")
    assert SCRATCH.read_text() == "written by this run\n"


@pytest.mark.parametrize("n", [10, 200])
def test_scale(n):
    torch.manual_seed(0)
    x = torch.randn(n)
    torch.testing.assert_close(scale(x, 1.5), x * 1.5 + 1.0)
