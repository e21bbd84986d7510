"""The operator registry: every family module's ``OPERATORS``, in a stable
order (families as in ``FAMILIES``, operators as each module lists them), and
the ``--operators`` selection language."""

from __future__ import annotations

from collections.abc import Iterator

from . import arith, boundaries, indexing, masks, precision
from .base import FAMILIES, Operator

FAMILY_MODULES = {
    "masks": masks,
    "boundaries": boundaries,
    "precision": precision,
    "indexing": indexing,
    "arith": arith,
}
assert tuple(FAMILY_MODULES) == FAMILIES


def all_operators() -> list[Operator]:
    return [op for module in FAMILY_MODULES.values() for op in module.OPERATORS]


def select_operators(spec: str | None) -> list[Operator]:
    """Operators named by ``spec``: comma-separated operator or family names;
    ``-name`` excludes; with only exclusions, start from every operator.
    ``None`` or an empty spec means every operator."""
    operators = all_operators()
    known = _by_name(operators)
    include: set[str] = set()
    exclude: set[str] = set()
    included_any = False
    for negate, name in _spec_items(spec):
        _check_known(name, known, operators)
        chosen = {op.name for op in known[name]}
        if negate:
            exclude |= chosen
        else:
            included_any = True
            include |= chosen
    if not included_any:
        include = set(known) - set(FAMILIES)
    return [op for op in operators if op.name in include and op.name not in exclude]


def _check_known(name: str, known: dict[str, list[Operator]], operators: list[Operator]) -> None:
    """Raise ValueError, listing the known names, where ``name`` is no operator or family."""
    if name not in known:
        listing = ", ".join([*FAMILIES, *(op.name for op in operators)])
        raise ValueError(f"unknown operator or family {name!r} (known: {listing})")


def _by_name(operators: list[Operator]) -> dict[str, list[Operator]]:
    """Each operator name and each family name -> the operators it stands for."""
    known = {op.name: [op] for op in operators}
    for family in FAMILIES:
        known[family] = [op for op in operators if op.family == family]
    return known


def _spec_items(spec: str | None) -> Iterator[tuple[bool, str]]:
    """(excluded?, name) for each non-empty comma-separated item of ``spec``."""
    for item in (spec or "").split(","):
        item = item.strip()
        if not item:
            continue
        negate = item.startswith("-")
        yield negate, item[1:].strip() if negate else item
