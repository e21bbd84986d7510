"""Real bugs as the yardstick, part 1: textual coupling (issue 49).

For every bug of a real-faults catalog (``../shared/realfaults/catalog.json``: repository,
fix and parent commits, files, kernels, family), generate the tool's own mutants of the
fixed kernel files and say whether any of them writes the buggy code back: a mutant that
does is one the tool would have shown a maintainer before the bug shipped, if the tests
let it through. Nothing is run; this is text against text.

Run: ``python benchmarks/real_faults.py --catalog FILE --mirrors DIR --out DIR``. The
mirrors are git directories as the search tool's ``fetch`` leaves them
(``DIR/OWNER+NAME/repo``, or ``DIR/OWNER+NAME``); files are read with ``git show``, no
work tree is needed. OUT receives ``summary.json`` (one entry per bug) and
``summary.md`` (the table, also printed, and the counts by family).

How a bug is judged:

- a jit function is flattened to its statements (``ast.unparse``, docstrings dropped, a
  compound statement's header apart from its body, each line prefixed by its depth, a
  do-nothing ``x = x`` left out), so formatting and comments never count as a change;
- the fixed and buggy versions of each named kernel are aligned (difflib); each
  difference is a *change*: ``replaced`` (one statement for one) or ``structural`` (the
  fix adds, deletes or moves statements);
- a mutant reproduces a change when its flattened function equals the fixed one with
  that change's buggy statements put in (or equals the whole buggy function);
- ``exact``: every change reproduced; ``partial``: some; ``no``: none and every change a
  one-for-one replacement; ``structural``: none, and the fix adds or moves code. For
  what no mutant reproduces, ``rewrite`` names the statement-level rewrite that would
  (fixed -> buggy: what an operator would have to do to the fixed code).
"""

from __future__ import annotations

import argparse
import ast
import copy
import difflib
import functools
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from mutant_gate.engine.mutate import generate_mutants, select_operators
from mutant_gate.engine.mutate.jit import ast_jit_functions
from mutant_gate.engine.records import Mutant

INDENT = "    "
OUTCOMES = ("exact", "partial", "no", "structural", "not-run")
#: how alike two statements must be (difflib ratio) to count as one rewritten, not as
#: one removed and another added, inside a hunk of unequal sides
LIKENESS = 0.6


class NotRun(Exception):
    """A bug that cannot be judged (mirror, commit or file missing): its row says why."""


# -- git ---------------------------------------------------------------------------------


def git_dir(mirrors: str, repo: str) -> str | None:
    """Where ``fetch`` put ``OWNER/NAME``: ``DIR/OWNER+NAME/repo``, else ``DIR/OWNER+NAME``
    (each bare, or a clone with its ``.git``); None where neither is a git directory."""
    base = os.path.join(mirrors, repo.replace("/", "+"))
    for inside in ("repo", os.path.join("repo", ".git"), ".git", ""):
        candidate = os.path.join(base, inside) if inside else base
        if os.path.isfile(os.path.join(candidate, "HEAD")):
            return candidate
    return None


def git(directory: str, *args: str) -> str | None:
    """A git command's output, None where it fails (a missing commit or path)."""
    proc = subprocess.run(
        ["git", "--git-dir", directory, *args], capture_output=True, text=True, check=False
    )
    return proc.stdout if proc.returncode == 0 else None


def has_commit(directory: str, commit: str) -> bool:
    return git(directory, "cat-file", "-e", f"{commit}^{{commit}}") is not None


# -- flattening --------------------------------------------------------------------------


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _header(statement: ast.stmt) -> str:
    """A compound statement's first line alone (``if cond:``), so that a changed condition
    is one changed statement and not the whole block."""
    shell = copy.copy(statement)
    shell.body = [ast.Pass()]
    for name in ("orelse", "finalbody", "handlers", "decorator_list"):
        if hasattr(shell, name):
            setattr(shell, name, [])
    return ast.unparse(shell).splitlines()[0]


