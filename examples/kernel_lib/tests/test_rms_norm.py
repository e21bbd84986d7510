import pytest
import torch
from kernel_lib.ops.rms_norm import rms_norm


def reference(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


@pytest.mark.parametrize("shape", [(4, 64), (3, 100)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_rms_norm(shape, dtype, device):
    x = torch.randn(shape, device=device, dtype=dtype)
    w = torch.rand(shape[-1], device=device, dtype=dtype)
    torch.testing.assert_close(rms_norm(x, w), reference(x, w), atol=2e-2, rtol=2e-2)


def test_registry_has_both_ops():
    import kernel_lib

    assert set(kernel_lib.OPS) == {"rms_norm", "scale"}
