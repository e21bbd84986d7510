"""The sandbox backends, declared once: the command line's choices, the settings' checks, the
extras check, rerun and ``open_sandbox`` all read this table.

Adding a backend: its module here in ``engine/sandbox/`` (a class that subclasses ``Sandbox``
and so inherits the optional capabilities' defaults), a row in ``BACKENDS``, and its extra in
``pyproject.toml``. Stdlib only: the command line imports it to build its parser.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import BadInput

if TYPE_CHECKING:
    from . import Sandbox


@dataclass(frozen=True)
class Option:
    """One backend option: the constructor's keyword, the settings' field, the flag."""

    keyword: str
    field: str
    flag: str


@dataclass(frozen=True)
class Backend:
    name: str
    module: str  # engine/sandbox/<module>.py
    cls: str
    #: a line for ``--help``
    words: str
    #: jobs run off this machine: ``--mode auto`` is the interpreter there (this machine's GPU
    #: is not theirs), and the backend picks its own number of workers
    remote: bool = False
    #: (the module it imports, the package that provides it, the mutant-gate extra)
    extra: tuple[str, str, str] | None = None
    options: tuple[Option, ...] = ()
    #: started when opened (its versions key the cache; a node that cannot harden jobs is
    #: refused before anything runs); a local pool starts with its first job
    start_at_open: bool = False

    def open(self, settings: Any, mode: str) -> Sandbox:
        module = importlib.import_module(f"{__package__}.{self.module}")
        kwargs = {o.keyword: getattr(settings, o.field) for o in self.options}
        box = getattr(module, self.cls)(settings.workers, mode, **kwargs)
        if self.start_at_open:
            box.start()
        return box


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend("local", "local", "LocalSandbox", "warm worker processes on this machine"),
        Backend(
            "contree",
            "contree",
            "ContreeSandbox",
            "Nebius Contree sandboxes",
            remote=True,
            extra=("contree_sdk", "contree-sdk", "contree"),
            options=(
                Option("image", "contree_image", "--contree-image"),
                Option("base_url", "contree_url", "--contree-url"),
            ),
            start_at_open=True,
        ),
        Backend(
            "ray",
            "ray",
            "RaySandbox",
            "Ray actors",
            remote=True,
            extra=("ray", "ray", "ray"),
            options=(Option("address", "ray_address", "--ray-address"),),
            start_at_open=True,
        ),
    )
}
DEFAULT = "local"


def backend(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise BadInput(
            f"unknown sandbox backend {name!r} (choose from {', '.join(BACKENDS)})"
        ) from None


def check_options(name: str, given: dict[str, Any]) -> None:
    """BadInput when an option of another backend than ``name`` is set in ``given`` (settings
    field -> value), e.g. "--ray-address needs --backend ray"."""
    for other in BACKENDS.values():
        if other.name == name or not any(given.get(o.field) for o in other.options):
            continue
        flags = [o.flag for o in other.options]
        verb = "needs" if len(flags) == 1 else "need"
        raise BadInput(f"{' and '.join(flags)} {verb} --backend {other.name}")


def open_sandbox(settings: Any, mode: str | None = None) -> Sandbox:
    """The sandbox ``settings.backend`` names, in ``mode`` (default: the run's)."""
    return backend(settings.backend).open(settings, mode or settings.mode)