def _is_self_assignment(statement: ast.stmt) -> bool:
    """``x = x``: a statement that does nothing. It is what an operator leaves when it
    strips a whole right-hand side (``rounding-drop`` on ``y = y.to(lo).to(tl.float32)``),
    and doing nothing is what the buggy code did without that statement."""
    return (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
        and isinstance(statement.value, ast.Name)
        and statement.targets[0].id == statement.value.id
    )


def _flatten_block(body: Sequence[ast.stmt], depth: int) -> Iterator[str]:
    for statement in body:
        if not (_is_docstring(statement) or _is_self_assignment(statement)):
            yield from _flatten_statement(statement, depth)


def _flatten_statement(statement: ast.AST, depth: int) -> Iterator[str]:
    indent = INDENT * depth
    if not isinstance(getattr(statement, "body", None), list):
        yield indent + ast.unparse(statement)
        return
    yield indent + _header(statement)
    yield from _flatten_block(statement.body, depth + 1)
    for handler in getattr(statement, "handlers", ()):
        yield from _flatten_statement(handler, depth)
    for name, label in (("orelse", "else:"), ("finalbody", "finally:")):
        block = getattr(statement, name, None)
        if block:
            yield indent + label
            yield from _flatten_block(block, depth + 1)


def flatten(function: ast.FunctionDef) -> tuple[str, ...]:
    """A function's body as one line per statement: what the bug and a mutant are compared
    on. The signature and decorators are left out: the tool never mutates them."""
    return tuple(_flatten_block(function.body, 0))


def functions_named(source: str, names: Sequence[str]) -> dict[str, ast.FunctionDef]:
    """The functions of ``source`` with these names, at any depth (first of a name wins)."""
    found: dict[str, ast.FunctionDef] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name in names:
            found.setdefault(node.name, node)
    return found


