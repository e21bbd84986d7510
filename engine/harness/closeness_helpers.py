"""A project's own closeness helpers, recorded as the built-in ones are (``closeness.py``).

Real kernel libraries compare through helpers of their own: one library's tests call
``assert_verbose_allclose(x1.grad, x2.grad, atol=atol, rtol=rtol)`` from their
``test/utils.py``, which computes ``|a - b| > atol + rtol * |b|`` by hand and never calls
``torch.allclose``; wrapping torch's functions alone sees none of its assertions. Once the
test modules are imported (pytest's collection), ``wrap(places)`` finds every function of the
project's own modules (below the job's root, not library code) whose name says closeness
(``close`` or ``approx`` in it) and whose parameters include ``rtol`` and ``atol`` after two
inputs, and puts a ``closeness.Wrapper`` in its place in every project module that holds it
(``from utils import assert_verbose_allclose`` copies the function into each test module).
The helper is read as ``allclose`` is (``err <= atol + rtol * |b|``, b its second input, its
own defaults where a call leaves them out) and tightened by calling it with other ``rtol``
and ``atol``; its calls inside (``torch.isclose`` and the like) pass through unrecorded. A
helper whose name does not start with ``assert`` is taken to return whether all is close.
"""

from __future__ import annotations

import inspect
import re
import sys
import types
from typing import Any

from . import closeness
from .closeness import _MARK, Kind, Places, Wrapper, _read_plain, _tight_plain

#: a helper's name says closeness
NAME = re.compile(r"close|approx", re.IGNORECASE)
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def kind_of(function: types.FunctionType) -> Kind | None:
    """The ``Kind`` a helper is read by: two inputs first, ``rtol`` and ``atol`` among its
    parameters (with float defaults, or none: 0); None for anything else."""
    try:
        params = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return None
    if not _takes_two_inputs_and_tolerances(params):
        return None
    tolerances = _default_tolerances(params)
    if tolerances is None:
        return None  # a tolerance chosen per dtype inside: not read as allclose
    rtol, atol = tolerances
    return Kind(
        f"{function.__module__}.{function.__qualname__}",
        tuple(p.name for p in params),
        _read_plain,
        _tight_plain,
        rtol,
        atol,
        returns=not function.__name__.lower().startswith("assert"),
    )


def _takes_two_inputs_and_tolerances(params: list[inspect.Parameter]) -> bool:
    """Two positional inputs first (neither ``rtol`` nor ``atol``), both tolerances among
    the parameters."""
    tolerances = {"rtol", "atol"}
    inputs = [p for p in params[:2] if p.kind in _POSITIONAL]
    if len(inputs) < 2 or tolerances & {p.name for p in inputs}:
        return False
    return tolerances <= {p.name for p in params}


def _default_tolerances(params: list[inspect.Parameter]) -> tuple[float, float] | None:
    """(rtol, atol) of the parameters' defaults (0.0 where none); None where one is not a
    number."""
    defaults = {p.name: p.default for p in params if p.name in ("rtol", "atol")}
    rtol, atol = (
        0.0 if defaults[n] is inspect.Parameter.empty else defaults[n] for n in ("rtol", "atol")
    )
    if not all(isinstance(v, int | float) for v in (rtol, atol)):
        return None
    return float(rtol), float(atol)


def _mine(module: Any, places: Places) -> bool:
    """A module of the project (a file below the job's root that is not library code)."""
    path = getattr(module, "__file__", None)
    if not path or places.library(path):
        return False
    return not places.relative(path).startswith(("/", ".."))


def wrap(places: Places) -> list[str]:
    """Every closeness helper of the project's imported modules (``places``: the job's root
    and what is library code) wrapped where they hold it; their names, each once."""
    wrappers: dict[int, Wrapper] = {}
    for module in [m for m in list(sys.modules.values()) if _mine(m, places)]:
        for attr, value in list(vars(module).items()):
            wrapper = _wrapper(value, attr, wrappers, places)
            if wrapper is not None:
                setattr(module, attr, wrapper)
    return sorted(w.kind.fn for w in wrappers.values())


def _wrapper(value: Any, attr: str, wrappers: dict[int, Wrapper], places: Places) -> Wrapper | None:
    """The wrapper for ``value`` where it is a project's closeness helper, else None."""
    if not isinstance(value, types.FunctionType) or not NAME.search(attr):
        return None
    if getattr(value, _MARK, False) or places.library(value.__code__.co_filename):
        return None
    if places.relative(value.__code__.co_filename).startswith(("/", "..")):
        return None  # defined outside the project
    if id(value) not in wrappers:
        kind = kind_of(value)
        if kind is None:
            return None
        wrappers[id(value)] = Wrapper(kind, value, (value.__module__, value.__qualname__))
    return wrappers[id(value)]


def finder() -> Any:
    """A pytest plugin that wraps the project's helpers once its test modules are imported
    (the runner adds it beside ``closeness.tracker()``)."""

    class HelperFinder:
        def pytest_collection_finish(self, session: Any) -> None:
            try:
                wrap(closeness.places())
            except Exception:  # noqa: BLE001 - a courtesy: the run goes on unrecorded
                pass

    return HelperFinder()
