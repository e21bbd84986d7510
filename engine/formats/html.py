"""One self-contained, offline HTML page: the mutant grid and, on a click, the mutant.

Everything is inline (CSS, a little JavaScript, no fonts, images or links to other
hosts), so the page can be archived as a CI artifact and opened anywhere. It works
without JavaScript too: a cell is a link to its mutant's section and CSS ``:target``
shows it; the script only adds keyboard moves, verdict filters and the killing test's
source next to the mutant (each test's source is written once, at the bottom).

A library's report opens on its module list (each module's score, mutants, survivors,
status and reason, the most survivors first), each linking to its module's section of
the grid below; a one-file report has no list.

Text from the report is HTML-escaped and ``://`` is written as ``:&#47;&#47;`` (it
reads the same), so no address in a reason or a setting becomes a reference.
"""

from __future__ import annotations

import html

from .. import predictions
from ..vocabulary import GLYPHS, by_words, origin_words
from ..vocabulary import REPORT_STATES as VERDICTS
from .modules import (
    STATUS_WORDS,
    is_library,
    library_name,
    module_rows,
    module_score,
    modules_by_survivors,
)
from .words import (
    claim_lines,
    compile_lines,
    counts,
    gate,
    kernel_name,
    killing_tests,
    oracle_sentence,
    percent,
    probe_text,
    tolerance_kills,
    tolerance_line,
    tolerance_view,
    tool_version,
    written_score,
)


def esc(text: object) -> str:
    return html.escape("" if text is None else str(text), quote=True).replace("://", ":&#47;&#47;")


STYLE = """
:root{--bg:#fff;--fg:#1f2328;--muted:#656d76;--line:#d0d7de;--panel:#f6f8fa;
--killed:#1a7f37;--survived:#cf222e;--equivalent:#9a6700;--not_compilable:#8250df;--flaky:#bc4c00;
--error:#bc4c00;--pending:#8c959f;--add:#dafbe1;--del:#ffebe9;--hunk:#ddf4ff}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#8d96a0;
--line:#30363d;--panel:#161b22;--killed:#3fb950;--survived:#f85149;--equivalent:#d29922;
--not_compilable:#a371f7;--flaky:#f0883e;--error:#db6d28;--pending:#6e7681;--add:#12261e;--del:#25171c;
--hunk:#121d2f}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif}
code,pre,.cell{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
header{padding:16px 24px;border-bottom:1px solid var(--line)}
h1{font-size:20px;margin:0 0 6px}h2{font-size:15px;margin:16px 0 6px}
h3{font-size:13px;margin:14px 0 4px;color:var(--muted);text-transform:uppercase}
.meta{color:var(--muted);font-size:12px;margin:4px 0 0}
.gate-false{color:var(--survived);font-weight:600}.gate-true{color:var(--killed)}
main{display:flex;gap:24px;padding:0 24px 24px;align-items:flex-start}
.grid-pane{flex:1 1 50%;min-width:280px}
.detail-pane{flex:1 1 50%;min-width:320px;position:sticky;top:0;max-height:100vh;
overflow:auto;padding-top:8px}
.filters{display:flex;flex-wrap:wrap;gap:6px;padding:12px 0}
.filters button{font:inherit;background:var(--panel);color:var(--fg);
border:1px solid var(--line);border-radius:6px;padding:2px 10px;cursor:pointer}
.filters button.active{border-color:var(--fg);font-weight:600}
.cells{display:flex;flex-wrap:wrap;gap:3px}
.cell{display:inline-flex;width:28px;height:28px;align-items:center;justify-content:center;
border-radius:4px;text-decoration:none;color:#fff;font-size:15px;font-weight:700;
outline-offset:2px}
.cell.sel,.cell:focus{outline:3px solid var(--fg)}
.cell[hidden],.group[hidden]{display:none}
.v-killed{background:var(--killed)}.v-survived{background:var(--survived)}
.v-equivalent{background:var(--equivalent)}.v-not_compilable{background:var(--not_compilable)}.v-flaky{background:var(--flaky)}
.v-error{background:var(--error)}.v-pending{background:var(--pending)}
.cell.k-identical{background:repeating-linear-gradient(45deg,var(--survived) 0 5px,var(--equivalent) 5px 8px)}
.kind-differs{color:var(--survived);font-weight:600}.kind-identical{color:var(--equivalent);font-weight:600}
.tag{display:inline-block;border-radius:4px;padding:0 6px;color:#fff;font-weight:600}
.detail{display:none;border:1px solid var(--line);border-radius:8px;padding:4px 16px 16px}
html:not(.js) .detail:target,.detail.on{display:block}
.hint{color:var(--muted)}
pre{background:var(--panel);border:1px solid var(--line);border-radius:6px;padding:8px;
overflow:auto;font-size:12px;margin:4px 0}
pre.diff span{display:block}.d-add{background:var(--add)}.d-del{background:var(--del)}
.d-hunk{background:var(--hunk);color:var(--muted)}.d-file{color:var(--muted)}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
td,th{border:1px solid var(--line);padding:2px 8px;text-align:right}
td:first-child,th:first-child,td:nth-child(2),th:nth-child(2){text-align:left}
.tests section{border-top:1px solid var(--line)}
.module{border-top:1px solid var(--line);margin-top:12px}.module>h2{font-size:16px}
"""

