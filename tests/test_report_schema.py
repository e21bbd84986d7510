"""The JSON report against its JSON Schema (``docs/reference/report.schema.json``)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from mutant_gate.engine.report import ROW_FIELDS
from mutant_gate.engine.verdicts import ROW_SECTIONS, RUN_SECTIONS
from mutant_gate.engine.vocabulary import PENDING, Verdict

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "docs" / "reference" / "report.schema.json").read_text())
DATA = Path(__file__).resolve().parent / "data"


def validate(report: dict) -> None:
    """Raise ``jsonschema.ValidationError`` where ``report`` breaks the schema."""
    jsonschema.Draft202012Validator(SCHEMA).validate(report)


def test_the_schema_is_a_schema_and_names_what_the_engine_writes():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    row = SCHEMA["$defs"]["row"]
    assert set(row["required"]) == set(ROW_FIELDS)
    assert set(row["properties"]) == set(ROW_FIELDS) | ROW_SECTIONS
    assert RUN_SECTIONS <= set(SCHEMA["properties"])
    assert set(row["properties"]["verdict"]["enum"]) == {v.value for v in Verdict} | {PENDING}


@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in DATA.glob("*report*.json") if '"schema_version": 3' in p.read_text()),
)
def test_stored_reports_validate(name):
    validate(json.loads((DATA / name).read_text()))


def test_a_report_that_breaks_the_contract_is_refused():
    report = json.loads((DATA / "tui_affine_oracle_report.json").read_text())
    validate(report)
    broken = {**report, "mutants": [{**report["mutants"][0], "verdict": "maybe"}]}
    with pytest.raises(jsonschema.ValidationError, match="maybe"):
        validate(broken)
    stray = {**report, "mutants": [{**report["mutants"][0], "undeclared": 1}]}
    with pytest.raises(jsonschema.ValidationError, match="undeclared"):
        validate(stray)


def test_each_check_has_one_name_and_one_report_key():
    """One table (``vocabulary.CHECK_NAMES``) names every survivor check and its key in a
    report; the engine's registry, the checks' sections and the explorer use it."""
    from mutant_gate.engine.checks import (
        CHECKS,
        big_index,
        claims,
        compile_check,
        diff_oracle,
        tolerance,
    )
    from mutant_gate.engine.vocabulary import CHECK_NAMES, check_name

    assert set(CHECKS) == set(CHECK_NAMES)
    modules = {"big-index": big_index, "claims": claims, "compile-check": compile_check}
    modules["diff-oracle"] = diff_oracle
    modules["tolerance"] = tolerance
    for name, module in modules.items():
        assert module.CHECK == CHECK_NAMES[name] and check_name(module.CHECK) == name
    assert set(CHECK_NAMES.values()) <= ROW_SECTIONS | {"claims"}
