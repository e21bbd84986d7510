"""Load and validate a kernel file: its jit functions and its own check.

A kernel file is an ordinary ``.py`` with ``@triton.jit`` functions, a Python
wrapper and a check: an ``if __name__ == "__main__":`` block and/or top-level
``test_*`` functions. ``--tests`` adds a pytest file. Everything wrong with the
input becomes a ``BadInput`` with one clear line.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING

from .errors import BadInput
from .job import Check, CheckKind
from .own_check import analyse
from .project import Project, detect
from .records import JitFunction

if TYPE_CHECKING:  # libcst costs half a second to import: only where a file is parsed
    import libcst as cst

OWN_CHECK = "own-check"
EXTRA_TESTS = "test"


#: the origin of the user's own tests: the only ones run with the pytest plugins
#: installed beside them (``Check.plugins``)
GIVEN = "given"
#: test origins a warm runner may serve (``Check.trusted``): the user's (``given``) and
#: the probe's, which the tool writes from a template (the probe's own compare, a setup
#: of seeded tensors, one call of the wrapper, its outputs against golden values) and
#: which patches nothing. A model's tests always run in a process of their own.
TRUSTED_ORIGINS = frozenset({GIVEN, "probe"})


@dataclass(frozen=True)
class TestFile:
    path: str
    name: str  # basename inside the job directory
    source: str
    #: where it came from: ``given`` (--tests) or a writer (``stage1``, ``stage2``, ``probe``)
    origin: str = GIVEN
    #: data files that travel with it (a probe test's golden values): (name, text)
    data: tuple[tuple[str, str], ...] = ()
    #: the cases given by node id (``--tests tests/test_x.py::test_case``); empty: all
    select: tuple[str, ...] = ()
    #: a written test's cases as its proof on the original ran them: {case: {"duration_s":
    #: slowest run, "functions": the jit functions it launched, None when unknown}}
    cases: dict[str, dict] | None = field(default=None, compare=False)


def split_node_id(arg: str) -> tuple[str, str]:
    """``tests/test_x.py::test_case[4]`` -> (``tests/test_x.py``, ``test_case[4]``);
    a plain path -> (path, "")."""
    path, _, case = arg.partition("::")
    return path, case


@dataclass(frozen=True)
class KernelFile:
    path: str
    name: str  # basename inside the job directory
    source: str
    sha256: str
    jit_functions: tuple[JitFunction, ...]
    has_main: bool
    test_functions: tuple[str, ...]
    tests: tuple[TestFile, ...] = ()
    #: top-level code runs the check (tutorial style, no ``__main__`` block)
    module_check: bool = False
    #: whether the own check can fail by an assertion at all (see engine/own_check.py)
    asserts: bool = True
    #: a module inside a package, tested by the project's tests (engine/project.py)
    project: Project | None = None

    @property
    def module(self) -> str:
        """The name tests import the kernel file by."""
        return os.path.splitext(self.name)[0]

    def to_json(self) -> dict:
        """Everything but the jit functions' syntax trees (``from_json`` gives None)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["jit_functions"] = [
            {"name": f.name, "line": f.line, "end_line": f.end_line} for f in self.jit_functions
        ]
        data["test_functions"] = list(self.test_functions)
        data["tests"] = [asdict(t) for t in self.tests]
        data["project"] = self.project.to_json() if self.project is not None else None
        return data

    @staticmethod
    def from_json(data: dict) -> KernelFile:
        return KernelFile(
            **{
                **data,
                "jit_functions": tuple(JitFunction(node=None, **f) for f in data["jit_functions"]),
                "test_functions": tuple(data["test_functions"]),
                "tests": tuple(
                    TestFile(
                        **{
                            **t,
                            "data": tuple(tuple(d) for d in t["data"]),
                            "select": tuple(t.get("select", ())),
                        }
                    )
                    for t in data["tests"]
                ),
                "project": Project(**data["project"]) if data["project"] else None,
            }
        )

    @property
    def checks(self) -> tuple[Check, ...]:
        """The own check first, then extra test files."""
        if self.project is not None:  # the project's tests, read where they lie
            return tuple(
                Check(
                    CheckKind.PYTEST,
                    t.path if t.origin == GIVEN else t.name,  # a written one: a job file
                    EXTRA_TESTS,
                    select=t.select,
                    trusted=t.origin in TRUSTED_ORIGINS,
                    plugins=t.origin == GIVEN,
                )
                for t in self.tests
            )
        checks: list[Check] = []
        if self.has_main or self.module_check:
            checks.append(Check(CheckKind.MAIN, self.name, OWN_CHECK))
        if self.test_functions:
            checks.append(Check(CheckKind.PYTEST, self.name, OWN_CHECK, trusted=True))
        checks.extend(
            Check(
                CheckKind.PYTEST,
                t.name,
                EXTRA_TESTS,
                select=t.select,
                preload=self.preload_for(t),
                trusted=t.origin in TRUSTED_ORIGINS,
                plugins=t.origin == GIVEN,
            )
            for t in self.tests
        )
        return tuple(checks)

    def preload_for(self, test: TestFile) -> str:
        """A probe test only calls the wrapper: the module is loaded for it without its
        module-level check (``Check.preload``)."""
        return self.module if test.origin == "probe" and self.project is None else ""

    def own_file(self, kernel_source: str | None = None) -> tuple[str, str]:
        """The kernel's file alone in a job (``kernel_source``: a mutant's), where the
        sandbox loads it from: its name, or in project mode its place at the import path."""
        return self.files(kernel_source)[0]

    def files(self, kernel_source: str | None = None) -> tuple[tuple[str, str], ...]:
        """The job's files, with ``kernel_source`` (a mutant) in place of the original."""
        if self.project is not None:  # the module, loaded at its import path by the sandbox,
            # and the tests a writer added (the project's own are read where they lie)
            return (
                ("mutant/" + self.name, self.source if kernel_source is None else kernel_source),
            ) + tuple(
                f for t in self.tests if t.origin != GIVEN for f in ((t.name, t.source), *t.data)
            )
        return ((self.name, self.source if kernel_source is None else kernel_source),) + tuple(
            f for t in self.tests for f in ((t.name, t.source), *t.data)
        )