SCRIPT = """
(function(){
document.documentElement.classList.add('js');
var cells=Array.prototype.slice.call(document.querySelectorAll('.cell'));
var hint=document.getElementById('hint');
function show(id,focus,keep){
 var d=document.getElementById('m-'+id);if(!d)return;
 document.querySelectorAll('.detail.on').forEach(function(e){e.classList.remove('on')});
 d.classList.add('on');if(hint)hint.hidden=true;
 cells.forEach(function(c){c.classList.toggle('sel',c.dataset.id===id);
  if(focus&&c.dataset.id===id)c.focus()});
 d.querySelectorAll('[data-test]').forEach(function(slot){
  if(slot.dataset.filled)return;var src=document.getElementById(slot.dataset.test);
  if(src){slot.appendChild(src.cloneNode(true)).removeAttribute('id');slot.dataset.filled=1}});
 if(keep===false)return;  // the page's own first choice: no hash, the page stays at its top
 try{history.replaceState(null,'','#m-'+id)}catch(err){}  // file: pages may refuse
}
cells.forEach(function(c){c.addEventListener('click',function(e){e.preventDefault();
 show(c.dataset.id,true)})});
function below(seen,cur,dir){
 var r=cur.getBoundingClientRect(),best=null,bd=Infinity;
 seen.forEach(function(c){var q=c.getBoundingClientRect(),dy=(q.top-r.top)*dir;
  if(dy<=1)return;var d=dy*1000+Math.abs(q.left-r.left);if(d<bd){bd=d;best=c}});
 return best}
document.addEventListener('keydown',function(e){
 var seen=cells.filter(function(c){return !c.hidden});
 var i=seen.indexOf(document.activeElement);if(i<0)return;
 var k=e.key,n=null;
 if(k==='ArrowRight'||k==='l')n=seen[i+1];
 else if(k==='ArrowLeft'||k==='h')n=seen[i-1];
 else if(k==='ArrowDown'||k==='j')n=below(seen,seen[i],1);
 else if(k==='ArrowUp'||k==='k')n=below(seen,seen[i],-1);
 else return;
 e.preventDefault();if(n)show(n.dataset.id,true)});
document.querySelectorAll('.filters button').forEach(function(b){
 b.addEventListener('click',function(){var v=b.dataset.verdict;
  document.querySelectorAll('.filters button').forEach(function(x){
   x.classList.toggle('active',x===b)});
  cells.forEach(function(c){c.hidden=v!=='all'&&c.dataset.verdict!==v});
  document.querySelectorAll('.group').forEach(function(g){
   g.hidden=!g.querySelector('.cell:not([hidden])')})})});
var start=location.hash.indexOf('#m-')===0?location.hash.slice(3):null;
if(!start){var s=cells.filter(function(c){return c.dataset.verdict==='survived'})[0];
 start=s?s.dataset.id:null}
if(start)show(start,false,!!location.hash);
if(!location.hash)window.scrollTo(0,0);  // opens at its top: the score first
})();
"""


