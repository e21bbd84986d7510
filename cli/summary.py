"""What ``mutant-gate run`` prints after the run: the table per operator, survivors and
errors, the score, the sandbox, the writers' tests and tokens (rich markup)."""

from __future__ import annotations

import os

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mutant_gate.cli.check_lines import counted
from mutant_gate.cli.survivors import survivor_lines, tolerance_lines
from mutant_gate.engine import predictions
from mutant_gate.engine.formats.words import percent, probe_spend, shown_claims, tolerance_route
from mutant_gate.engine.prices import price_words
from mutant_gate.engine.report import by_operator
from mutant_gate.engine.vocabulary import ORDER, STYLES, Verdict


def modes_summary(console: Console, modes: dict | None) -> None:
    """``--compare-modes``: every mutant whose verdict depends on the mode, with both
    reasons in full, in line order; ``--mode auto`` on a GPU: what the interpreter's
    second look killed."""
    if not modes:
        return
    if "auto" in modes:
        auto = modes["auto"]
        line = (
            f"mode auto: compiled; {auto['killed']} of "
            f"{counted(auto['rechecked'], 'mask, bound and offset survivor')} killed in "
            f"{auto.get('by', 'the interpreter')}"
        )
        console.print(line + (f" ({auto['note']})" if auto.get("note") else ""), highlight=False)
        return
    first, second = modes["compared"]
    if "skipped" in modes:
        console.print(f"[yellow]modes not compared: {modes['skipped']}[/]", highlight=False)
        return
    total = modes["agree"] + len(modes["disagreements"])
    console.print(
        f"modes: {first} and {second} agree on {modes['agree']} of {counted(total, 'mutant')}; "
        f"the table and the score show {first} mode's verdicts",
        highlight=False,
    )
    for d in sorted(modes["disagreements"], key=lambda d: (d["line"], d["operator"], d["id"])):
        a, b = d[first], d[second]
        console.print(
            f"  [bold yellow]{d['id']}[/] {d['operator']} line {d['line']}:\n"
            f"    {first}: {a['verdict']} ({escape(_why(a))})\n"
            f"    {second}: {b['verdict']} ({escape(_why(b))})",
            highlight=False,
        )


#: the original's slowest test cases the summary names (the JSON report has them all)
SLOWEST = 3


def _why(verdict: dict) -> str:
    by, reason = verdict.get("by"), verdict.get("reason") or ""
    return f"{by}: {reason}" if by and reason else by or reason


def summary(console: Console, report: dict, verbose: bool = False) -> None:
    """The table of verdicts by operator, the survivors, what the run found beside them;
    with ``verbose`` also how its time went, the sandbox and the shims (in the JSON
    report either way)."""
    rows = by_operator(report)
    # killed and survived always; the other verdicts where a mutant has one (80 columns)
    verdicts = [
        v.value
        for v in ORDER
        if v in (Verdict.KILLED, Verdict.SURVIVED) or any(row.get(v.value) for row in rows)
    ]
    table = Table(
        title=f"mutants of {os.path.basename(report['kernel']['path'])}", title_justify="left"
    )
    # a narrow terminal folds a name onto two lines rather than cutting it ("equival…")
    table.add_column("family", overflow="fold")
    table.add_column("operator", overflow="fold")
    table.add_column("total", justify="right")
    for v in verdicts:  # "not compilable": a header that wraps at a space, not mid-word
        table.add_column(v.replace("_", " "), justify="right", style=STYLES[v], overflow="fold")
    for row in rows:
        table.add_row(
            row["family"],
            row["operator"],
            str(row["total"]),
            *(str(row.get(v, 0) or "") for v in verdicts),
        )
    console.print(table)
    for line in survivor_lines(report) + tolerance_lines(report):
        console.print(line, highlight=False)
    for m in report["mutants"]:
        if m["verdict"] == Verdict.ERROR:
            console.print(
                f"[magenta]error[/] {m['id']} {m['operator']} line {m['line']}: {m['reason']}",
                highlight=False,
            )
    modes_summary(console, report.get("modes"))
    races = (report.get("races") or {}).get("found") or []
    if races:
        more = f" (and {len(races) - 1} more)" if len(races) > 1 else ""
        console.print(
            f"[yellow]race hint[/]: {escape(races[0]['message'])}{more}; identical values hide "
            "a race from every value check",
            highlight=False,
        )
    for line in accepted_lines(report):
        console.print(line, highlight=False)
    for line in predictions.lines(report.get("predictions")):
        console.print(escape(line), highlight=False)
    kills = report["sandbox"].get("kills_by_limit") or {}
    if kills:
        console.print(
            "killed by a sandbox limit (the original fit in it): "
            + ", ".join(f"{limit} {n}" for limit, n in sorted(kills.items())),
            highlight=False,
        )
    if verbose:
        anatomy(console, report)


