"""``--changed-since REF``: which jit functions of a kernel file changed since a git ref.

The working tree (staged or not) is compared with REF by ``git diff -U0 REF -- FILE``;
a jit function counts as changed when a changed line falls inside it, decorators
included, or a deletion happened between two of its lines. A file git does not track
yet is new: every function in it changed. Anything git cannot answer (not a
repository, an unknown ref, no git) is a ``BadInput`` with git's own words.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
from collections.abc import Iterable

from .errors import BadInput

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


def _git(args: list[str], cwd: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
        )
    except FileNotFoundError:
        raise BadInput("--changed-since needs git, and git is not installed") from None
    except subprocess.TimeoutExpired:
        raise BadInput(f"--changed-since: `git {' '.join(args)}` took over 60 s") from None


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


def changed_lines(path: str, ref: str) -> tuple[set[int] | None, str]:
    """(lines of the working file that changed since ``ref``, repository root).

    Lines are 1-based. A deletion between new lines N and N+1 adds N (and N+1 when
    it exists in a function). None means the whole file is new to git.
    """
    path = os.path.abspath(path)
    root = _repository_root(path)
    if ref.startswith("-"):
        raise BadInput(f"--changed-since: not a git ref: {ref!r}")
    verify = _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], root)
    if verify.returncode != 0:
        raise BadInput(f"--changed-since: unknown git ref {ref!r} in {root}")
    tracked = _git(["ls-files", "--error-unmatch", "--", path], root)
    if tracked.returncode != 0:
        return None, root  # untracked: new since any ref
    diff = _git(["diff", "-U0", "--no-color", "--no-ext-diff", ref, "--", path], root)
    if diff.returncode != 0:
        raise BadInput(f"--changed-since: git diff failed: {_last_line(diff.stderr)}")
    return _lines_of_hunks(diff.stdout), root


def _repository_root(path: str) -> str:
    """The root of the git repository ``path`` lies in; bad input where there is none."""
    where = os.path.dirname(path)
    if not os.path.isdir(where):
        raise BadInput(f"--changed-since: no such directory: {where}")
    top = _git(["rev-parse", "--show-toplevel"], where)
    if top.returncode != 0:
        raise BadInput(
            f"--changed-since: {path} is not in a git repository ({_last_line(top.stderr)})"
        )
    return top.stdout.strip()


def _lines_of_hunks(diff: str) -> set[int]:
    """The new file's lines a ``git diff -U0`` touches (around a pure deletion: both)."""
    lines: set[int] = set()
    for line in diff.splitlines():
        match = _HUNK.match(line)
        if not match:
            continue
        start = int(match.group(1))
        count = 1 if match.group(2) is None else int(match.group(2))
        if count == 0:  # pure deletion after line ``start``
            lines.update({start, start + 1} if start else {1})
        else:
            lines.update(range(start, start + count))
    return lines


def function_spans(source: str, names: Iterable[str]) -> dict[str, tuple[int, int]]:
    """name -> (first line incl. decorators, last line) for the named functions."""
    wanted = set(names)
    spans: dict[str, tuple[int, int]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in wanted:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            spans.setdefault(node.name, (start, node.end_lineno or node.lineno))
    return spans


def changed_functions(path: str, source: str, names: Iterable[str], ref: str) -> list[str]:
    """The named (jit) functions of ``path`` touched since ``ref``, in file order."""
    lines, _root = changed_lines(path, ref)
    spans = function_spans(source, names)
    ordered = sorted(spans.items(), key=lambda kv: kv[1])
    if lines is None:
        return [name for name, _ in ordered]
    changed = []
    for name, (start, end) in ordered:
        if any(start <= n <= end for n in lines):
            changed.append(name)
    return changed
