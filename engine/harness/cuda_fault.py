"""What a kernel fault on the GPU looks like from Python (stdlib only): the errors after
which the process's CUDA context is unusable, so a job ends as a crash, not a failed
check. Shared by the runner and the probe's compares."""

from __future__ import annotations

#: CUDA errors after which the process's context is unusable.
CUDA_FATAL = (
    "illegal memory access",
    "misaligned address",
    "unspecified launch failure",
    "illegal instruction",
    "CUDA error: an illegal",
    "device-side assert triggered",
)


def lost_cuda_context(message: str) -> bool:
    return any(marker in message for marker in CUDA_FATAL)