def anatomy(console: Console, report: dict) -> None:
    """``-v``: the test selection, the slowest cases, where the time went, the GPUs, the
    sandbox and the shims the file needed."""
    selection = report.get("selection")
    if selection and selection.get("mutants"):
        n, suite = selection["mutants"], selection["suite_cases"]
        console.print(
            f"test selection: {counted(selection['cases_run'], 'test case')} for "
            f"{counted(n, 'mutant')} ({selection['cases_run'] / n:.1f} per mutant, fastest "
            f"first, stopping at the first kill); the full suite: {suite} per mutant "
            f"({suite * n} in all)",
            highlight=False,
        )
    cases = [c for c in (report.get("baseline") or {}).get("cases") or [] if "::" in c["case"]]
    if len(cases) > 1:
        slowest = ", ".join(f"{escape(c['case'])} {c['duration_s']:.2f} s" for c in cases[:SLOWEST])
        console.print(
            f"the original's {len(cases)} test cases, slowest: {slowest}", highlight=False
        )
    bound = report.get("bound")
    if bound:
        original = f"{bound['original_s']:.1f} s original + " if bound["original_s"] else ""
        console.print(
            f"bound by checks: {original}{bound['jobs_s']:.1f} s of mutant jobs over "
            f"{counted(bound['workers'], 'worker')} = {bound['bound_s']:.1f} s; took "
            f"{bound['wall_s']:.1f} s",
            highlight=False,
        )
    gpus = report["sandbox"].get("gpus") or []
    if gpus:
        console.print(
            "per GPU: "
            + "; ".join(
                f"slot {g['slot']} (CUDA device {g['device']}): {counted(g['jobs'], 'job')}, "
                f"{g['jobs_per_s']} jobs/s, {g['busy_s']:.1f} s busy"
                for g in gpus
            ),
            highlight=False,
        )
    net = "cut" if report["sandbox"]["network_cut"] else "NOT cut (unshare refused)"
    iso = report["sandbox"].get("isolation") or {}
    if iso:
        net += f", filesystem {iso.get('filesystem', '?')}, user {iso.get('user', '?')}"
    cached = sum(1 for m in report["mutants"] if m["cached"])
    box = report["sandbox"]
    memory = ""
    if box.get("memory_mb"):
        source = "sized to the machine" if box.get("memory_from") == "machine" else "--memory-mb"
        memory = f"memory {box['memory_mb']} MB per job ({source}), "
    console.print(
        f"[dim]sandbox: {box['backend']} x{box['workers']}, network {net}, {memory}"
        f"mutant limit {box['mutant_timeout_s']} CPU s; {counted(cached, 'result')} from cache; "
        f"run {report['run_id']}[/]",
        highlight=False,
    )
    shims = shims_line(report)
    if shims:
        console.print(f"[dim]{shims}[/]", highlight=False)
    note = interpreter_note(report)
    if note:
        console.print(note, highlight=False)


def interpreter_note(report: dict) -> str:
    """``-v``: which executor ran the original's launches, per kernel, and why any fell
    back to Triton's loop (rich markup); "" where the report records none."""
    section = report.get("interpreter")
    if isinstance(section, dict) and section.get("reason"):
        return f"[dim]interpreter (Triton's loop): {escape(section['reason'])}[/]"
    if not isinstance(section, dict) or not section.get("kernels"):
        return ""
    parts = []
    for kernel, k in section["kernels"].items():
        said = f"{kernel} {k['batched']} batched, {k['triton']} in Triton's loop"
        masked = ", ".join(f"{r} x{n}" for r, n in (k.get("masked") or {}).items())
        if masked:
            said = said.replace(" batched,", f" batched (under masks: {masked}),", 1)
        reasons = "; ".join(f"{r} (x{n})" for r, n in (k.get("reasons") or {}).items())
        parts.append(f"{said} ({reasons})" if reasons else said)
    return f"[dim]interpreter ({section.get('mode', '?')}): {escape('; '.join(parts))}[/]"


