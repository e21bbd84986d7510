"""The replay site: several runs (one grid per kernel file) in one offline folder.

``write_site(reports, directory)`` writes ``index.html``: for each run its kernel file's
grid (a library's run: its module list first, then each module's grid) in the verdict colours of the one-run page (``html.py``), its score and gate, and
on a click, in the page, the mutant's panel: the diff, the verdict and its reason, the
evidence the stages recorded (changes, claims, oracle, compile, probe, modes...), and
the test that killed it (its source) or the claim with its evidence.

Everything is inline, as on the one-run page: no external URL, no ``<script src>``, no
fonts, nothing fetched; it opens from ``file://``. Nothing secret goes in: each run's
settings are shown only through ``scrub`` (key-like names and values removed, an
address keeps its scheme, host and path only), and any value of the key variables set
in this process's environment is blanked wherever it appears.
"""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit, urlunsplit

from ..settings import KEY_VARIABLES
from ..vocabulary import GLYPHS, REPORT_STATES, origin_words
from .html import (
    SCRIPT,
    STYLE,
    detail_section,
    esc,
    in_words,
    module_grids,
    module_list,
    run_notes,
    score_paragraph,
)
from .modules import is_library, library_name
from .words import counts, gate, kernel_name, probe_spend, tool_version

INDEX = "index.html"
REMOVED = "[removed]"

#: Setting names whose values are secret whatever they hold (``max_tokens`` is a count).
_SECRET_NAME = re.compile(
    r"(?i)(api_?key|secret|passw(or)?d|authori[sz]ation|credential|bearer|cookie|"
    r"(?<!max_)(?<!max-)token)"
)
#: Values that look like keys: a known prefix, or a long run of key characters.
_SECRET_VALUE = re.compile(
    r"^(sk-|nvapi-|ghp_|gho_|xox[bp]-|eyJ)[\w.-]+$|^(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]{32,}$"
)


def scrub_value(value: object) -> object:
    """A setting's value with anything key-like taken out."""
    if isinstance(value, dict):
        return {
            k: REMOVED if _SECRET_NAME.search(str(k)) and v not in (None, "") else scrub_value(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [scrub_value(v) for v in value]
    if not isinstance(value, str):
        return value
    return _scrub_text(value)


def _scrub_text(value: str) -> str:
    """A text setting: removed where it looks like a key, an address without its user
    info, query and fragment, else as it is."""
    if _SECRET_VALUE.match(value.strip()):
        return REMOVED
    if "://" in value:
        return _scrub_address(value)
    return value


def _scrub_address(value: str) -> str:
    """An address with its scheme, host (and port) and path only: no user info, query or
    fragment; removed whole when it does not parse."""
    try:
        parts = urlsplit(value)
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, "", ""))
    except ValueError:
        return REMOVED


def scrub(settings: dict) -> dict:
    """A report's settings fit to publish: no key, token, password or credential in an
    address (user info, query and fragment are dropped)."""
    out = scrub_value(settings)
    assert isinstance(out, dict)
    return out


def blank_keys(text: str, environ: dict[str, str] | None = None) -> str:
    """``text`` with every value of the key variables (``NEBIUS_API_KEY``...) blanked."""
    env = os.environ if environ is None else environ
    for name in KEY_VARIABLES:
        secret = env.get(name) or ""
        if len(secret) >= 8:
            text = text.replace(secret, REMOVED)
    return text


SITE_STYLE = """
.kernel{border-top:1px solid var(--line);padding-top:4px;margin-top:8px}
.kernel>h2{font-size:17px}
details{margin:6px 0}summary{cursor:pointer;color:var(--muted)}
"""


