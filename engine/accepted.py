"""Accepted survivors: the team's record of survivors it looked at and let stand.

A committed TOML file (``mutant-gate-baseline.toml`` by default; ``--accepted PATH`` or
``baseline = ...`` in ``[tool.mutant-gate]``) lists them, each with a reason and the
mutant's content hash::

    version = 1

    [[accepted]]
    hash = "3f0c..."          # content_hash: what the entry covers
    reason = "BLOCK always divides n here: the wrapper pads"
    id = "8dc9e4fa6a81"       # the rest is for people reading the file
    kernel = "kernels/two_kernels.py"
    operator = "mask-drop"
    function = "scale_kernel"
    line = 28
    added = "2026-12-02"

The hash covers the operator, the change (before and after), where it is inside its
function, and the whole text of that function as it was: edit anything in the function
and the entry no longer covers the mutant, which comes back as a plain survivor. Lines
added above the function move it without breaking the entry. (A mutant's id hashes the
whole mutated file, so it changes with any edit anywhere: the id is kept only to read.)

A covered survivor stays ``survived``: no verdict changes. Its row gets the section
``accepted`` and the score leaves it out of the adjusted score's denominator (listed in
``score.accepted``, never counted as killed); the run section ``accepted`` says which
file was read and which of its entries no longer match a mutant of the run.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import time
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

from .errors import BadInput
from .vocabulary import Verdict

VERSION = 1
HEADER = (
    "# Survivors the team accepted: --fail-under leaves them out of the adjusted score.\n"
    "# An entry covers its mutant while the function's code is unchanged (`hash`).\n"
    '# Add one with: mutant-gate accept RUN ID --reason "why it may survive"\n'
    f"version = {VERSION}\n"
)


@dataclass(frozen=True)
class Entry:
    hash: str
    reason: str
    id: str = ""
    kernel: str = ""
    operator: str = ""
    function: str = ""
    line: int = 0
    added: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def _function_span(source: str, name: str, line: int) -> tuple[int, int] | None:
    """(first line, last line) of the innermost function ``name`` holding ``line``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    best = None
    for first, end in _spans_named(tree, name):
        if first <= line <= end and (best is None or first >= best[0]):
            best = (first, end)
    return best


