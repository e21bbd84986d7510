"""A report row's own fields are declared once; readers (rerun, the inspector) rely on them."""

from __future__ import annotations

from mutant_gate.engine.mutate import generate_mutants
from mutant_gate.engine.records import MutantOutcome, Verdict
from mutant_gate.engine.report import ROW_FIELDS, mutant_row

from .conftest import EXAMPLES


def test_mutant_row_writes_exactly_its_declared_fields_and_details_on_top():
    mutant = generate_mutants((EXAMPLES / "vector_add.py").read_text(), "vector_add.py")[0]
    outcome = MutantOutcome(mutant.id, Verdict.KILLED, "bounds", "out of bounds", 0.1, False)
    assert set(mutant_row(mutant, None)) == ROW_FIELDS
    row = mutant_row(mutant, outcome, {"oracle": {"identical": True}})
    assert set(row) == ROW_FIELDS | {"oracle"}
    assert (row["verdict"], row["by"]) == ("killed", "bounds")
