"""The test a probe's hit becomes: a plain pytest file that calls the kernel module as the
project's tests do, with the candidate's seeded input, and compares with the original's
outputs kept beside it (a golden JSON file). An output too big for a golden file keeps its
values at a sample of positions (where the mutant differs, and a seeded uniform sample:
``harness/probe``'s ``golden``), and the test compares those."""

from __future__ import annotations

import json
import textwrap

from ...harness.probe import GRAD_HELPER
from .inputs import Candidate


def _importable(module: str) -> bool:
    """``from MODULE import ...`` can name it (a dotted path of identifiers)."""
    return all(part.isidentifier() for part in module.split("."))


def import_line(module: str, function: str) -> str:
    function = function.split(".")[0]  # ``XFunction.apply``: the class is imported
    if _importable(module):
        return f"from {module} import {function}"
    return f"{function} = importlib.import_module({module!r}).{function}"


def render_test(
    *,
    module: str,
    kernel_name: str,
    candidate: Candidate,
    outputs: dict,
    golden_name: str,
    test_name: str,
    why: str,
) -> str:
    """A plain pytest file: the probe input, the call, the original's outputs as expected."""
    varies = f"It varies the call made by {candidate.case}. " if candidate.case else ""
    about = (
        f"Input: {candidate.call} with {candidate.describe}. {varies}The expected values are "
        f"the original kernel's outputs for this input (in {golden_name}). {why}"
    )
    about = about.replace("\\", "/").replace('"""', "'''")
    lines = [
        f'"""Probe test written by mutant-gate for {kernel_name}.',
        "",
        *textwrap.wrap(about, width=88),
        '"""',
        "",
    ]
    if not _importable(module):
        lines.append("import importlib")
    lines += ["import json", "import pathlib", "", "import torch", ""]
    lines += [import_line(candidate.module or module, candidate.function), "", ""]
    lines += [
        f"EXPECTED = json.loads(pathlib.Path(__file__).with_name({json.dumps(golden_name)}).read_text())",
        "",
        "",
        "def _load(value):",
        '    if value["kind"] == "tensor":',
        '        data = torch.tensor(value["values"], dtype=getattr(torch, value["dtype"]))',
        '        return data.reshape(value["shape"])',
        '    if value["kind"] == "sequence":',
        '        return tuple(_load(v) for v in value["items"])',
        '    if value["kind"] == "none":',
        "        return None",
        '    return value["value"]',
        "",
        "",
        "def _check(actual, value):",
        "    if isinstance(actual, torch.Tensor):  # the expected values are on the CPU",
        "        actual = actual.detach().cpu()",
        '    if value["kind"] == "sample":  # a big output: its values at the recorded positions',
        '        assert list(actual.shape) == value["shape"]',
        '        where = torch.tensor(value["indices"], dtype=torch.long)',
        '        expected = torch.tensor(value["values"], dtype=getattr(torch, value["dtype"]))',
        "        torch.testing.assert_close(actual.reshape(-1)[where], expected, equal_nan=True)",
        '    elif value["kind"] == "sequence":',
        '        assert len(actual) == len(value["items"])',
        '        for item, expected in zip(actual, value["items"]):',
        "            _check(item, expected)",
        "    else:",
        "        torch.testing.assert_close(actual, _load(value), equal_nan=True)",
        "",
        "",
    ]
    if "_mg_grad(" in candidate.call:  # the call, then its backward: the gradients too
        lines += [*GRAD_HELPER.strip().splitlines(), "", ""]
    lines += [f"def {test_name}():"]
    lines += ["    " + line for line in candidate.setup.strip().splitlines()]
    lines.append(f"    {candidate.call}" if candidate.launch else f"    result = {candidate.call}")
    for name, value in outputs.items():
        if value.get("kind") == "none":
            lines.append(f"    assert {name} is None")
        else:
            lines.append(f'    _check({name}, EXPECTED["{name}"])')
    return "\n".join(lines) + "\n"


def golden_text(outputs: dict) -> str:
    return json.dumps(outputs, separators=(",", ":")) + "\n"
