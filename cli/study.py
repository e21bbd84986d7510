"""``mutant-gate study FILES... --models A,B --repeats N --out DIR``: every file under
every model N times, tabulated.

Each (file, model, repeat) is an ordinary run (writer ``llm``, stage 2 with
``--stage2``) with the repeat as its seed and as the model requests' sample number, so
repeats are distinct and every reply is cached: a second study spends nothing (the last
line counts the model calls made). A model-free row (writer ``probe``, one run per file)
is the baseline that costs nothing; ``--writer probe`` makes the whole study model-free.
``DIR`` gets ``study.md`` (means and spread per model and file, then every run),
``study.csv``, ``study.json`` and the replay site ``site/index.html``
(``engine/study.py`` builds the table, ``engine/formats/site.py`` the site).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace

from rich.console import Console

from mutant_gate.cache import DEFAULT_DIR
from mutant_gate.engine import session
from mutant_gate.engine.errors import EXIT_OK, BadInput
from mutant_gate.engine.settings import (
    DEFAULT_BASE_URL,
    LLMSettings,
    RunSettings,
    WriterSettings,
)

PROBE_ROW = "probe (no model)"


def _say(console: Console, text: str) -> None:
    console.print(text, highlight=False, markup=False, soft_wrap=True)


def _models(text: str | None) -> list[str]:
    models = list(dict.fromkeys(m.strip() for m in (text or "").split(",") if m.strip()))
    if not models:
        raise BadInput("study: --models names no model (e.g. --models A,B)")
    return models


def plan(args: argparse.Namespace) -> list[tuple[str, str, int, RunSettings]]:
    """(model, file, repeat, settings) for every run of the study, the probe rows first."""
    if args.repeats < 1:
        raise BadInput("study: --repeats must be at least 1")
    if args.jobs is not None and args.jobs < 1:
        raise BadInput("-j must be at least 1")
    for path in args.files:
        if not os.path.isfile(path):
            raise BadInput(f"study: no such file: {path}")
    base = RunSettings(
        kernel_path="",
        operators=args.operators,
        workers=args.jobs or os.cpu_count() or 1,
        cache_dir=args.cache_dir or DEFAULT_DIR,
        mode="interpret",
        writers=WriterSettings(
            writer="probe",
            attempts=args.attempts,
            probes=args.probes,
            llm=LLMSettings(
                base_url=args.base_url, price_in=args.price_in, price_out=args.price_out
            ),
        ),
    )
    runs: list[tuple[str, str, int, RunSettings]] = []
    for path in args.files:
        runs.append((PROBE_ROW, path, 0, replace(base, kernel_path=path)))
    if args.writer == "probe":
        return runs
    for model in _models(args.models):
        for path in args.files:
            for repeat in range(args.repeats):
                llm = replace(base.writers.llm, model=model, sample=repeat)
                writers = replace(base.writers, writer="llm", stage2=args.stage2, llm=llm)
                settings = replace(base, kernel_path=path, seed=repeat, writers=writers)
                runs.append((model, path, repeat, settings))
    return runs


def cmd_study(args: argparse.Namespace, console: Console) -> int:
    from mutant_gate.engine.events import RunFinished
    from mutant_gate.engine.formats.site import write_site
    from mutant_gate.engine.study import attribute_own, csv_text, markdown_table, study_row

    runs = plan(args)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise BadInput(f"study: --out is not a directory: {args.out}")
    for _, _, _, settings in runs:
        session.check_extras(settings)  # a model stage with no key: one line, now
    os.makedirs(args.out, exist_ok=True)
    rows, reports = [], []
    # one sandbox and one cache for every run of the study
    with session.Session(runs[0][3], warn=lambda text: _say(console, text)) as study:
        for model, path, repeat, settings in runs:
            start = time.perf_counter()
            report = None
            for event in study.events(settings):
                if isinstance(event, RunFinished):
                    report = event.report
            assert report is not None
            name = os.path.basename(path)
            row = study_row(
                report,
                model=model,
                file=name,
                repeat=repeat + 1,
                wall_s=time.perf_counter() - start,
            )
            rows.append(row)
            reports.append(report)
            attribute_own(rows, PROBE_ROW)
            _say(
                console,
                f"{model} · {name} · repeat {repeat + 1}: killed {row['killed']}/"
                f"{row['mutants']} (own checks {row['own']}, +stage 1 {row['own+stage1']}, "
                f"+stage 2 {row['own+stage1+stage2']}, probe {row['probe']}), "
                f"stage 1 {row['stage1']}, "
                f"{row['model_calls']} model calls ({row['cached_calls']} from the cache), "
                f"{row['wall_s']:.1f} s",
            )
    files = {
        "study.md": markdown_table(rows),
        "study.csv": csv_text(rows),
        "study.json": json.dumps({"runs": rows}, indent=2) + "\n",
    }
    for name, text in files.items():
        with open(os.path.join(args.out, name), "w", encoding="utf-8") as fh:
            fh.write(text)
    site = write_site(reports, os.path.join(args.out, "site"))[0]
    calls = sum(r["model_calls"] for r in rows)
    cached = sum(r["cached_calls"] for r in rows)
    _say(
        console,
        f"study: {len(rows)} runs; {calls} model calls made, {cached} served from the cache; "
        f"table {os.path.join(args.out, 'study.md')}, site {site}",
    )
    return EXIT_OK


def add_commands(sub) -> None:
    study = sub.add_parser(
        "study", help="run files x models x repeats and tabulate kills, claims, tokens, cost"
    )
    study.add_argument("files", nargs="+", help="kernel files")
    study.add_argument("--models", metavar="A,B", help="model ids (comma-separated)")
    study.add_argument("--repeats", type=int, default=1, metavar="N", help="runs per model")
    study.add_argument("--out", metavar="DIR", required=True, help="where the table goes")
    study.add_argument(
        "--writer",
        choices=("llm", "probe"),
        default="llm",
        help="llm (default): stage 1 per run; probe: only the model-free rows",
    )
    study.add_argument("--stage2", action="store_true", help="the model answers survivors")
    study.add_argument("--operators", metavar="LIST", help="as for `run`")
    study.add_argument("--attempts", type=int, default=3, metavar="N")
    study.add_argument("--probes", type=int, default=24, metavar="N")
    study.add_argument("--base-url", metavar="URL", default=DEFAULT_BASE_URL)
    study.add_argument("--price-in", type=float, metavar="USD")
    study.add_argument("--price-out", type=float, metavar="USD")
    study.add_argument("-j", "--jobs", type=int, metavar="N", help="sandbox workers")
    study.add_argument("--cache-dir", metavar="DIR", default=None)
