import pytest
import torch
from kernel_lib.ops.scale import scale


@pytest.mark.parametrize("n", [64, 1000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_scale(n, dtype, device):
    x = torch.randn(n, device=device, dtype=dtype)
    torch.testing.assert_close(scale(x, 1.5), x * 1.5)