#: A diff line's class by how it starts, the first that fits (file headers before the
#: added and deleted lines they also start like)
_DIFF_CLASSES = (
    ("---", "d-file"),
    ("+++", "d-file"),
    ("@@", "d-hunk"),
    ("+", "d-add"),
    ("-", "d-del"),
)


def _diff_class(line: str) -> str:
    """The class of one line of a unified diff ("" for a context line)."""
    return next((cls for start, cls in _DIFF_CLASSES if line.startswith(start)), "")


def diff_block(diff: str) -> str:
    out = []
    for line in diff.rstrip("\n").split("\n"):
        cls = _diff_class(line)
        attr = f' class="{cls}"' if cls else ""
        out.append(f"<span{attr}>{esc(line) or ' '}</span>")
    return '<pre class="diff">' + "".join(out) + "</pre>"


def verdict_tag(verdict: str) -> str:
    return f'<span class="tag v-{esc(verdict)}">{GLYPHS.get(verdict, "?")} {esc(verdict)}</span>'


#: Row sections the detail shows under their own heading; ``evidence_lines`` says the rest.
SHOWN_SECTIONS = frozenset(
    {"claims", "oracle", "compile", "attempts", "accepted", "probe", "survivor", "tolerance"}
)


def evidence_lines(row: dict) -> list[str]:
    """The row's other sections in words: every verdict change (the ledger's
    ``changes``), then each remaining section as a sentence (never raw JSON)."""
    from ..verdicts import ROW_SECTIONS

    out = [
        f"{c.get('stage')}: {c.get('was') or 'none'} → {c.get('now')}: {c.get('evidence')}"
        for c in row.get("changes") or []
        if isinstance(c, dict)
    ]
    for name in sorted(ROW_SECTIONS - SHOWN_SECTIONS - {"changes"}):
        if name in row:
            out.append(section_sentence(name, row[name]))
    return out


#: How a row section reads, where a plain "name: value" would not
SECTION_WORDS = {
    "timeout_s": lambda v: f"time limit of its job: {v:g} s",
    "tests_selected": lambda v: (
        "test cases chosen for it (they launch its kernel): " + (in_words(v) or "none")
    ),
    "tests_run": lambda v: (
        "test cases its job ran, fastest first, to the first kill: " + (in_words(v) or "none")
    ),
    "reached": lambda v: (
        "a check launches its kernel"
        if v
        else "no check launches its kernel: no job ran, no evidence either way"
    ),
}


def section_sentence(name: str, value: object) -> str:
    """One row section as a sentence: its own words where ``SECTION_WORDS`` has them,
    else its name and its fields in words."""
    said = SECTION_WORDS.get(name)
    if said is not None:
        try:
            return said(value)
        except (TypeError, ValueError):
            pass  # an older record's shape: said the plain way
    return f"{name.replace('_', ' ')}: {in_words(value)}"


