"""Every trigger kind of the probe's table, walked on a captured call as the operators'
examples are walked: each yields inputs of its own kind whose setup code runs, and every
family's order is the table's ranks, each kind once."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mutant_gate.engine.writers.probe.inputs import candidates
from mutant_gate.engine.writers.probe.kinds import (
    DEFAULT_ORDER,
    FAMILIES,
    FAMILY_ORDER,
    KINDS,
    OTHER,
    TRIGGERS,
    kinds,
    order,
    variants,
)

#: a captured call that offers every kind: a 2-D float tensor of fewer rows than the
#: launch's programs, an integer tensor, a float threshold, a block size
CALL = {
    "function": "row_sum",
    "args": [
        {"name": "x", "kind": "tensor", "shape": [3, 48], "dtype": "float32", "min": -1.0,
         "max": 1.0},
        {"name": "idx", "kind": "tensor", "shape": [48], "dtype": "int32", "min": 0, "max": 47},
    ],
    "kwargs": {"thr": {"kind": "value", "value": 0.25}},
    "launches": 1,
    "constexprs": {"BLOCK": [16]},
    "grids": [[8, 1, 1]],
    "duration_s": 0.05,
}  # fmt: skip

#: a recorded launch (no public function on its path): its tensors and grid stay
LAUNCH = {
    "function": "kernel",
    "launch": True,
    "grid": [4, 1, 1],
    "args": [
        {"name": "x_ptr", "kind": "tensor", "shape": [64, 32], "dtype": "float32", "min": -1.0,
         "max": 1.0},
        {"name": "n_cols", "kind": "value", "value": 32},
    ],
    "kwargs": {},
    "launches": 1,
    "constexprs": {"BLOCK": [32]},
    "grids": [[4, 1, 1]],
    "duration_s": 0.05,
}  # fmt: skip


@pytest.mark.parametrize("kind", [k.name for k in KINDS])
def test_every_kind_yields_inputs_of_its_own_kind(kind):
    found = candidates([CALL], "masks", 100, triggers=(kind,))
    assert found, f"{kind}: no input on a call that offers every kind"
    assert {c.kind for c in found} == {kind}
    assert len({c.id for c in found}) == len(found)
    for c in found:
        assert c.describe and c.slug.replace("_", "").isalnum(), (c.describe, c.slug)
        compile(c.setup + c.call, f"<{kind}>", "exec")  # code a test can hold
    assert kind in kinds([CALL], "masks")


def test_every_kinds_setup_runs_and_makes_the_tensors_it_names(tmp_path):
    """Each kind's first input's setup runs under torch (in a process of its own) and
    defines every tensor the candidate names; a dtype kind changes a dtype, a layout kind
    makes a view that is not contiguous."""
    firsts = {k.name: candidates([CALL], "masks", 100, triggers=(k.name,))[0] for k in KINDS}
    script = tmp_path / "run_setups.py"
    script.write_text(
        "import json, sys, torch\n"
        "out = {}\n"
        "for kind, (setup, names) in json.load(open(sys.argv[1])).items():\n"
        "    scope = {'torch': torch}\n"
        "    exec(setup, scope)\n"
        "    out[kind] = {n: [str(scope[n].dtype), scope[n].is_contiguous()] for n in names}\n"
        "print(json.dumps(out))\n"
    )
    given = tmp_path / "setups.json"
    given.write_text(json.dumps({k: [c.setup, list(c.tensors)] for k, c in firsts.items()}))
    done = subprocess.run(
        [sys.executable, str(script), str(given)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    made = json.loads(done.stdout)
    assert set(made) == TRIGGERS
    assert made["base"] == {"x": ["torch.float32", True], "idx": ["torch.int32", True]}
    assert made["dtype"]["x"][0] == "torch.float16"
    assert made["int-dtype"]["idx"][0] == "torch.int32"  # over its whole range
    assert "torch.iinfo(torch.int32).min" in firsts["int-dtype"].setup
    assert made["non-contiguous"]["x"][1] is False


def test_a_recorded_launch_keeps_its_tensors_and_shortens_an_extent():
    found = variants(LAUNCH)
    assert not [v for v in found if v.reshapes]
    (short,) = [v for v in found if v.scalars]
    assert short.kind == "size" and dict(short.scalars) == {"n_cols": 31}


def test_every_family_order_is_the_tables_ranks_with_each_kind_once():
    for family in (*FAMILIES, OTHER):
        ranks = [k.rank(family) for k in KINDS]
        assert len(set(ranks)) == len(ranks), f"{family}: two kinds share a rank"
        assert sorted(order(family)) == sorted(TRIGGERS)
        assert order(family)[0] == "base"  # the learned call itself first, in every family
    assert FAMILY_ORDER["precision"][:3] == ("base", "magnitude", "dtype")
    assert DEFAULT_ORDER == order("operators-of-no-family")
