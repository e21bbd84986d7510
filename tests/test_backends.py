"""The sandbox backends' table (engine/sandbox/backends.py) is the one place a backend is
declared: every row names a real class that is a ``Sandbox``, options the class and the
settings both have, an extra pyproject declares; the command line, the extras check and rerun
read it."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import tomllib
from dataclasses import fields
from pathlib import Path

import pytest

from mutant_gate.engine.errors import BadInput
from mutant_gate.engine.sandbox import Sandbox
from mutant_gate.engine.sandbox.backends import BACKENDS, DEFAULT, backend, check_options
from mutant_gate.engine.settings import RunSettings

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_each_row_names_a_sandbox_whose_options_the_class_and_settings_take(name):
    row = BACKENDS[name]
    if row.extra:
        pytest.importorskip(row.extra[0])
    cls = getattr(importlib.import_module(f"mutant_gate.engine.sandbox.{row.module}"), row.cls)
    assert Sandbox in cls.__mro__ and cls.name == name  # subclassed, not only alike
    params = inspect.signature(cls.__init__).parameters
    assert list(params)[1:3] == ["workers", "mode"]
    settings = {f.name for f in fields(RunSettings)}
    for option in row.options:
        assert option.keyword in params and option.field in settings
        assert option.flag.startswith("--")
    # the optional capabilities come from the protocol, so the engine never asks
    for capability in ("warm", "start_errors", "triton_cache_note"):
        assert hasattr(cls, capability)
    assert callable(cls.cluster_record) and callable(cls.gpu_throughput)


def test_every_extra_a_backend_names_is_declared():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for row in BACKENDS.values():
        if row.extra:
            module, package, extra = row.extra
            assert any(dep.startswith(package) for dep in declared[extra]), row.name
    assert DEFAULT in BACKENDS and not BACKENDS[DEFAULT].remote


def test_an_option_of_another_backend_is_one_line_naming_it():
    check_options("ray", {"ray_address": "local"})
    check_options("local", {"ray_address": None, "contree_image": ""})
    with pytest.raises(BadInput, match=r"^--ray-address needs --backend ray$"):
        check_options("local", {"ray_address": "local"})
    with pytest.raises(
        BadInput, match=r"^--contree-image and --contree-url need --backend contree$"
    ):
        check_options("ray", {"contree_url": "http://x"})
    with pytest.raises(BadInput, match="unknown sandbox backend 'nope'"):
        backend("nope")


def test_the_command_line_offers_exactly_the_tables_backends():
    out = subprocess.run(
        [sys.executable, "-m", "mutant_gate.cli", "run", "--help"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "{" + ",".join(BACKENDS) + "}" in out
    bad = subprocess.run(
        [sys.executable, "-m", "mutant_gate.cli", "run", "examples/vector_add.py", "--backend",
         "local", "--ray-address", "local"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1].endswith("--ray-address needs --backend ray")