# -- changes -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One difference between a kernel's fixed and buggy statements. ``target`` is the
    fixed function with this change's buggy statements put in: the text a mutant must
    have to reproduce it."""

    kernel: str
    kind: str  # replaced | structural
    fixed: tuple[str, ...]
    buggy: tuple[str, ...]
    target: tuple[str, ...]

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "kind": self.kind, "fixed": self.fixed, "buggy": self.buggy}

    def rewrite(self) -> str:
        """The statement-level rewrite of the fixed code that would reproduce it."""
        fixed, buggy = _quote(self.fixed), _quote(self.buggy)
        if self.kind == "replaced":
            return f"{fixed} -> {buggy}"
        if not self.buggy:
            return f"drop {fixed}"
        if not self.fixed:
            return f"add {buggy}"
        return f"{fixed} -> {buggy}"


def _quote(statements: Sequence[str], width: int = 90) -> str:
    """Statements for a table cell: the first, shortened, and how many more."""
    if not statements:
        return "nothing"
    first = statements[0].strip()
    first = first if len(first) <= width else first[: width - 3] + "..."
    more = f" (+{len(statements) - 1} statements)" if len(statements) > 1 else ""
    return f"`{first}`{more}"


def _depth(statement: str) -> int:
    return (len(statement) - len(statement.lstrip(" "))) // len(INDENT)


def _likeness(a: str, b: str) -> float:
    """How alike two statements are (0 when at different depths, or too unlike)."""
    if _depth(a) != _depth(b):
        return 0.0
    ratio = difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()
    return ratio if ratio >= LIKENESS else 0.0


def _pairs(fixed: Sequence[str], buggy: Sequence[str]) -> list[tuple[int, int]]:
    """The statements of a hunk rewritten one for one, as (fixed, buggy) index pairs in
    order: positional when both sides have as many statements at the same depths, else
    the order-keeping pairing of like statements with the greatest total likeness."""
    if len(fixed) == len(buggy) and all(map(lambda a, b: _depth(a) == _depth(b), fixed, buggy)):
        return [(i, i) for i in range(len(fixed))]

    @functools.cache
    def best(i: int, j: int) -> tuple[float, tuple[tuple[int, int], ...]]:
        if i == len(fixed) or j == len(buggy):
            return 0.0, ()
        options = [best(i + 1, j), best(i, j + 1)]
        score = _likeness(fixed[i], buggy[j])
        if score:
            rest, pairs = best(i + 1, j + 1)
            options.append((rest + score, ((i, j), *pairs)))
        return max(options, key=lambda option: option[0])

    return list(best(0, 0)[1])


def _hunk_changes(
    kernel: str, fixed: tuple[str, ...], buggy: tuple[str, ...], opcode: tuple
) -> Iterator[Change]:
    """The changes of one hunk of the alignment: its one-for-one pairs, and between them
    the runs of statements one side has and the other lacks."""
    _, i1, i2, j1, j2 = opcode
    pairs = [(i1 + i, j1 + j) for i, j in _pairs(fixed[i1:i2], buggy[j1:j2])]
    at_fixed, at_buggy = i1, j1
    for i, j in [*pairs, (i2, j2)]:
        if at_fixed < i or at_buggy < j:
            yield Change(
                kernel,
                "structural",
                fixed[at_fixed:i],
                buggy[at_buggy:j],
                fixed[:at_fixed] + buggy[at_buggy:j] + fixed[i:],
            )
        if i < i2:
            target = fixed[:i] + (buggy[j],) + fixed[i + 1 :]
            yield Change(kernel, "replaced", (fixed[i],), (buggy[j],), target)
        at_fixed, at_buggy = i + 1, j + 1


def changes(kernel: str, fixed: tuple[str, ...], buggy: tuple[str, ...]) -> list[Change]:
    """What the fix changed in one kernel, as changes to undo in the fixed statements."""
    matcher = difflib.SequenceMatcher(None, fixed, buggy, autojunk=False)
    return [
        change
        for opcode in matcher.get_opcodes()
        if opcode[0] != "equal"
        for change in _hunk_changes(kernel, fixed, buggy, opcode)
    ]


# -- one bug -----------------------------------------------------------------------------


@dataclass
class KernelFile:
    """One file of a bug at both commits: its changes, and what the mutants must match."""

    path: str
    fixed_source: str
    changes: list[Change] = field(default_factory=list)
    buggy: dict[str, tuple[str, ...]] = field(default_factory=dict)  # kernel -> statements
    def_lines: dict[str, int] = field(default_factory=dict)  # kernel -> its ``def`` line
    notes: list[str] = field(default_factory=list)


def read_file(directory: str, bug: dict, path: str) -> KernelFile:
    """A bug's file at the fix and its parent, with its kernels' changes."""
    fixed_source = git(directory, "show", f"{bug['fix_commit']}:{path}")
    if fixed_source is None:
        raise NotRun(f"{path} missing at the fix commit")
    buggy_source = git(directory, "show", f"{bug['parent_commit']}:{path}")
    kernel_file = KernelFile(path, fixed_source)
    if buggy_source is None:
        kernel_file.notes.append(f"{path} missing at the parent commit: its kernels are new")
    try:
        fixed_functions = functions_named(fixed_source, bug["kernels"])
        buggy_functions = functions_named(buggy_source or "", bug["kernels"])
    except SyntaxError as exc:
        raise NotRun(f"{path} does not parse: {exc}") from None
    jit = {f.name for f in ast_jit_functions(ast.parse(fixed_source))}
    for name, function in fixed_functions.items():
        if name not in jit:
            kernel_file.notes.append(f"{name} is not a jit function: the tool never mutates it")
        buggy_function = buggy_functions.get(name)
        buggy = flatten(buggy_function) if buggy_function else ()
        kernel_file.buggy[name] = buggy
        kernel_file.def_lines[name] = function.lineno
        kernel_file.changes += changes(name, flatten(function), buggy)
        if buggy_function and ast.dump(buggy_function.args) != ast.dump(function.args):
            kernel_file.notes.append(f"{name}: the fix changed its parameters too")
    return kernel_file


def _mutant_function(source: str, name: str, def_line: int) -> ast.FunctionDef | None:
    """The function ``name`` of a mutated file whose ``def`` is on ``def_line``: a mutant
    rewrites inside a function, so the lines before it never move."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == name and node.lineno == def_line:
            return node
    return None


