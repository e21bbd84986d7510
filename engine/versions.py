"""Installed distributions' versions, as ``importlib.metadata.version`` gives them, read
without importing ``importlib.metadata``: it imports the ``email`` package to parse one
header, and that import was a tenth of a cached rerun (the toolchain's versions key
every cached result, so every run reads them).

The common case is read directly: the first ``NAME-*.dist-info`` or ``.egg-info``
directory on ``sys.path`` (matched as ``importlib.metadata`` matches it), its ``Version``
header. Anything else (a zip or an ``.egg`` on the path, a finder besides the standard
one that knows distributions, a file with no ``Version``, a distribution found nowhere)
is asked of ``importlib.metadata`` itself, so the answer is
always the one it gives.
"""

from __future__ import annotations

import os
import re
import sys
from importlib.machinery import PathFinder


def _normalize(name: str) -> str:
    """``importlib.metadata``'s name normalisation (PEP 503, dashes as underscores)."""
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _header_version(info: str) -> str | None:
    """The ``Version`` header of a ``.dist-info``/``.egg-info`` directory's metadata."""
    for name in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(info, name), encoding="utf-8") as fh:
                for line in fh:
                    if not line.strip():
                        return None  # the headers end at the first blank line
                    key, _, value = line.partition(":")
                    if key.strip().lower() == "version":
                        return value.strip() or None
            return None
        except OSError:
            continue
    return None


def _fast(dist: str) -> str | None:
    """The version from the first matching metadata directory on ``sys.path``, or None
    when the answer must come from ``importlib.metadata``."""
    finders = [f for f in sys.meta_path if getattr(f, "find_distributions", None)]
    if finders != [PathFinder]:
        return None  # another finder may know distributions first
    wanted = _normalize(dist)
    for entry in sys.path:
        root = entry or "."
        if os.path.isfile(root) or root.lower().endswith(".egg"):
            return None  # a zip or an egg: importlib.metadata reads those
        found = _metadata_dir(root, wanted)
        if found is not None:
            return _header_version(found)
    return None


def _metadata_dir(root: str, wanted: str) -> str | None:
    """The ``.dist-info`` (or ``.egg-info``) directory of distribution ``wanted`` (its
    normalized name) in ``root``, or None."""
    try:
        children = os.listdir(root)
    except OSError:
        return None
    for child in children:
        low = child.lower()
        if low.endswith((".dist-info", ".egg-info")):
            if _normalize(low.rpartition(".")[0].partition("-")[0]) == wanted:
                return os.path.join(root, child)
    return None


def installed_version(dist: str) -> str | None:
    """``importlib.metadata.version(dist)``, or None when ``dist`` is not installed."""
    version = _fast(dist)
    if version is not None:
        return version
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None