#: the survivor kinds that are test gaps, the first said first
GAPS = ("hidden_by_tolerance", "differs")


def next_step(report: dict, tests_dir: str | None = None) -> str | None:
    """The one thing to do next, in one line: tighten the assertion that hid the first
    survivor a checked tolerance kills, else kill the first survivor whose outputs
    differ (test gaps the checks measured), else commit the tests mutant-gate wrote
    where they kill more, else look at the survivors in the explorer; None when nothing
    is left to do."""
    left = [
        m for m in report["mutants"] if m["verdict"] == Verdict.SURVIVED and not m.get("accepted")
    ]
    gaps = [m for kind in GAPS for m in left if (m.get("survivor") or {}).get("kind") == kind]
    run = report.get("run_id")
    lines = ((report.get("checks") or {}).get("tolerance") or {}).get("lines") or []
    best = next((x for x in lines if x.get("killed")), None)
    if best is not None:  # the test line whose tightest checked tolerance kills the most
        n = len(best["killed"])
        route, _ = tolerance_route(best)
        name = "rtol" if route == "rtol" else "atol"
        value = f"{best[f'{route}_checked']:g}" + (" with rtol 0" if route == "abs" else "")
        return (
            f"next: tighten the assertion at {best['where']} to {name} {value}: "
            f"it kills {n} survivor{'s' if n != 1 else ''}; `mutant-gate replay {run}` shows "
            "each survivor's evidence"
        )
    if gaps:
        return _gap_step(gaps[0], run)
    written = (report.get("score") or {}).get("with_written") or {}
    if written.get("added") and tests_dir:
        rel = os.path.relpath(os.path.abspath(tests_dir))
        folder = tests_dir if rel.startswith("..") else rel
        return f"next: commit {folder.rstrip('/')}/: their kills become your score"
    if left:
        return f"next: `mutant-gate replay {run}` shows each survivor's diff and evidence"
    return None


def _gap_step(m: dict, run: object) -> str:
    """The next step for a test gap: tighten the assertion that hid ``m`` (where a
    checked tolerance kills it), else a test that checks what it changes."""
    replay = f"`mutant-gate replay {run}` shows each survivor's evidence"
    where = f"{m['id']} ({m['operator']}, line {m['line']})"
    if m["survivor"]["kind"] != "hidden_by_tolerance":
        return f"next: a test that checks what {where} changes; {replay}"
    proposal = ((m.get("tolerance") or {}).get("proposal") or {}).get("atol")
    tighter = f" to atol {proposal:g}" if isinstance(proposal, int | float) else ""
    at = m["survivor"].get("where") or "its test line"
    return f"next: tighten the assertion at {at}{tighter}: it kills {where}; {replay}"


def score_line(report: dict) -> str:
    """The score: what your own tests kill, raw and adjusted, what the adjusted one leaves
    out; then, where mutant-gate wrote tests that kill more, the score with them on a
    line of its own. The run says it last, with only the gate's verdict after it."""
    s = report["score"]
    excluded = ", ".join(
        f"{e['id']} ({'accepted' if e.get('accepted') else e['verdict']})" for e in s["excluded"]
    )
    mine = "your tests" if "with_written" in s else "score"
    line = (
        f"{mine}: [bold]{s['killed']}/{s['total']}[/] killed, raw {percent(s['raw'])}, "
        f"adjusted {percent(s['adjusted'])}" + (f" (excluded: {excluded})" if excluded else "")
    )
    asserts = (report.get("own_check") or {}).get("asserts")
    if asserts is False and not _given_tests(report):
        line += "; [yellow]your check asserts nothing[/]: only crashes, bounds and timeouts kill"
    written = s.get("with_written")
    if written and written.get("added"):
        n = len(written["added"])
        line += (
            f"\nwith the tests mutant-gate wrote: [bold]{written['killed']}/{s['total']}[/] "
            f"killed, raw {percent(written['raw'])}, adjusted {percent(written['adjusted'])} "
            f"({n} more)"
        )
    return line