def in_words(value: object) -> str:
    """A report value as text a person reads: fields as "name value" parts separated by
    semicolons, lists by commas, no braces or quotes."""
    if isinstance(value, dict | list | tuple) and not value:
        return "none"
    if isinstance(value, dict):
        return "; ".join(f"{str(k).replace('_', ' ')} {in_words(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(in_words(v) for v in value)
    return _scalar_words(value)


def _scalar_words(value: object) -> str:
    """One plain value as text: yes or no, none, a float in its short form, else its str."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def detail_section(report: dict, row: dict, test_ids: dict[str, str], prefix: str = "") -> str:
    """One mutant's panel; ``prefix`` keeps ids apart when one page holds several runs."""
    verdict = row.get("verdict", "pending")
    parts = _verdict_part(row, verdict, prefix)
    parts += survivor_kind(row)
    parts += _killing_part(report, row, verdict, test_ids)
    parts += _oracle_part(row)
    parts += _tolerance_part(row)
    parts += _listed("Compile-check", [esc(c) for c in compile_lines(row)])
    probe = probe_text(row)
    if probe:
        parts.append(f"<h3>Probe</h3><p>{esc(probe)}</p>")
    parts += _listed("Claims", [esc(c) for c in claim_lines(row)])
    attempts = row.get("attempts") or []
    parts += _listed(
        f"Rejected tests ({len(attempts)})",
        [
            f"{esc(a.get('by'))} attempt {esc(a.get('attempt'))}: {esc(a.get('why'))}"
            for a in attempts
        ],
    )
    parts += _listed("Evidence", [esc(e) for e in evidence_lines(row)])
    parts.append("<h3>Diff</h3>")
    parts.append(diff_block(row.get("diff") or ""))
    parts.append("</section>")
    return "\n".join(parts)


def _verdict_part(row: dict, verdict: str, prefix: str) -> list[str]:
    """The panel's opening: the mutant (what changed, where), its verdict and by what,
    the reason, and whether the survivor is accepted."""
    parts = [
        f'<section class="detail" id="m-{esc(prefix + row["id"])}">',
        f"<h2>{verdict_tag(verdict)} <code>{esc(row['id'])}</code> {esc(row.get('operator'))}</h2>",
        f"<p>{esc(row.get('family'))} mutant in <code>{esc(row.get('function'))}</code>, "
        f"line {esc(row.get('line'))}, column {esc((row.get('col') or 0) + 1)}: "
        f"<code>{esc(row.get('before'))}</code> → <code>{esc(row.get('after'))}</code></p>",
        "<h3>Verdict</h3>",
        f"<p><b>{esc(verdict)}</b>"
        + (f" by {esc(by_words(row.get('by')))}" if row.get("by") else "")
        + "</p>",
    ]
    if row.get("reason"):
        parts.append(f"<pre>{esc(row['reason'])}</pre>")
    if verdict == "survived" and isinstance(row.get("accepted"), dict):
        parts.append(
            f"<p><b>accepted</b> in the baseline file: {esc(row['accepted'].get('reason'))} "
            "(left out of the adjusted score, not killed)</p>"
        )
    return parts


def _killing_part(report: dict, row: dict, verdict: str, test_ids: dict[str, str]) -> list[str]:
    """A killed mutant's killing tests, each with a slot for its source (written once,
    at the bottom of the page), or what killed it while the checks ran."""
    if verdict != "killed":
        return []
    parts = ["<h3>Killing test</h3>"]
    killers = killing_tests(report, row)
    if not killers:
        parts.append(f"<p>{esc(by_words(row.get('by')))}, while the checks ran</p>")
    for test in killers:
        tid = test_ids.get(test.get("name", ""), "")
        parts.append(
            f"<p><code>{esc(test.get('name'))}</code> ({esc(origin_words(test))}, "
            f'{esc(test.get("file"))}) <a href="#{tid}">source</a></p>'
            f'<div data-test="{tid}-src"></div>'
        )
    return parts


def _oracle_part(row: dict) -> list[str]:
    """The diff-oracle's sentence, or a hint that it did not run on this mutant."""
    sentence = oracle_sentence(row)
    return [
        "<h3>Diff-oracle</h3>",
        f"<p>{esc(sentence)}</p>"
        if sentence
        else '<p class="hint">not run on this mutant (<code>--diff-oracle</code> runs it '
        "on survivors)</p>",
    ]


def _tolerance_part(row: dict) -> list[str]:
    """The closeness assertion that let the survivor through, and the tolerance that
    kills it where one was checked; nothing where the tolerance check left no line."""
    line = tolerance_line(row)
    return ["<h3>Tolerance</h3>", f"<p>{esc(line)}</p>"] if line else []


def _listed(heading: str, items: list[str]) -> list[str]:
    """A heading and its items (HTML already) as a list; nothing without items."""
    if not items:
        return []
    return [f"<h3>{heading}</h3><ul>", *(f"<li>{item}</li>" for item in items), "</ul>"]


def html_page(report: dict) -> str:
    """The report as one self-contained HTML page (text)."""
    rows = report.get("mutants", [])
    per_verdict = counts(report)
    tests = report.get("tests", [])
    test_ids = {t.get("name", ""): f"t-{i}" for i, t in enumerate(tests)}
    out = _page_header(report, rows)
    out.append('</header><main><div class="grid-pane">')
    out += _filters(rows, per_verdict)
    if is_library(report):
        out += module_list(report)
        out += module_grids(report)
    else:
        out += function_groups(rows)
    out += survivor_list(rows)
    out += tolerance_list(report)
    out += _operator_table(rows, per_verdict)
    out += _tests_part(tests, test_ids)
    out.append("</div></div>")
    out.append('<div class="detail-pane">')
    out.append(
        '<p class="hint" id="hint">Click a cell to see its mutant: the diff, the verdict, '
        "the killing test and the diff-oracle's sentence. Arrow keys or h/j/k/l move.</p>"
    )
    out += [detail_section(report, row, test_ids) for row in rows]
    out.append("</div></main>")
    out.append(f"<script>{SCRIPT}</script></body></html>")
    return "\n".join(out) + "\n"


def _page_header(report: dict, rows: list[dict]) -> list[str]:
    """The page's head and its header, left open: the title, the score and the gate,
    the mutants out of the adjusted score, the run's notes, the survivors' kinds, and
    the run (id, what it judged, the toolchain)."""
    name = kernel_name(report)
    score = report.get("score") or {}
    passed, sentence = gate(report)
    toolchain = report.get("toolchain") or {}
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>mutant-gate: {esc(name)}</title>",
        f"<style>{STYLE}{_kind_style(rows)}</style></head><body>",
        "<header>",
        f"<h1>mutant-gate · <code>{esc(name)}</code></h1>",
        score_paragraph(score)
        + (
            f' · <span class="gate-{str(passed).lower()}">{esc(sentence)}</span>'
            if passed is not None
            else ""
        )
        + "</p>",
    ]
    excluded = score.get("excluded") or []
    if excluded:
        out.append(
            '<p class="meta">excluded from the adjusted score: '
            + ", ".join(f"{esc(e['id'])} ({esc(e['verdict'])})" for e in excluded)
            + "</p>"
        )
    out += run_notes(report, score)
    out += survivor_counts(rows)
    where = library_name(report) if is_library(report) else report.get("kernel", {}).get("path")
    out.append(
        f'<p class="meta">run {esc(report.get("run_id"))} · {esc(where)}'
        f" · mutant-gate {esc(tool_version())} · triton {esc(toolchain.get('triton'))} · torch "
        f"{esc(toolchain.get('torch'))} · {esc(toolchain.get('mode', 'interpret'))} mode</p>"
    )
    return out