def _node_ids(tests: list[str] | tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Each test file once, with the cases its node ids name (none: the whole file, which
    also wins over node ids of the same file)."""
    chosen: dict[str, list[str] | None] = {}
    for arg in tests:
        path, case = split_node_id(arg)
        if "::" in arg and not case:
            raise BadInput(f"--tests {arg}: no test case after '::'")
        _choose(chosen, path, case)
    return {p: tuple(c or ()) for p, c in chosen.items()}


def _choose(chosen: dict[str, list[str] | None], path: str, case: str) -> None:
    """Adds test file ``path`` (under the name it was first given) and its ``case`` to
    ``chosen``; no case, once, means the whole file."""
    key = next((p for p in chosen if os.path.abspath(p) == os.path.abspath(path)), path)
    cases = chosen.setdefault(key, [])
    if cases is None or not case:
        chosen[key] = None
    elif case not in cases:
        cases.append(case)


def _read_python(path: str, what: str) -> tuple[str, cst.Module]:
    import libcst as cst

    if not os.path.exists(path):
        raise BadInput(f"{what} not found: {path}")
    if os.path.isdir(path):
        raise BadInput(f"{what} is a directory, not a Python file: {path}")
    try:
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
    except UnicodeDecodeError:
        raise BadInput(f"{path}: not a Python file (not UTF-8 text)") from None
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}") from None
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise BadInput(f"{path}:{exc.lineno}: not valid Python: {exc.msg}") from None
    except ValueError as exc:  # e.g. null bytes
        raise BadInput(f"{path}: not valid Python: {exc}") from None
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise BadInput(f"{path}:{exc.raw_line}: not valid Python: {exc.message}") from None
    return source, module


def load_kernel_file(
    path: str, tests: list[str] | tuple[str, ...] = (), project_root: str | None = None
) -> KernelFile:
    from .mutate import find_jit_functions

    source, module = _read_python(path, "kernel file")
    jit = tuple(find_jit_functions(module))
    if not jit:
        raise BadInput(f"{path}: no @triton.jit function found")
    test_files: list[TestFile] = []
    names = {os.path.basename(path)}
    for test_path, cases in _node_ids(tests).items():
        test_source, _ = _read_python(test_path, "test file")
        name = os.path.basename(test_path)
        if name in names:
            raise BadInput(f"{test_path}: a file named {name} is already part of the run")
        names.add(name)
        test_files.append(TestFile(os.path.abspath(test_path), name, test_source, select=cases))
    own = analyse(source)
    project = detect(path, [(t.path, t.source) for t in test_files], project_root)
    kernel = KernelFile(
        path=os.path.abspath(path),
        name=os.path.basename(path),
        source=source,
        sha256=hashlib.sha256(source.encode()).hexdigest(),
        jit_functions=jit,
        has_main=own.has_main,
        test_functions=own.test_functions,
        tests=tuple(test_files),
        module_check=own.module_level,
        asserts=own.asserts,
        project=project,
    )
    if not kernel.checks:
        raise BadInput(
            f'{path}: no check to run: the file has no `if __name__ == "__main__":` block, '
            "no top-level code calling its functions, no test_* functions, and no --tests file"
        )
    return kernel
