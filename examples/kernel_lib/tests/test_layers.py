import pytest
import torch
from kernel_lib.layers import Softmax


@pytest.mark.parametrize("rows", [2, 5])
def test_softmax_module(rows, device):
    x = torch.randn(rows, 64, device=device, requires_grad=True)
    y = Softmax()(x)
    torch.testing.assert_close(y, torch.softmax(x, dim=-1))
    y.sum().backward()
    assert x.grad is not None
