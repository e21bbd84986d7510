"""The console's survivor lines: one line for each survivor the run leaves the user,
sorted by what execution showed (the row's ``survivor``): hidden by tolerance first (a
tighter tolerance at a test line kills it: the line says which and how tight), then
outputs that differ (a test gap: which output, by how much), then no difference
observed, grouped by why. A survivor no check explained is said as before, with nothing
new. After them, the per-test-line view: the assertions whose tolerance hid the most."""

from __future__ import annotations

import textwrap

from rich.markup import escape

from mutant_gate.engine.formats.words import tolerance_view
from mutant_gate.engine.vocabulary import Verdict

#: the widest a survivor line gets, in characters on screen
WIDTH = 80
#: what the lines under a kind's header are indented by
INDENT = "  "

#: each kind's header (``{n}``: how many)
HEADERS = {
    "hidden_by_tolerance": "[red]hidden by tolerance[/]: {n} (a test gap: tighten the assertion "
    "named under each)",
    "differs": "[red]outputs differ[/], the checks pass: {n} (a test gap: check those outputs)",
    "identical": "[yellow]no difference observed[/]: {n} (still survivors: no proof)",
    "not_checked": "[dim]not checked by the diff-oracle[/]: {n}",
}
#: the kinds in the order they are listed: test gaps first
KINDS = tuple(HEADERS)
#: the kinds some check explained (a run where none did lists its survivors plainly)
EXPLAINED = ("hidden_by_tolerance", "differs", "identical")
#: an identical survivor's why, shortly, by its ``reason`` (the JSON has it in full)
SHORT = {
    "masked_lanes": "masked-off lanes only, which a GPU never stores",
    "never_stored": "changed values never reach an output",
    "same_values": "the same values on {launches}",
    "identical": "identical outputs on {launches}",
}


def first_change(before: str, after: str) -> tuple[str, str]:
    """A rewrite by its first changed line: ``before`` and ``after``'s first lines that
    differ, stripped (a multi-line block shows by the line that changed)."""
    old, new = str(before).splitlines() or [""], str(after).splitlines() or [""]
    for a, b in zip(old, new, strict=False):
        if a.strip() != b.strip():
            return a.strip(), b.strip()
    if len(old) != len(new):
        i = min(len(old), len(new))
        extra = (old if len(old) > len(new) else new)[i].strip()
        return (extra, "(removed)") if len(old) > len(new) else ("(nothing)", extra)
    return old[0].strip(), new[0].strip()


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut with an ellipsis."""
    if len(text) <= width:
        return text
    return text[: max(0, width - 1)] + "…"


#: the fewest characters a change is shown in (else a line gives its room to the why)
MIN_CHANGE = 16
#: characters kept before the first difference when a change is shortened
CONTEXT = 10


def _common(a: str, b: str) -> tuple[int, int]:
    """The lengths of ``a`` and ``b``'s common start and (not overlapping it) end."""
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    s = 0
    while s < min(len(a), len(b)) - p and a[-1 - s] == b[-1 - s]:
        s += 1
    return p, s


def _around(a: str, b: str, p: int, s: int, context: int, end: bool) -> tuple[str, str]:
    """``a`` and ``b`` from ``context`` characters before their first difference (from
    a word's start when that costs a few more), with their common end or without it."""
    start = max(0, p - context)
    if context:
        word = start
        while word > 0 and a[word - 1] not in " (,[=" and start - word < 6:
            word -= 1
        start = word if word == 0 or a[word - 1] in " (,[=" else start
    lead = "…" if start else ""
    if end or s <= 1:
        return lead + a[start:], lead + b[start:]
    # the common end goes but its last character (a closing bracket)
    return lead + a[start : len(a) - s + 1] + "…", lead + b[start : len(b) - s + 1] + "…"


def _shorten(a: str, b: str, room: int) -> tuple[str, str]:
    """``a`` and ``b`` around where they differ, in about ``room`` characters together:
    less and less of what they share (the start's context, then the common end) until
    they fit, and each side cut only when even their differing middles do not."""
    p, s = _common(a, b)
    inserted = min(len(a), len(b)) - p - s <= 0  # one side adds to the other: show where
    tries = ((CONTEXT, True), (CONTEXT, False), (4, False), (2 if inserted else 0, False))
    for context, end in tries:
        x, y = _around(a, b, p, s, context, end)
        if len(x) + len(y) <= room:
            return x, y
    half = room // 2
    if len(x) <= half:
        return x, cut(y, room - len(x))
    if len(y) <= half:
        return cut(x, room - len(y)), y
    return cut(x, half), cut(y, room - half)


def change_text(before: str, after: str, width: int) -> str:
    """``before -> after`` by the first changed line, in at most ``width`` characters
    (around where the two differ when the whole does not fit)."""
    a, b = first_change(before, after)
    room = max(8, width - len(" -> "))
    if len(a) + len(b) > room:
        a, b = _shorten(a, b, room)
    return f"{a} -> {b}"


def _launches(n: int) -> str:
    return {1: "the only launch", 2: "both launches"}.get(n, f"all {n} launches")


