"""Report formats: each a pure function from the JSON report (a dict, built by
``engine/report.py``) to text.

``json`` is the report itself (schema in README.md); ``stryker`` is Stryker's
mutation-testing-report-schema; ``junit`` one testcase per mutant; ``markdown`` a
pull-request comment; ``html`` one self-contained offline page. The CLI writes them
after a run (``--stryker PATH``...) and from a cached run (``mutant-gate report``).
Each renderer's module is imported when that format is written: a run that writes
none of them (most runs, and every cached rerun) does not pay for their imports.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from ..errors import BadInput
from . import modules  # a library's modules and kernels, as every face counts them


def json_text(report: dict) -> str:
    return json.dumps(report, indent=2) + "\n"


def stryker_text(report: dict) -> str:
    from .stryker import stryker_report

    return json.dumps(stryker_report(report), indent=2) + "\n"


def junit_text(report: dict) -> str:
    from .junit import junit_xml

    return junit_xml(report)


def markdown_text(report: dict) -> str:
    from .markdown import markdown_summary

    return markdown_summary(report)


def html_text(report: dict) -> str:
    from .html import html_page

    return html_page(report)


#: format name -> renderer (report dict -> text)
FORMATS: dict[str, Callable[[dict], str]] = {
    "json": json_text,
    "stryker": stryker_text,
    "junit": junit_text,
    "markdown": markdown_text,
    "html": html_text,
}


def render(report: dict, fmt: str) -> str:
    if fmt not in FORMATS:
        raise BadInput(f"unknown report format {fmt!r}; one of {', '.join(FORMATS)}")
    return FORMATS[fmt](report)


def check_writable(path: str, what: str) -> None:
    """Fail before a run, not after it, when a report could not be written."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise BadInput(f"{what}: directory does not exist: {parent}")
    if os.path.isdir(path):
        raise BadInput(f"{what}: is a directory: {path}")


def write(report: dict, fmt: str, path: str) -> None:
    text = render(report, fmt)
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise BadInput(f"cannot write the {fmt} report to {path}: {exc.strerror}") from None


__all__ = ["FORMATS", "check_writable", "modules", "render", "write"]