def _given_tests(report: dict) -> bool:
    """True where the run had tests of the user's beside the own check (``--tests``)."""
    return any(t.get("origin") == "given" for t in report.get("tests") or [])


def shims_line(report: dict) -> str | None:
    """The stand-ins the file needed to run here (``baseline.shims``: a GPU query
    answered on the CPU, a benchmark decorator made a no-op...), or None."""
    shims = (report.get("baseline") or {}).get("shims") or []
    if not shims:
        return None
    return f"shims the original needed to run here: {', '.join(escape(str(s)) for s in shims)}"


def accepted_lines(report: dict) -> list[str]:
    """The baseline file's part: survivors it accepts (never killed), stale entries."""
    section = report.get("accepted")
    if not isinstance(section, dict):
        return []
    rows = {m["id"]: m for m in report["mutants"]}
    covered = (report.get("score") or {}).get("accepted") or []
    lines = [
        f"accepted (not counted): {len(covered)} of the "
        f"{counted(section.get('entries', 0), 'entry', 'entries')} in "
        f"{escape(str(section.get('file')))} {'covers' if len(covered) == 1 else 'cover'} "
        "a survivor"
    ]
    for a in covered:
        m = rows.get(a["id"], {})
        lines.append(
            f"  [yellow]accepted[/] {a['id']} {m.get('operator')} in {m.get('function')} "
            f"line {m.get('line')}: {escape(a.get('reason') or '')}"
        )
    for e in section.get("unmatched") or []:
        lines.append(
            f"  [dim]entry {e.get('id')} ({e.get('operator')}, {e.get('function')} line "
            f"{e.get('line')}) matches no mutant now: its code changed, or it is not "
            "generated[/]"
        )
    killed = section.get("no_longer_survive") or []
    if killed:
        lines.append(f"  [green]accepted but no longer surviving[/]: {', '.join(killed)}")
    return lines


def writers_summary(report: dict, verbose: bool = False) -> list[str]:
    """What the writers added: how many survivors the probe killed, the claims, the
    model's tokens; with ``verbose`` also each accepted test with its kills (said as it
    was accepted) and the probe's spend."""
    lines = []
    for t in report.get("tests", []) if verbose else ():
        if t.get("origin") in ("stage1", "stage2", "probe"):
            kills = ", ".join(t["kills"]) or "nothing"
            took = f" ({t['original_s']:.2f} s on the original)" if "original_s" in t else ""
            lines.append(
                f"[green]{t['origin']}[/] {t['file']}::{t['name'].split('::')[-1]}{took} "
                f"kills {kills}"
            )
    probe = (report.get("writers") or {}).get("probe")
    if probe and probe.get("survivors"):
        kills = probe.get("kills_by_trigger") or {}
        by = ", ".join(f"{k} {n}" for k, n in sorted(kills.items(), key=lambda kv: -kv[1]))
        killed = sum(kills.values())
        lines.append(
            f"probe: {killed} of {counted(probe['survivors'], 'survivor')} killed"
            + (f" (by trigger: {by})" if by and verbose else "")
        )
        spend = probe_spend(probe.get("spend")) if verbose else None
        if spend:
            lines.append(f"probe spend: {spend}")
    claims = [
        (m["id"], c)
        for m in report["mutants"]
        if m["verdict"] == Verdict.SURVIVED
        for c in shown_claims(m)
    ]
    for mid, c in claims:
        lines.append(f"[yellow]claim[/] {mid} {c['claim']} by {c['by']}: {escape(c['reason'])}")
    tokens = tokens_line(report)
    if tokens:
        lines.append(tokens)
    return lines


def tokens_line(report: dict) -> str | None:
    tokens = report.get("tokens") or {}
    if not tokens.get("calls"):
        return None
    cost = tokens.get("cost_usd")
    if cost is not None:
        how = price_words(tokens.get("price"))
        money = f"~${cost:.4f}" + (f" {how}" if how else "")
    else:
        money = f"cost unknown: no price for {tokens.get('model')} (--price-in/--price-out)"
    return (
        f"model {tokens.get('model')}: {counted(tokens['calls'], 'call')} "
        f"({tokens.get('cached_calls', 0)} from cache), {tokens.get('prompt', 0):,} prompt + {tokens.get('completion', 0):,} "
        f"completion tokens, {money}"
    )
