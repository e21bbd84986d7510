"""Every folder of the project's Python is a package pyproject.toml ships: an installed copy
(``pip install .``, not editable, as the GPU machines and users get it) holds every module.
A subpackage missing from ``[tool.setuptools] packages`` is left out of the wheel silently."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _shipped() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return set(config["packages"])


def _on_disk() -> set[str]:
    """Each folder with an ``__init__.py`` below the mapped roots, as a dotted name."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set()
    for name, folder in config["package-dir"].items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            if "__pycache__" in rel.parts:
                continue
            found.add(".".join([name, *rel.parts]))
    return found


def test_every_package_folder_is_shipped():
    on_disk = _on_disk()
    assert "mutant_gate.engine.writers" in on_disk, "the walk found the engine's folders"
    assert on_disk - _shipped() == set(), "add these to [tool.setuptools] packages"