def _run_section(index: int, report: dict) -> tuple[str, list[str], str]:
    """(the grid section, the mutants' panels, the tests' sources) of one run."""
    prefix = f"r{index}-"
    rows = report.get("mutants", [])
    tests = report.get("tests", [])
    test_ids = {t.get("name", ""): f"{prefix}t-{i}" for i, t in enumerate(tests)}
    out = _run_heading(report, prefix)
    if is_library(report):  # its module list first, each module's grid below it
        out += module_list(report, prefix) + module_grids(report, prefix)
    else:  # a one-file run: its grid by jit function
        out += _function_grids(rows, prefix)
    out.append(
        "<details><summary>settings and run sections</summary><ul>"
        + "".join(f"<li>{esc(line)}</li>" for line in run_facts(report))
        + "</ul></details></section>"
    )
    panels = [detail_section(report, row, test_ids, prefix) for row in rows]
    sources = "".join(
        f'<section id="{test_ids.get(t.get("name", ""), "")}"><p><code>{esc(t.get("name"))}'
        f"</code> · {esc(origin_words(t))} · {esc(t.get('file'))}</p>"
        f'<pre id="{test_ids.get(t.get("name", ""), "")}-src">'
        f"{esc(t.get('source') or '(no source recorded)')}</pre></section>"
        for t in tests
    )
    return "\n".join(out), panels, sources


def _run_heading(report: dict, prefix: str) -> list[str]:
    """A run section's opening: its kernel file (or library), score and gate, the run's
    toolchain, and its notes."""
    score = report.get("score") or {}
    passed, sentence = gate(report)
    toolchain = report.get("toolchain") or {}
    library = is_library(report)
    where = library_name(report) if library else report.get("kernel", {}).get("path")
    out = [
        f'<section class="kernel" id="{prefix}run">',
        f'<h2><code>{esc(kernel_name(report))}</code> <span class="meta">{esc(where)}</span></h2>',
        score_paragraph(score, "killed")
        + (
            f' · <span class="gate-{str(passed).lower()}">{esc(sentence)}</span>'
            if passed is not None
            else ""
        )
        + "</p>",
        f'<p class="meta">run {esc(report.get("run_id"))} · triton '
        f"{esc(toolchain.get('triton'))} · torch {esc(toolchain.get('torch'))} · "
        f"{esc(toolchain.get('mode', 'interpret'))} mode</p>",
    ]
    return out + run_notes(report, score)


def _function_grids(rows: list[dict], prefix: str) -> list[str]:
    """A one-file run's grid: a group of cells per jit function, in the rows' order."""
    out: list[str] = []
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row.get("function") or "?", []).append(row)
    for function, members in groups.items():
        out.append(
            f'<div class="group"><h3><code>{esc(function)}</code> {len(members)}</h3>'
            '<div class="cells">'
        )
        for row in members:
            v = row.get("verdict", "pending")
            title = f"{row['id']} {row.get('operator')} line {row.get('line')}: {v}"
            out.append(
                f'<a class="cell v-{esc(v)}" href="#m-{esc(prefix + row["id"])}" '
                f'data-id="{esc(prefix + row["id"])}" data-verdict="{esc(v)}" '
                f'title="{esc(title)}">{GLYPHS.get(v, "?")}</a>'
            )
        out.append("</div></div>")
    return out


def run_facts(report: dict) -> list[str]:
    """A run's settings (scrubbed) and its run sections, each a sentence."""
    lines = _own_check_facts(report.get("own_check") or {})
    lines += _probe_facts((report.get("writers") or {}).get("probe") or {})
    lines += _model_facts(report.get("tokens") or {})
    for name in ("checks", "accepted"):
        if report.get(name):
            lines.append(f"{name}: {in_words(report[name])}")
    settings = scrub(report.get("settings") or {})
    lines += [f"setting {k.replace('_', ' ')}: {in_words(v)}" for k, v in sorted(settings.items())]
    return lines


def _own_check_facts(own: dict) -> list[str]:
    """Whether the own check asserts on the kernel's output, and the evidence, where judged."""
    if not own:
        return []
    asserts = "asserts on the kernel's output" if own.get("asserts") else "asserts nothing"
    return [f"own check: {asserts} ({own.get('evidence') or 'no evidence'})"]