def _spans_named(tree: ast.AST, name: str) -> Iterator[tuple[int, int]]:
    """(first line, last line) of each function ``name`` in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            yield node.lineno, node.end_lineno or node.lineno


def content_hash(source: str, row: dict) -> str:
    """The hash an entry covers its mutant by: operator, change, its place inside the
    function, and the function's text (``source``: the original kernel file)."""
    lines = source.replace("\r\n", "\n").split("\n")
    line = int(row.get("line") or 0)
    span = _function_span(source, str(row.get("function") or ""), line)
    first, last = span if span is not None else (1, len(lines))
    text = "\n".join(ln.rstrip() for ln in lines[first - 1 : last])
    blob = json.dumps(
        [
            row.get("operator"),
            row.get("function"),
            text,
            line - first,
            row.get("col"),
            row.get("before"),
            row.get("after"),
        ]
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


# -- the file --------------------------------------------------------------------------
def load(path: str) -> list[Entry]:
    """The entries of ``path``; ``BadInput`` (one line) for a missing or malformed file."""
    data = _read_toml(path)
    if data.get("version", VERSION) != VERSION:
        raise BadInput(f"{path}: baseline version {data.get('version')!r} is not {VERSION}")
    unknown = set(data) - {"version", "accepted"}
    if unknown:
        raise BadInput(f"{path}: unknown key {sorted(unknown)[0]!r} (expected [[accepted]])")
    items = data.get("accepted", [])
    if not isinstance(items, list):
        raise BadInput(f"{path}: `accepted` must be an array of tables ([[accepted]])")
    entries = []
    for n, item in enumerate(items, 1):
        _check_entry(item, f"{path}: accepted entry {n}")
        entries.append(Entry(**{k: v for k, v in item.items()}))
    return entries


def _read_toml(path: str) -> dict:
    """The baseline file read as TOML; ``BadInput`` where it is missing, unreadable or
    not TOML."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise BadInput(
            f"--accepted: no such file: {path} (`mutant-gate accept` creates it)"
        ) from None
    except OSError as exc:
        raise BadInput(f"--accepted: cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path}: not valid TOML: {exc}") from None


def _check_entry(item: object, where: str) -> None:
    """``BadInput`` (said at ``where``) unless ``item`` is a table of ``Entry``'s keys with
    a hex hash, a reason and a whole line number."""
    fields = set(Entry.__dataclass_fields__)
    if not isinstance(item, dict):
        raise BadInput(f"{where}: not a table")
    if set(item) - fields:
        raise BadInput(f"{where}: unknown key {sorted(set(item) - fields)[0]!r}")
    if not isinstance(item.get("hash"), str) or not re.fullmatch(r"[0-9a-f]{16,64}", item["hash"]):
        raise BadInput(f"{where}: `hash` must be the hex content hash `accept` writes")
    if not isinstance(item.get("reason"), str) or not item["reason"].strip():
        raise BadInput(f"{where}: `reason` must say why the survivor is accepted")
    if not isinstance(item.get("line", 0), int):
        raise BadInput(f"{where}: `line` must be a whole number")


def _toml_string(text: str) -> str:
    # a TOML basic string: JSON's escapes, plus DEL, which TOML wants escaped too
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def entry_toml(entry: Entry) -> str:
    out = ["", "[[accepted]]"]
    for key, value in entry.to_json().items():
        if value in ("", 0) and key not in ("hash", "reason"):
            continue
        out.append(
            f"{key} = {value}" if isinstance(value, int) else f"{key} = {_toml_string(value)}"
        )
    return "\n".join(out) + "\n"


def add(path: str, new: Sequence[Entry]) -> tuple[list[Entry], list[Entry]]:
    """Append ``new`` entries to ``path`` (created with a header when missing), keeping
    what is there (comments too); returns (added, already covered by an entry)."""
    existing = load(path) if os.path.exists(path) else []
    added, present = _new_and_present(existing, new)
    if not added:
        return added, present
    try:
        text = _text_to_extend(path) + "".join(entry_toml(e) for e in added)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror}") from None
    load(path)  # what was written reads back
    return added, present


def _new_and_present(
    existing: Sequence[Entry], new: Sequence[Entry]
) -> tuple[list[Entry], list[Entry]]:
    """``new`` parted into the entries to add and those whose hash an existing entry (or
    an earlier new one) already has."""
    known = {e.hash for e in existing}
    added, present = [], []
    for entry in new:
        (present if entry.hash in known else added).append(entry)
        known.add(entry.hash)
    return added, present


def _text_to_extend(path: str) -> str:
    """What ``path`` holds, ending in a newline (the header where it is empty or missing)."""
    text = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    if not text.strip():
        text = HEADER
    if not text.endswith("\n"):
        text += "\n"
    return text


def entry_for(report: dict, row: dict, reason: str, kernel: str | None = None) -> Entry:
    """The entry accepting ``row`` of ``report`` (its kernel source is in the report)."""
    source = (report.get("kernel") or {}).get("source")
    if not isinstance(source, str):
        raise BadInput(f"run {report.get('run_id')}: its report holds no kernel source")
    return Entry(
        hash=content_hash(source, row),
        reason=reason.strip(),
        id=str(row.get("id")),
        kernel=kernel or str((report.get("kernel") or {}).get("path") or ""),
        operator=str(row.get("operator") or ""),
        function=str(row.get("function") or ""),
        line=int(row.get("line") or 0),
        added=time.strftime("%Y-%m-%d"),
    )


def accept(report: dict, rows: Sequence[dict], reason: str, path: str) -> tuple[list, list]:
    """Accept survivor ``rows`` of ``report`` in the baseline file ``path`` (the command
    line's ``accept`` and the explorer's ``a``); returns (added, already present)."""
    if not reason or not reason.strip():
        raise BadInput("an accepted survivor needs a reason: say why it may stay")
    if os.path.isdir(path):
        raise BadInput(f"--accepted: is a directory: {path}")
    _only_survivors(rows)
    kernel = _kernel_beside(report, path)
    return add(path, [entry_for(report, row, reason, kernel) for row in rows])


def _kernel_beside(report: dict, path: str) -> str:
    """The report's kernel path as an entry records it: relative to the baseline file's
    folder where the report has it absolute ("" where it has none)."""
    kernel = (report.get("kernel") or {}).get("path") or ""
    if kernel and os.path.isabs(kernel):
        kernel = os.path.relpath(kernel, os.path.dirname(os.path.abspath(path)))
    return kernel


def _only_survivors(rows: Sequence[dict]) -> None:
    """``BadInput`` naming the first row that is not a survivor (only survivors are accepted)."""
    for row in rows:
        if row.get("verdict") != Verdict.SURVIVED.value:
            raise BadInput(
                f"mutant {row.get('id')} is {row.get('verdict')}, not a survivor: only "
                "survivors are accepted"
            )


# -- in a run ------------------------------------------------------------------------------
def mark(
    ledger, source: str, kernel_path: str, mutants: Sequence, entries: Sequence[Entry], path: str
) -> dict:
    """Record which survivors ``entries`` cover (row section ``accepted``) and the run
    section ``accepted``; no verdict changes. Returns the run section."""
    by_hash = {e.hash: e for e in entries}
    covered, killed, matched = [], [], set()
    for mutant in mutants:
        row = {
            "operator": mutant.operator,
            "function": mutant.function,
            "line": mutant.line,
            "col": mutant.col,
            "before": mutant.before,
            "after": mutant.after,
        }
        entry = by_hash.get(content_hash(source, row))
        ledger.drop_row(mutant.id, "accepted")
        if entry is None:
            continue
        matched.add(entry.hash)
        if ledger.verdict(mutant.id) is Verdict.SURVIVED:
            ledger.put_row(
                mutant.id,
                "accepted",
                {"reason": entry.reason, "hash": entry.hash, "added": entry.added},
            )
            covered.append(mutant.id)
        else:
            killed.append(mutant.id)
    stale = _unmatched(entries, matched, kernel_path)
    section = {
        "file": path,
        "entries": len(entries),
        "survivors": covered,
        "no_longer_survive": killed,
        "unmatched": stale,
    }
    ledger.put_section("accepted", section)
    return section


def _unmatched(entries: Sequence[Entry], matched: set[str], kernel_path: str) -> list[dict]:
    """The entries of this kernel file (or of no named one) that matched no mutant of
    the run, as the run section lists them."""
    name = os.path.basename(kernel_path)
    return [
        {
            "hash": e.hash,
            "id": e.id,
            "operator": e.operator,
            "function": e.function,
            "line": e.line,
            "reason": e.reason,
        }
        for e in entries
        if e.hash not in matched and (not e.kernel or os.path.basename(e.kernel) == name)
    ]