def reproductions(kernel_file: KernelFile, operators: list) -> tuple[int, list[tuple[Mutant, int]]]:
    """How many mutants the file's changed kernels have, and (mutant, index of the change
    it reproduces) for each of them that reproduces one."""
    wanted: dict[tuple[str, tuple[str, ...]], list[int]] = defaultdict(list)
    for index, change in enumerate(kernel_file.changes):
        wanted[change.kernel, change.target].append(index)
        wanted[change.kernel, kernel_file.buggy[change.kernel]].append(index)
    kernels = {change.kernel for change in kernel_file.changes}
    mutants = [
        mutant
        for mutant in generate_mutants(kernel_file.fixed_source, kernel_file.path, operators)
        if mutant.function in kernels
    ]
    found = []
    for mutant in mutants:
        def_line = kernel_file.def_lines[mutant.function]
        function = _mutant_function(mutant.source, mutant.function, def_line)
        if function is not None:
            key = (mutant.function, flatten(function))
            found += [(mutant, index) for index in dict.fromkeys(wanted.get(key, ()))]
    return len(mutants), found


def classify(all_changes: Sequence[Change], reproduced: set[int]) -> str:
    """exact, partial, no or structural, as the module's docstring says."""
    if len(reproduced) == len(all_changes):
        return "exact"
    if reproduced:
        return "partial"
    if any(change.kind == "structural" for change in all_changes):
        return "structural"
    return "no"


def judge(bug: dict, mirrors: str, operators: list) -> dict:
    """One bug's row of ``summary.json``; a bug that cannot be judged says why."""
    row = {"id": bug["id"], "repo": bug["repo"], "family": bug["family"]}
    try:
        return {**row, **_judged(bug, mirrors, operators)}
    except NotRun as exc:
        return {**row, "textual": "not-run", "reason": str(exc)}


def _judged(bug: dict, mirrors: str, operators: list) -> dict:
    files = [read_file(_mirror(bug, mirrors), bug, path) for path in bug["files"]]
    all_changes = [change for f in files for change in f.changes]
    if not all_changes:
        raise NotRun("the named kernels' statements are the same at both commits")
    mutants, compared = _reproducing_mutants(files, operators)
    reproduced = {m["change"] for m in mutants}
    return {
        "textual": classify(all_changes, reproduced),
        "operators": sorted({m["operator"] for m in mutants}),
        "mutants": mutants,
        "compared": compared,  # the mutants of the changed kernels, all compared
        "changed": [
            {**c.to_json(), "reproduced": i in reproduced} for i, c in enumerate(all_changes)
        ],
        "rewrite": [c.rewrite() for i, c in enumerate(all_changes) if i not in reproduced],
        "notes": _notes(bug, files),
    }


def _mirror(bug: dict, mirrors: str) -> str:
    """The bug's git directory, holding both its commits."""
    directory = git_dir(mirrors, bug["repo"])
    if directory is None:
        raise NotRun(f"no mirror of {bug['repo']} under {mirrors}")
    for key in ("fix_commit", "parent_commit"):
        if not has_commit(directory, bug[key]):
            raise NotRun(f"{key} {bug[key]} is not in the mirror")
    return directory


