import pytest
import torch
from kernel_lib.utils import DEVICE


@pytest.fixture
def device():
    torch.manual_seed(0)
    return DEVICE
