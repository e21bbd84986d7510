"""What the model reads. Kept together so a reviewer sees every word it is told.

The import the model is told to use is the one the probe's tests use
(``probe.text.import_line``): ``from module import f``, or, for a file whose name is
no identifier (the tutorials' ``01-vector-add.py``), ``importlib.import_module("...")``,
which ``proving.static_problem`` accepts as importing the module.
"""

from __future__ import annotations

import ast

from ..kernel_file import KernelFile
from .probe.text import import_line
from .proving import REFUSED_ATTRIBUTES

RULES = """\
Rules for the test file:
- It is an ordinary pytest file. Import the kernel module exactly like this (the file
  is `{name}`{why_importlib}):
```python
{imports}
```
  and call its public Python functions, not the @triton.jit kernels directly.{on_import}
- There is no GPU: Triton runs in its interpreter (TRITON_INTERPRET=1) on the CPU, which
  is slow: keep tensors small (at most a few thousand elements) and the whole file under
  a few seconds. Make tensors on the device the file's own check uses (device="cuda" in
  a file written for a GPU is made on the CPU in the sandbox), else on device="cpu".
- A test catches a bug only through the kernel's outputs: it counts as a kill only
  when the outputs change. So each test seeds itself (torch.manual_seed), calls the
  kernel's function and compares its outputs against a plain PyTorch reference with
  torch.testing.assert_close, using tolerances suited to the dtype. A test that fails
  for any other reason kills nothing.
- Tests that read the kernel's source or file (open, Path.read_text / read_bytes,
  inspect, linecache, __file__, .src, .fn) or touch the test harness (mutant_gate,
  _pytest, pytest_* hooks, os._exit) are refused before they run.
- No network, no files, no environment variables.
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

#: Names an import line may not bind by attribute (``source_problem`` refuses them).
_UNSAFE = REFUSED_ATTRIBUTES | {"open", "read_text", "read_bytes"}


def _callable_names(node: ast.stmt) -> list[str]:
    """The names a top-level statement binds to something a test may call: a function's
    name, or the targets of an autograd Function's ``apply`` (``layer_norm = LayerNorm.apply``)."""
    if isinstance(node, ast.FunctionDef):
        return [node.name]
    if (
        isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "apply"
    ):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    return []


def public_functions(kernel: KernelFile, limit: int = 4) -> list[str]:
    """The file's public top-level functions a test calls (no kernels, no tests)."""
    jit = {f.name for f in kernel.jit_functions}
    try:
        tree = ast.parse(kernel.source)
    except SyntaxError:
        return []
    names = [name for node in tree.body for name in _callable_names(node)]
    return [
        n
        for n in names
        if not n.startswith(("_", "test", "bench")) and n not in jit and n not in _UNSAFE
    ][:limit]


def import_snippet(kernel: KernelFile) -> str:
    """The lines that import the kernel module, as the probe's written tests do."""
    module = kernel.module
    functions = public_functions(kernel)
    if module.isidentifier():
        return f"from {module} import {', '.join(functions)}" if functions else f"import {module}"
    lines = ["import importlib", ""]
    if functions:
        lines += [import_line(module, f) for f in functions]
    else:
        lines.append(f"kernel = importlib.import_module({module!r})")
    return "\n".join(lines)


def own_check(kernel: KernelFile) -> str:
    """What the file's own check is, in a sentence or two (the model reads it)."""
    parts = []
    if kernel.has_main:
        parts.append('its `if __name__ == "__main__":` block')
    if kernel.module_check:
        where = "" if kernel.has_main else ' (there is no `if __name__ == "__main__":` block)'
        parts.append(
            f"top-level module code{where}, which runs whenever the module is run or imported"
        )
    if kernel.test_functions:
        parts.append(f"its test_* functions ({', '.join(kernel.test_functions)})")
    if not parts:
        return "The file has no own check of its own; the tests below check it."
    text = f"Its own check is {' and '.join(parts)}."
    if not kernel.asserts:
        text += (
            " That check asserts nothing: it only prints (or only runs the code), so a "
            "wrong result never fails it. Your tests must assert on the outputs."
        )
    return text


def rules(kernel: KernelFile) -> str:
    identifier = kernel.module.isidentifier()
    return RULES.format(
        name=kernel.name,
        why_importlib=""
        if identifier
        else ", whose name is not a valid identifier: import it with importlib",
        imports=import_snippet(kernel),
        on_import=(
            "\n  Importing the module runs its top-level code, the own check included:\n"
            "  import it once, at the top of the file."
            if kernel.module_check
            else ""
        ),
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
    user = (
        f"{_kernel_block(kernel)}\n\n{own_check(kernel)} {_tests_block(kernel)}\n\n"
        "Write new tests for this file that would catch bugs the existing checks miss.\n\n"
        + rules(kernel)
    )
    return [{"role": "system", "content": STAGE1_SYSTEM}, {"role": "user", "content": user}]


def stage2_messages(kernel: KernelFile, diff: str, verdict_reason: str, probe: str) -> list[dict]:
    user = (
        f"{_kernel_block(kernel)}\n\n{own_check(kernel)} {_tests_block(kernel)}\n\n"
        f"This mutant survived every check ({verdict_reason}):\n```diff\n{diff}\n```\n"
        + (f"The model-free probe reported: {probe}.\n" if probe else "")
        + "\nWrite a test that passes on the original and fails on the mutant. At test time "
        f"the module `{kernel.module}` holds either the original or the mutant.\n\n"
        + rules(kernel)
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