def _reproducing_mutants(files: Sequence[KernelFile], operators: list) -> tuple[list[dict], int]:
    """The rows of the mutants that reproduce a change (numbered across the bug's files),
    and how many mutants the changed kernels have in all."""
    rows, compared, offset = [], 0, 0  # offset: the index of the file's first change
    for kernel_file in files:
        count, found = reproductions(kernel_file, operators)
        compared += count
        rows += [_mutant_row(m, kernel_file.path, offset + index) for m, index in found]
        offset += len(kernel_file.changes)
    return rows, compared


def _notes(bug: dict, files: Sequence[KernelFile]) -> list[str]:
    notes = [note for f in files for note in f.notes]
    seen = {name for f in files for name in f.buggy}
    unknown = [name for name in bug["kernels"] if name not in seen]
    if unknown:
        notes.append(f"not found at the fix commit: {', '.join(unknown)}")
    return notes


def _mutant_row(mutant: Mutant, path: str, change: int) -> dict:
    return {
        "id": mutant.id,
        "operator": mutant.operator,
        "kernel": mutant.function,
        "file": path,
        "line": mutant.line,
        "change": change,
    }


# -- report ------------------------------------------------------------------------------


LEGEND = (
    "Does one of the tool's mutants of the fixed kernels write the buggy code back? "
    "`(k/n changes)`: the fix's changed statements (or runs of statements) that some mutant "
    "reproduces. The last column shows what no mutant reproduces (at most three), as the "
    "rewrite of the fixed code that would: `add`/`drop` where the fix removed/added "
    "statements. Details per change and per mutant: `summary.json`."
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(rows: Sequence[dict]) -> str:
    lines = [
        "| bug | family | textual coupling | operators | rewrite needed (fixed -> buggy) |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        rewrite = row.get("reason") or "; ".join(row.get("rewrite", [])[:3])
        if len(row.get("rewrite", [])) > 3:
            rewrite += f"; and {len(row['rewrite']) - 3} more"
        coupling = row["textual"]
        if "changed" in row:
            done = sum(c["reproduced"] for c in row["changed"])
            coupling += f" ({done}/{len(row['changed'])} changes)"
        operators = ", ".join(row.get("operators", [])) or "-"
        cells = [row["id"], row["family"], coupling, operators, rewrite or "-"]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def counts(rows: Sequence[dict]) -> str:
    """One paragraph: the outcomes overall and by family, and the families no operator
    reaches (no bug of theirs with a reproducing mutant)."""
    total = Counter(row["textual"] for row in rows)
    overall = ", ".join(f"{total[o]} {o}" for o in OUTCOMES if total[o])
    by_family: dict[str, Counter] = defaultdict(Counter)
    for row in rows:
        by_family[row["family"]][row["textual"]] += 1
    families = "; ".join(
        f"{family}: " + ", ".join(f"{n} {o}" for o, n in sorted(c.items()))
        for family, c in sorted(by_family.items())
    )
    reached = {r["family"] for r in rows if r["textual"] in ("exact", "partial")}
    judged = {r["family"] for r in rows if r["textual"] != "not-run"}
    unreached = ", ".join(sorted(judged - reached)) or "none"
    return (
        f"Of the {len(rows)} bugs: {overall}. By family: {families}. "
        f"Families of real bugs that no operator reaches (no bug of theirs with a mutant that "
        f"writes back any of its buggy statements): {unreached}."
    )


def write(out: str, rows: list[dict], execution: str = "") -> str:
    """``summary.json`` and ``summary.md``; ``execution``: part 2's section, where it ran."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "summary.json"), "w") as fh:
        json.dump(rows, fh, indent=1)
        fh.write("\n")
    text = f"{table(rows)}\n\n{counts(rows)}\n"
    with open(os.path.join(out, "summary.md"), "w") as fh:
        fh.write(f"# Real faults: textual coupling\n\n{LEGEND}\n\n{text}")
        if execution:
            fh.write(f"\n## Execution coupling\n\n{execution}")
    return text + (f"\n{execution}" if execution else "")


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", required=True, help="the real-faults catalog.json")
    parser.add_argument("--mirrors", required=True, help="the folder of fetched git mirrors")
    parser.add_argument("--out", required=True, help="where summary.json and summary.md go")
    part2 = parser.add_argument_group("part 2, execution coupling (real_faults_execution.py)")
    part2.add_argument(
        "--execution",
        action="store_true",
        help="also run the tests: the parent's and the fix's, and mutant-gate",
    )
    part2.add_argument(
        "--bugs",
        help="ID,...: the bugs to run (default: every bug whose fix "
        "changed a test file); the others keep OUT's earlier execution entries",
    )
    part2.add_argument(
        "--work", default=".realfaults/work", help="scratch trees, reports and the tool's cache"
    )
    part2.add_argument(
        "--mode",
        choices=("auto", "interpret", "compiled"),
        default="auto",
        help="auto: compiled where CUDA is, else the interpreter",
    )
    part2.add_argument("-j", "--jobs", type=int, default=2, help="mutant-gate's workers")
    part2.add_argument(
        "--case-time",
        type=float,
        default=5.0,
        help="mutant-gate's --case-time, and pytest-timeout's per test",
    )
    part2.add_argument("--limit", type=float, default=600.0, help="seconds per pytest run")
    part2.add_argument(
        "--run-limit", type=float, default=900.0, help="seconds per mutant-gate run or rerun"
    )
    part2.add_argument(
        "--checks",
        action="store_true",
        help="keep mutant-gate's diff-oracle and tolerance stages (off: they change no verdict)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    with open(args.catalog) as fh:
        catalog = json.load(fh)
    operators = select_operators(None)
    rows = []
    for bug in catalog:
        rows.append(judge(bug, args.mirrors, operators))
        print(f"{bug['id']}: {rows[-1]['textual']}", file=sys.stderr)
    execution = _execution(args, catalog, rows) if args.execution else ""
    print(write(args.out, rows, execution))
    return 0


def _execution(args: argparse.Namespace, catalog: list[dict], rows: list[dict]) -> str:
    """Part 2 for the chosen bugs, into their rows; the other rows keep the execution
    entries ``summary.json`` in OUT already has. Returns its table."""
    import real_faults_execution as ex

    if args.mode == "auto":
        import torch

        args.mode = "compiled" if torch.cuda.is_available() else "interpret"
    args.work = os.path.abspath(args.work)
    earlier = {}
    if os.path.isfile(os.path.join(args.out, "summary.json")):
        with open(os.path.join(args.out, "summary.json")) as fh:
            earlier = {r["id"]: r["execution"] for r in json.load(fh) if "execution" in r}
    chosen = args.bugs.split(",") if args.bugs else None
    for bug, row in zip(catalog, rows, strict=True):
        directory = git_dir(args.mirrors, bug["repo"])
        tests = directory is not None and any(
            ex.is_test_path(p) and p not in bug["files"]
            for _, p in ex.changed_files(directory, bug["parent_commit"], bug["fix_commit"])
        )
        if chosen is None and tests or bug["id"] in (chosen or ()):
            print(f"{bug['id']}: execution ({args.mode}) ...", file=sys.stderr)
            if directory is None:
                row["execution"] = {"status": "not-run", "mode": args.mode,
                                    "reason": f"no mirror of {bug['repo']}"}  # fmt: skip
            else:
                row["execution"] = ex.execute(bug, directory, row, args)
            said = row["execution"].get("coupling") or row["execution"].get("reason")
            print(f"{bug['id']}: {row['execution']['status']}: {said}", file=sys.stderr)
        elif bug["id"] in earlier:
            row["execution"] = earlier[bug["id"]]
    return f"{ex.LEGEND}\n\n{ex.table(rows)}\n"


if __name__ == "__main__":
    sys.exit(main())