def short_why(kind: dict) -> str:
    """The survivor's why in a few words: the output that differs and by how much, or
    why no difference was seen."""
    if kind.get("kind") == "differs":
        found = kind.get("outputs") or []
        if not found:
            return "launches diverge" if kind.get("reason") == "divergence" else "launch errors"
        top = found[0]
        by = top.get("max_abs")
        size = f"{by:.3g}" if isinstance(by, int | float) else "NaN/inf"
        more = f", +{len(found) - 1}" if len(found) > 1 else ""
        return f"{top.get('argument')} off by {size}{more}"
    said = SHORT.get(kind.get("reason") or "", "")
    return said.format(launches=_launches(int(kind.get("launches") or 0)))


def _where(row: dict, functions: int) -> str:
    where = f"line {row['line']}"
    return f"{row['function']} {where}" if functions > 1 else where


def _line(row: dict, functions: int, why: str, indent: str, lead: bool = False) -> str:
    """One survivor's line (rich markup) fitting ``WIDTH`` on screen; ``lead``: it
    starts with ``survived`` (no header says so)."""
    head = f"{row['id']} {row['operator']} {_where(row, functions)}: "
    tail = f"  ({why})" if why else ""
    room = WIDTH - len(indent) - len("survived " if lead else "") - len(tail)
    if why and room - len(head) < MIN_CHANGE:  # no room to show the change: the why says it
        room, tail = room + len(tail), ""
        body = escape(cut(head + why, room))
    else:
        change = change_text(row.get("before", ""), row.get("after", ""), room - len(head))
        body = escape(cut(head + change, room))
    return (
        indent
        + ("[red]survived[/] " if lead else "")
        + body
        + (f"[dim]{escape(tail)}[/]" if tail else "")
    )


def survivor_lines(report: dict) -> list[str]:
    """Rich markup lines for each survivor not accepted in the baseline file: a header
    per kind (hidden by tolerance, outputs differ, then no difference observed by why,
    then not checked), each survivor on one line under it (a hidden one with its
    tolerance line under that). Where no check explained any, the plain lines:
    ``survived ID operator line N: before -> after``."""
    rows = [
        m for m in report["mutants"] if m["verdict"] == Verdict.SURVIVED and not m.get("accepted")
    ]
    functions = len((report.get("kernel") or {}).get("jit_functions") or [])
    kinds = {m["id"]: m.get("survivor") or {"kind": "not_checked"} for m in rows}
    if all(k.get("kind") not in EXPLAINED for k in kinds.values()):
        return [_line(m, functions, "", "", lead=True) for m in rows]
    lines = []
    for name in KINDS:
        members = [m for m in rows if kinds[m["id"]].get("kind") == name]
        if not members:
            continue
        lines.append(HEADERS[name].format(n=len(members)))
        if name == "identical":  # grouped by why: the why is the group's
            lines += _identical(members, kinds, functions)
            continue
        if name == "hidden_by_tolerance":  # the change, then the line that hid it
            lines += _hidden(members, kinds, functions)
            continue
        for m in members:
            why = short_why(kinds[m["id"]]) if name == "differs" else ""
            lines.append(_line(m, functions, why, INDENT))
    return lines


def _identical(members: list[dict], kinds: dict, functions: int) -> list[str]:
    """No difference observed, a line per why, then its survivors under it."""
    groups: dict[str, list[dict]] = {}
    for m in members:
        groups.setdefault(short_why(kinds[m["id"]]), []).append(m)
    lines = []
    for why, group in groups.items():
        lines.append(f"{INDENT}[dim]{escape(why)}:[/]")
        lines += [_line(m, functions, "", INDENT * 2) for m in group]
    return lines


def _hidden(members: list[dict], kinds: dict, functions: int) -> list[str]:
    """Hidden by tolerance: each survivor's line, then its tolerance line under it in
    full (which assertion, the errors seen, the tolerance that kills it), wrapped to
    ``WIDTH`` rather than cut: it is the change to make."""
    lines = []
    for m in members:
        lines.append(_line(m, functions, "", INDENT))
        why = str(kinds[m["id"]].get("why") or "")
        lines += [
            f"{INDENT * 2}[dim]{escape(part)}[/]"
            for part in textwrap.wrap(why, WIDTH - len(INDENT * 2))
        ]
    return lines


def tolerance_lines(report: dict) -> list[str]:
    """The per-test-line view after the survivors (rich markup): the test lines whose
    tighter tolerance, checked, kills survivors, most kills first; nothing where the
    tolerance check hid none."""
    view = tolerance_view(report)
    if not view:
        return []
    lines = ["[bold]what the tolerance hid[/], per test line:"]
    for line in view:  # wrapped to ``WIDTH``, each test line's words indented as one
        parts = textwrap.wrap(line, WIDTH - len(INDENT * 2))
        lines.append(f"{INDENT}{escape(parts[0])}")
        lines += [f"{INDENT * 2}{escape(part)}" for part in parts[1:]]
    return lines
