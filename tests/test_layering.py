"""The layering the design promises, checked in fresh interpreters."""

from __future__ import annotations

import subprocess
import sys


def loaded_modules(*imports: str) -> set[str]:
    code = (
        "import sys\n"
        + "".join(f"import {name}\n" for name in imports)
        + "print('\\n'.join(sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return set(out.split())


def roots(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_engine_and_cache_import_no_textual_or_tui():
    modules = loaded_modules("mutant_gate.engine.pipeline", "mutant_gate.cache")
    assert "mutant_gate.engine.pipeline" in modules
    assert "textual" not in roots(modules)
    assert not any(name.startswith("mutant_gate.tui") for name in modules)


def test_harness_imports_only_what_a_sandbox_has():
    """Code that runs inside a sandbox must not need the tool's own dependencies."""
    modules = roots(
        loaded_modules("mutant_gate.engine.harness.runner", "mutant_gate.engine.sandbox.worker")
    )
    for forbidden in ("libcst", "rich", "diskcache", "textual", "openai", "contree_sdk"):
        assert forbidden not in modules, forbidden
