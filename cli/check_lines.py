"""How the command line shows the compile-check, the claims' evidence, the diff-oracle and
the tolerance check (rich markup)."""

from __future__ import annotations

from rich.markup import escape

from mutant_gate.engine.events import CheckFinished


def counted(n: int, word: str, plural: str | None = None) -> str:
    """``1 survivor``, ``2 survivors``: a count with its noun in agreement (``plural``
    where adding an s is wrong: ``entry``, ``entries``)."""
    return f"{n} {word if n == 1 else plural or word + 's'}"


def event_line(event: CheckFinished) -> str:
    """One log line for a check's result on a mutant, or for the whole check."""
    text = escape(event.summary)
    if event.mutant is None:
        return f"[bold]{text}[/]"
    where = f"{event.check} {event.mutant.id}"
    if event.summary.startswith("CONTRADICTION"):
        return f"[bold red]{where}: {text}[/]"
    if event.summary.startswith("equivalence claim refused"):
        return f"[yellow]{where}: {text}[/]"
    if event.summary.startswith("not compilable"):
        return f"[magenta]{where}: {text}[/]"
    return f"[dim]{where}: {text}[/]"


def _oracle_counts(oracle: dict, verbose: bool) -> list[str]:
    """The diff-oracle's part of the checks' counts line: by default only what the
    survivor lines do not say (mutants not compared, contradicted claims)."""
    if oracle.get("skipped"):
        return [f"diff-oracle skipped ({escape(oracle['skipped'])})"]
    if not (verbose or oracle["errors"] or oracle["contradictions"]):
        return []
    dependent = oracle["interpreter_dependent"]
    counts = [
        f"{oracle['identical']} oracle-identical ({dependent} interpreter-dependent), "
        f"{oracle['differs']} oracle-differs"
    ]
    if oracle["errors"]:
        counts.append(f"{oracle['errors']} not compared")
    if oracle["contradictions"]:
        contradicted = counted(oracle["contradictions"], "EQUIVALENT claim")
        counts.append(f"[bold red]{contradicted} contradicted[/]")
    return counts


def summary_lines(report: dict, verbose: bool = False) -> list[str]:
    """Per-mutant check results, then the counts line; nothing when no check ran. The
    oracle's sentence on each survivor (the survivor lines say its kind) and the checks'
    time only with ``verbose``, but for a contradiction."""
    checks = report.get("checks") or {}
    if not checks:
        return []
    rows = report["mutants"]
    lines = _mutant_lines(rows, verbose)
    compiled, oracle, claims = checks.get("compile"), checks.get("oracle"), checks.get("claims")
    counts = []
    if compiled is not None:
        if compiled.get("skipped"):
            counts.append(f"compile-check skipped ({escape(compiled['skipped'])})")
        else:
            targets = ", ".join(compiled["checked_targets"])
            counts.append(f"{compiled['not_compilable']} not_compilable ({targets})")
    if oracle is not None:
        counts += _oracle_counts(oracle, verbose)
    if claims is not None:
        counts.append(
            f"{claims['backed']} of {counted(claims['claims'], 'equivalence claim')} backed "
            "by execution"
            + (f", [bold]{claims['refused']} refused[/]" if claims["refused"] else "")
        )
        lines += _refused_claims(rows)
    counts += _tolerance_counts(checks.get("tolerance"), verbose)
    if counts:
        lines.append(f"checks on {counted(_checked(checks), 'survivor')}: " + "; ".join(counts))
    timing = []
    if compiled is not None and compiled.get("seconds_per_survivor") is not None:
        timing.append(f"compile {compiled['seconds_per_survivor']:.2f} s")
    if oracle is not None and oracle.get("seconds_per_mutant") is not None:
        timing.append(f"oracle {oracle['seconds_per_mutant']:.2f} s")
    if timing and verbose:
        lines.append(f"[dim]check time per survivor: {', '.join(timing)}[/]")
    return lines


def _checked(checks: dict) -> int:
    """How many survivors the checks looked at: the compile-check's, else the oracle's,
    else the claims', else the tolerance check's count."""
    compiled, oracle, claims = checks.get("compile"), checks.get("oracle"), checks.get("claims")
    if compiled is not None:
        return compiled["survivors"]
    if oracle is not None:
        return oracle["mutants"]
    if claims is not None:
        return claims["claims"]
    return (checks.get("tolerance") or {}).get("mutants", 0)


def _tolerance_counts(tolerance: dict | None, verbose: bool) -> list[str]:
    """The tolerance check's part of the counts line: how many survivors a checked
    tighter tolerance kills, of those it looked at, and how many proposals it checked;
    by default only where it checked one (the survivor lines say which)."""
    if tolerance is None or not (verbose or tolerance.get("proposals")):
        return []
    return [
        f"{tolerance['hidden']} hidden by tolerance "
        f"({counted(tolerance['proposals'], 'tighter tolerance')} checked)"
    ]


def _mutant_lines(rows: list[dict], verbose: bool) -> list[str]:
    """The not-compilable mutants, then the oracle's sentences (a contradiction always)."""
    lines = [
        f"[magenta]not_compilable[/] {m['id']} {m['operator']} line {m['line']}: "
        f"{escape(m['reason'])}"
        for m in rows
        if m["verdict"] == "not_compilable"
    ]
    for m in rows:
        oracle = m.get("oracle")
        if not oracle or not (verbose or oracle.get("contradiction")):
            continue
        style = "bold red" if oracle.get("contradiction") else "dim"
        lines.append(f"[{style}]oracle {m['id']} ({m['verdict']}): {escape(oracle['sentence'])}[/]")
    return lines


def _refused_claims(rows: list[dict]) -> list[str]:
    """One line per equivalence claim execution refused."""
    return [
        f"[yellow]claim refused[/] {m['id']} {m['operator']} line {m['line']}: "
        f"{escape((claim.get('evidence') or {}).get('why', ''))}"
        for m in rows
        for claim in m.get("claims") or []
        if (claim.get("evidence") or {}).get("backed") is False
    ]