def _model_facts(tokens: dict) -> list[str]:
    """The model's calls and tokens, where the run called one."""
    if not tokens.get("calls"):
        return []
    return [
        f"model {tokens.get('model')}: {tokens['calls']} "
        f"call{'s' if tokens['calls'] != 1 else ''}, {tokens.get('prompt', 0)} "
        f"prompt and {tokens.get('completion', 0)} completion tokens"
    ]


def _probe_facts(probe: dict) -> list[str]:
    """The probe's survivors killed (by trigger) and its spend, where it had survivors."""
    if not probe.get("survivors"):
        return []
    kills = probe.get("kills_by_trigger") or {}
    lines = [
        f"probe: {sum(kills.values())} of {probe['survivors']} "
        f"survivor{'s' if probe['survivors'] != 1 else ''} killed"
        + (f" (by trigger: {in_words(kills)})" if kills else "")
    ]
    spend = probe_spend(probe.get("spend"))
    if spend:
        lines.append(f"probe spend: {spend}")
    return lines


def site_page(reports: list[dict]) -> str:
    """The site's ``index.html`` (text) over ``reports``, in the order given."""
    per_verdict = _verdict_totals(reports)
    total = sum(per_verdict.values())
    files = _kernel_files(reports)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>mutant-gate: replay</title>",
        f"<style>{STYLE}{SITE_STYLE}</style></head><body>",
        "<header><h1>mutant-gate · replay</h1>",
        f"<p>{len(reports)} runs of {len(files)} kernel files · {total} mutants · "
        + " · ".join(f"{GLYPHS[v]} {v} {n}" for v, n in per_verdict.items() if n)
        + "</p>",
        f'<p class="meta">written by mutant-gate {esc(tool_version())}; offline, '
        "nothing is loaded from anywhere</p></header>",
        '<main><div class="grid-pane"><nav class="filters">',
        f'<button type="button" class="active" data-verdict="all">all {total}</button>',
    ]
    out += [
        f'<button type="button" data-verdict="{v}">{GLYPHS[v]} {v} {n}</button>'
        for v, n in per_verdict.items()
        if n
    ]
    out.append("</nav>")
    panels: list[str] = []
    sources: list[str] = []
    for i, report in enumerate(reports):
        grid, run_panels, run_sources = _run_section(i, report)
        out.append(grid)
        panels += run_panels
        sources.append(run_sources)
    out.append('<div class="tests"><h2>Checks and tests</h2>' + "".join(sources) + "</div>")
    out.append('</div><div class="detail-pane">')
    out.append(
        '<p class="hint" id="hint">Click a square to see its mutant: the diff, the verdict '
        "and its evidence, the killing test or the claim. Arrow keys or h/j/k/l move.</p>"
    )
    out += panels
    out.append("</div></main>")
    out.append(f"<script>{SCRIPT}</script></body></html>")
    return blank_keys("\n".join(out) + "\n")


def _verdict_totals(reports: list[dict]) -> dict[str, int]:
    """Every run's mutants counted by verdict, the report's states first."""
    per_verdict: dict[str, int] = dict.fromkeys(REPORT_STATES, 0)
    for report in reports:
        for v, n in counts(report).items():
            per_verdict[v] = per_verdict.get(v, 0) + n
    return per_verdict


def _kernel_files(reports: list[dict]) -> set:
    """The kernel files the runs are of: a one-file run's file, a library run's modules."""
    files = {(r.get("kernel") or {}).get("path") for r in reports if not is_library(r)}
    files |= {f.get("path") for r in reports if is_library(r) for f in r["files"]}  # modules
    return files


def write_site(reports: list[dict], directory: str) -> list[str]:
    """Write the site into ``directory`` (created); the paths written."""
    from ..errors import BadInput

    if not reports:
        raise BadInput("--site: no finished run to show")
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise BadInput(f"--site: not a directory: {directory}")
    path = os.path.join(directory, INDEX)
    try:
        os.makedirs(directory, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(site_page(reports))
    except OSError as exc:
        raise BadInput(f"--site: cannot write {path}: {exc.strerror}") from None
    return [path]
