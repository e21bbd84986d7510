"""What makes a loaded kernel file reusable: the key under which the store keeps a
file's parsed form and its mutants (``pipeline.load``).

A cached rerun then needs neither libcst nor the operators: the key covers the
file's bytes, the test files' bytes, the flags that change what is planted, and the
code that plants it (this package's parser and operators, and libcst's version).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os

from .kernel_file import split_node_id
from .settings import RunSettings
from .versions import installed_version

HERE = os.path.dirname(os.path.abspath(__file__))
#: The code whose change changes what a load gives (paths under ``engine/``).
GENERATOR = ("mutate", "kernel_file.py", "own_check.py", "project.py", "records.py",
             os.path.join("harness", "main_guard.py"), "load_memo.py")  # fmt: skip


@functools.cache
def generator_hash() -> str:
    digest = hashlib.sha256((installed_version("libcst") or "missing").encode())
    for entry in GENERATOR:
        path = os.path.join(HERE, entry)
        files = (
            sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".py"))
            if os.path.isdir(path)
            else [path]
        )
        for name in files:
            with open(name, "rb") as fh:
                digest.update(os.path.relpath(name, HERE).encode() + b"\0" + fh.read())
    return digest.hexdigest()


def _sha(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def load_key(settings: RunSettings) -> str | None:
    """The store key of this load, or None when it must be done afresh: ``--changed-since``
    (it reads git), a module inside a package (project mode reads the tree around it),
    or a file that cannot be read (the load then says what is wrong)."""
    if settings.changed_since is not None:
        return None
    kernel = os.path.abspath(settings.kernel_path)
    if os.path.exists(os.path.join(os.path.dirname(kernel), "__init__.py")):
        return None
    try:
        parts = {
            "kernel": [kernel, _sha(kernel)],
            "tests": [[os.path.abspath(t), _sha(split_node_id(t)[0])] for t in settings.tests],
            "project_root": settings.project_root,
            "operators": settings.operators,
            "generator": generator_hash(),
        }
    except OSError:
        return None
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