def _filters(rows: list[dict], per_verdict: dict[str, int]) -> list[str]:
    """The verdict filters: all, then each verdict some mutant has."""
    out = ['<nav class="filters">']
    out.append(f'<button type="button" class="active" data-verdict="all">all {len(rows)}</button>')
    for v in VERDICTS:
        if per_verdict[v]:
            out.append(
                f'<button type="button" data-verdict="{v}">{GLYPHS[v]} {v} {per_verdict[v]}</button>'
            )
    out.append("</nav>")
    return out


def _operator_table(rows: list[dict], per_verdict: dict[str, int]) -> list[str]:
    """Mutants per family and operator, a column for each verdict some mutant has."""
    out = ["<h2>By operator</h2><table><tr><th>family</th><th>operator</th>"]
    out.append("".join(f"<th>{GLYPHS[v]}</th>" for v in VERDICTS if per_verdict[v]) + "</tr>")
    for (family, operator), cell in sorted(_operator_counts(rows).items()):
        out.append(
            f"<tr><td>{esc(family)}</td><td>{esc(operator)}</td>"
            + "".join(f"<td>{cell.get(v, '') or ''}</td>" for v in VERDICTS if per_verdict[v])
            + "</tr>"
        )
    out.append("</table>")
    return out


def _operator_counts(rows: list[dict]) -> dict[tuple[str, str], dict[str, int]]:
    """Per (family, operator): how many of its mutants have each verdict."""
    table: dict[tuple[str, str], dict[str, int]] = {}
    for row in rows:
        key = (row.get("family") or "?", row.get("operator") or "?")
        cell = table.setdefault(key, {})
        cell[row.get("verdict", "pending")] = cell.get(row.get("verdict", "pending"), 0) + 1
    return table


