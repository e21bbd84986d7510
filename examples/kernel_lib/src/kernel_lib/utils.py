"""Helpers the kernels' wrappers share."""

import torch
import triton

DEVICE = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def block_for(n: int, cap: int = 1024) -> int:
    """The power-of-two block that covers ``n`` columns, at most ``cap``."""
    return min(triton.next_power_of_2(n), cap)
