import pytest
import torch
from genlib.ops.shifted_relu import shifted_relu


@pytest.mark.parametrize("n", [7, 300])
def test_shifted_relu(n):
    torch.manual_seed(0)
    x = torch.randn(n)
    torch.testing.assert_close(shifted_relu(x), torch.clamp(x, min=0) * 2 + 1)