def _tests_part(tests: list[dict], test_ids: dict[str, str]) -> list[str]:
    """Every check and test: its origin, file, kills and source (the source a killed
    mutant's panel shows)."""
    out = ['<div class="tests"><h2>Checks and tests</h2>']
    for test in tests:
        tid = test_ids.get(test.get("name", ""), "")
        kills = test.get("kills") or []
        out.append(
            f'<section id="{tid}"><p><code>{esc(test.get("name"))}</code> · '
            f"{esc(origin_words(test))} · {esc(test.get('file'))} · kills {len(kills)}</p>"
            f'<pre id="{tid}-src">{esc(test.get("source") or "(no source recorded)")}</pre>'
            "</section>"
        )
    return out


def function_groups(rows: list[dict], prefix: str = "", heading: str = "h2") -> list[str]:
    """The grid: a group of cells per jit function, each cell a link to its mutant's
    panel (``prefix``: the panels' id prefix, on the site)."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row.get("function") or "?", []).append(row)
    out = []
    for function, members in groups.items():
        out.append(
            f'<section class="group"><{heading}><code>{esc(function)}</code> '
            f'<span class="meta">{len(members)} mutants</span></{heading}><div class="cells">'
        )
        for row in members:
            v = row.get("verdict", "pending")
            title = f"{row['id']} {row.get('operator')} line {row.get('line')}: {v}"
            kind = _kind(row)
            if kind is not None:
                title += f" ({KIND_WORDS[kind['kind']]})"
            k = f" k-{esc(kind['kind'])}" if kind is not None else ""
            mid = esc(prefix + row["id"])
            out.append(
                f'<a class="cell v-{esc(v)}{k}" href="#m-{mid}" data-id="{mid}" '
                f'data-verdict="{esc(v)}" title="{esc(title)}">{GLYPHS.get(v, "?")}</a>'
            )
        out.append("</div></section>")
    return out


def module_list(report: dict, prefix: str = "") -> list[str]:
    """A library's modules, the most survivors first: each its score, mutants,
    survivors, status and reason, linking to its mutants below (``#f-N``)."""
    files = report.get("files") or []
    number = {f["path"]: n for n, f in enumerate(files)}
    out = [
        f'<h2>Kernel modules ({len(files)})</h2><table class="modules">'
        "<tr><th>module</th><th>status</th><th>score</th><th>mutants</th><th>survived</th>"
        "<th>reason</th></tr>"
    ]
    for f in modules_by_survivors(report):
        status = f.get("status") or "judged"
        out.append(
            f'<tr class="s-{esc(status)}"><td><a href="#{prefix}f-{number[f["path"]]}">'
            f"<code>{esc(f['path'])}</code></a></td>"
            f"<td>{esc(STATUS_WORDS.get(status, status))}</td><td>{esc(module_score(f))}</td>"
            f"<td>{esc(f.get('mutants', 0))}</td><td>{esc(f.get('survived', 0))}</td>"
            f"<td>{esc(_module_reason(f))}</td></tr>"
        )
    out.append("</table>")
    return out


def _module_reason(record: dict) -> str:
    if record.get("reason"):
        return str(record["reason"])
    unreached = record.get("not_reached") or []
    return f"not reached by the tests: {', '.join(unreached)}" if unreached else ""


def module_grids(report: dict, prefix: str = "") -> list[str]:
    """A library's grid: a section per module (``f-N``), its cells grouped by jit
    function; a module without mutants says why."""
    out = []
    for n, record in enumerate(report.get("files") or []):
        rows = module_rows(report, record)
        out.append(
            f'<section class="module" id="{prefix}f-{n}"><h2><code>{esc(record["path"])}</code> '
            f'<span class="meta">{esc(module_score(record))} · {len(rows)} mutants · '
            f"{esc(record.get('survived', 0))} survived</span></h2>"
        )
        if not rows:
            out.append(f'<p class="meta">{esc(_module_reason(record) or "no mutants")}</p>')
        out += function_groups(rows, prefix, heading="h3")
        out.append("</section>")
    return out


#: a survivor's kind (``row["survivor"]``) in words, as the console and the explorer say it
KIND_WORDS = {
    "hidden_by_tolerance": "hidden by tolerance",
    "differs": "outputs differ",
    "identical": "no difference observed",
    "not_checked": "not checked",
}
#: what each kind asks of the reader
KIND_HINTS = {
    "hidden_by_tolerance": "a tighter tolerance at the test line kills it and passes the "
    "original (checked): a test gap, tighten that assertion",
    "differs": "the checks pass anyway: a test gap, write a test that checks those outputs",
    "identical": "the diff-oracle saw none on the launches the checks make; still a survivor "
    "(identical there is no proof)",
}
#: the kinds in the order they are counted and listed: test gaps first
KINDS = tuple(KIND_HINTS)
#: the look of a kind the page's ``STYLE`` predates, added only to a page that shows it
#: (a page without it stays as it was)
KIND_STYLES = {
    "hidden_by_tolerance": ".kind-hidden_by_tolerance{color:var(--survived);font-weight:600}",
}


def _kind_style(rows: list[dict]) -> str:
    """The newer kinds' CSS for the kinds the page's survivors have."""
    shown = {k["kind"] for k in map(_kind, rows) if k}
    return "".join(css for name, css in KIND_STYLES.items() if name in shown)


def _kind(row: dict) -> dict | None:
    """The survivor's checked kind (``hidden_by_tolerance``, ``differs`` or
    ``identical``), or None."""
    kind = row.get("survivor")
    if row.get("verdict") != "survived" or not isinstance(kind, dict):
        return None
    return kind if kind.get("kind") in KIND_HINTS else None


def survivor_kind(row: dict) -> list[str]:
    """A survivor's detail: what execution showed of it (nothing where not checked); a
    why the panel's "Tolerance" part says in full is not said twice."""
    kind = _kind(row)
    if kind is None:
        return []
    name = kind["kind"]
    why = kind.get("why")
    said = f"{esc(why)} ({esc(KIND_HINTS[name])})"
    if why and why == tolerance_line(row):
        said = f"{esc(KIND_HINTS[name])} (which assertion, and how tight: under Tolerance)"
    return [
        "<h3>What execution showed</h3>",
        f'<p><span class="kind-{esc(name)}">{esc(KIND_WORDS[name])}</span>: {said}</p>',
    ]


def survivor_counts(rows: list[dict]) -> list[str]:
    """The survivors' kinds counted, under the score (nothing where none was checked)."""
    kinds = [k["kind"] for k in map(_kind, (r for r in rows if not r.get("accepted"))) if k]
    said = [
        f'<span class="kind-{name}">{kinds.count(name)} {esc(KIND_WORDS[name])}</span>'
        for name in KINDS
        if name in kinds
    ]
    return [f'<p class="meta">survivors: {", ".join(said)}</p>'] if said else []


def survivor_list(rows: list[dict]) -> list[str]:
    """The survivors by kind under the score: hidden by tolerance first (each with the
    assertion and the tolerance that kills it), then outputs differ (which output, by
    how much), then no difference observed; nothing where none was checked."""
    kinds = [(row, _kind(row)) for row in rows if not row.get("accepted")]
    out = []
    for name in KINDS:
        members = [(row, k) for row, k in kinds if k is not None and k["kind"] == name]
        if members:
            out += _kind_list(name, members)
    return out


def _kind_list(name: str, members: list[tuple[dict, dict]]) -> list[str]:
    """The heading, hint and list of one kind's survivors (``members``: each row with
    its kind)."""
    return [
        f'<h2 class="kind-{name}">Survivors: {esc(KIND_WORDS[name])} ({len(members)})</h2>'
        f'<p class="meta">{esc(KIND_HINTS[name])}</p><ul class="survivors kind-list-{name}">',
        *(
            f'<li><a href="#m-{esc(row["id"])}"><code>{esc(row["id"])}</code></a> '
            f"{esc(row.get('operator'))} line {esc(row.get('line'))}: {esc(k.get('why'))}</li>"
            for row, k in members
        ),
        "</ul>",
    ]


def tolerance_list(report: dict) -> list[str]:
    """The per-test-line view under the survivors: the assertions whose checked tighter
    tolerance kills survivors, most kills first; nothing where the check hid none."""
    view = tolerance_view(report)
    if not view:
        return []
    more = len(tolerance_kills(report)) - len(view)
    return [
        "<h2>What the tolerance hid</h2>",
        '<p class="meta">per test line: the survivors its tolerance lets through, and how '
        "many a tighter one, checked on the original, kills</p>",
        '<ul class="tolerance-lines">',
        *(f"<li>{esc(line)}</li>" for line in view),
        *([f"<li>… {more} more test lines in the JSON report</li>"] if more > 0 else []),
        "</ul>",
    ]


def score_paragraph(score: dict, what: str = "mutants killed") -> str:
    """The score's paragraph, open (the gate's sentence may follow): your tests' score in
    bold, then the score with the tests mutant-gate wrote, where they kill more."""
    mine = "your tests: " if "with_written" in score else ""
    out = (
        f"<p>{mine}<b>{esc(score.get('killed', 0))}/{esc(score.get('total', 0))}</b> {what} · "
        f"adjusted score <b>{esc(percent(score.get('adjusted')))}</b> · raw "
        f"{esc(percent(score.get('raw')))}"
    )
    written = written_score(score)
    if written is not None:
        out += (
            f' · <span class="meta">with the tests mutant-gate wrote: '
            f"{esc(written.get('killed', 0))}/{esc(score.get('total', 0))}, adjusted "
            f"{esc(percent(written.get('adjusted')))}</span>"
        )
    return out


def run_notes(report: dict, score: dict) -> list[str]:
    """The paragraphs under a run's score, on the page and on the site: the accepted
    survivors, the predictions scored, and whether the run is incomplete."""
    out = []
    accepted = score.get("accepted") or []
    if accepted:
        out.append(
            f'<p class="meta">{len(accepted)} accepted survivors (not counted, never killed): '
            + ", ".join(f"{esc(a['id'])} ({esc(a.get('reason'))})" for a in accepted)
            + "</p>"
        )
    out += [
        f'<p class="meta">{esc(line)}</p>' for line in predictions.lines(report.get("predictions"))
    ]
    if not report.get("complete", True):
        out.append('<p class="gate-false">the run is incomplete: some mutants are pending</p>')
    return out
