"""What the model reads. Kept together so a reviewer sees every word it is told."""

from __future__ import annotations

from ..kernel_file import KernelFile

RULES = """\
Rules for the test file:
- It is an ordinary pytest file. Import the kernel module as `{module}` (for example
  `from {module} import ...`); call its public Python functions, not the @triton.jit
  kernels directly.
- There is no GPU: tensors live on the CPU (device="cpu") and Triton runs in its
  interpreter (TRITON_INTERPRET=1), which is slow: keep tensors small (at most a few
  thousand elements) and the whole file under a few seconds.
- Each test seeds itself (torch.manual_seed) and compares against a plain PyTorch
  reference with torch.testing.assert_close, using tolerances suited to the dtype.
- No network, no files outside the current directory, no environment variables.
- Reply with exactly one ```python code block holding the whole file."""

STAGE1_SYSTEM = (
    "You write pytest tests for Triton kernels. Your tests must pass on the kernel as "
    "given, which is correct, and should catch plausible bugs in it: masks dropped or "
    "wrong at the edges, off-by-one bounds, sizes that are not a multiple of the block "
    "size, tiny sizes, non-power-of-two sizes, reduced precision, extreme values."
)

STAGE2_SYSTEM = (
    "You are a mutation-testing assistant for Triton kernels. A mutant is a copy of a "
    "correct kernel file with one small change. You either write a pytest test that "
    "PASSES on the original file and FAILS on the mutant, or, when no input at all can "
    "tell the two apart, you answer EQUIVALENT with the reason."
)


def _kernel_block(kernel: KernelFile) -> str:
    return f"The kernel file `{kernel.name}` (module `{kernel.module}`):\n```python\n{kernel.source}\n```"


def _tests_block(kernel: KernelFile, limit: int = 12000) -> str:
    if not kernel.tests:
        return "There are no other tests besides the file's own check."
    parts, used = [], 0
    for test in kernel.tests:
        text = f"`{test.name}` ({test.origin}):\n```python\n{test.source}\n```"
        if used + len(text) > limit:
            parts.append(f"`{test.name}` ({test.origin}): not shown (length)")
            continue
        parts.append(text)
        used += len(text)
    return "The current tests besides the file's own check:\n\n" + "\n\n".join(parts)


def stage1_messages(kernel: KernelFile) -> list[dict]:
    check = 'its `if __name__ == "__main__":` block' if kernel.has_main else "its test_* functions"
    user = (
        f"{_kernel_block(kernel)}\n\nIts own check is {check}. {_tests_block(kernel)}\n\n"
        "Write new tests for this file that would catch bugs the existing checks miss.\n\n"
        + RULES.format(module=kernel.module)
    )
    return [{"role": "system", "content": STAGE1_SYSTEM}, {"role": "user", "content": user}]


def stage2_messages(kernel: KernelFile, diff: str, verdict_reason: str, probe: str) -> list[dict]:
    user = (
        f"{_kernel_block(kernel)}\n\n{_tests_block(kernel)}\n\n"
        f"This mutant survived every check ({verdict_reason}):\n```diff\n{diff}\n```\n"
        + (f"The model-free probe reported: {probe}.\n" if probe else "")
        + "\nWrite a test that passes on the original and fails on the mutant. At test time "
        f"the module `{kernel.module}` holds either the original or the mutant.\n\n"
        + RULES.format(module=kernel.module)
        + "\n\nIf no input can make the mutant behave differently, reply instead with a line "
        "`EQUIVALENT: <reason>` and no code."
    )
    return [{"role": "system", "content": STAGE2_SYSTEM}, {"role": "user", "content": user}]


def retry_message(problem: str) -> dict:
    return {
        "role": "user",
        "content": f"{problem}\n\nFix it and reply with the whole corrected file in one "
        "```python code block.",
    }


NO_CODE = (
    "Your reply has no ```python code block. Reply with the whole test file in one "
    "```python code block."
)
