"""Fuzzing kernel-file loading with mutated real files: a clear error or a valid load, never a crash."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mutant_gate.engine.errors import BadInput
from mutant_gate.engine.kernel_file import load_kernel_file
from mutant_gate.engine.mutate import generate_mutants

from .conftest import EXAMPLES

SOURCES = [p.read_text() for p in sorted(EXAMPLES.glob("*.py"))]
SNIPPETS = [
    "@triton.jit\n",
    "def f(:\n",
    "\x00",
    "    ",
    "\t",
    "tl.load(",
    ")",
    "if __name__ == '__main__':\n",
    "mask=",
    "# mutant-gate: skip\n",
    "\ufeff",
    "\r\n",
    "'''",
    "lambda: (",
    "\\\n",
    "async def g():\n",
]


@st.composite
def mutated_source(draw) -> bytes:
    text = draw(st.sampled_from(SOURCES))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["delete", "insert", "duplicate", "truncate", "bytes"]))
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 200)))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            text = text[:i] + draw(st.sampled_from(SNIPPETS) | st.text(max_size=20)) + text[i:]
        elif op == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        elif op == "truncate":
            text = text[:i]
        else:
            return text.encode()[:i] + draw(st.binary(max_size=16)) + text.encode()[i:]
    return text.encode("utf-8", "surrogatepass")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_source())
def test_loading_never_crashes(data: bytes):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.py"
        path.write_bytes(data)
        try:
            kernel = load_kernel_file(str(path))
        except BadInput as exc:
            message = str(exc)
            assert message and "\n" not in message.strip(), message
            return
        assert kernel.jit_functions
        assert kernel.checks
        for mutant in generate_mutants(kernel.source, kernel.path):
            compile(mutant.source, "mutant.py", "exec")
