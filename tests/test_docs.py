"""The documentation: README.md, the MkDocs site under docs/, and its generated pages."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
GENERATED = ("cli.md", "operators.md")
SETUP_HEADING = "## Set up (two commands, fresh machine, no GPU needed)"
SETUP_COMMANDS = [
    "pip install torch==2.13.0 && pip install -e . && mutant-gate run examples/vector_add.py",
    "pip install torch==2.13.0 && pip install -e '.[test]' && python -m pytest --run-slow",
]


def _code_blocks(text: str) -> list[tuple[str, list[str]]]:
    """Every fenced code block of a Markdown text: (its info string, its lines)."""
    blocks, current, info = [], None, ""
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current, info = [], line[3:].strip()
            else:
                blocks.append((info, current))
                current = None
        elif current is not None:
            current.append(line)
    assert current is None, "a code block is never closed"
    return blocks


def test_generated_reference_pages_are_current(tmp_path):
    subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_reference.py"), "--out", str(tmp_path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    stale = [
        f"docs/reference/{name}"
        for name in GENERATED
        if (ROOT / "docs" / "reference" / name).read_text(encoding="utf-8")
        != (tmp_path / name).read_text(encoding="utf-8")
    ]
    if stale:
        pytest.fail(
            f"out of date with the code: {', '.join(stale)}; run `python docs/gen_reference.py`"
        )


def test_generated_pages_cover_every_command_and_operator():
    from mutant_gate.engine.mutate import all_operators

    cli = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    for command in ("run", "tui", "replay", "report", "rerun", "cache ls", "baseline add", "study"):
        assert f"## `mutant-gate {command}`" in cli, command
    assert "`--fail-under PCT`" in cli and "`--changed-since REF`" in cli
    operators = (ROOT / "docs" / "reference" / "operators.md").read_text(encoding="utf-8")
    for op in all_operators():
        assert f"### `{op.name}`" in operators, op.name


def test_mkdocs_build_is_strict_clean(tmp_path):
    # mkdocs and mkdocs-material come with the [test] extra: missing, this fails
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for page in ("index.html", "reference/cli/index.html", "reference/operators/index.html"):
        assert (site / page).is_file(), page
    broken = broken_links(site)
    assert broken == [], broken[:10]
    assert (site / "repo" / "examples" / "ci" / "mutant-gate.yml").is_file()


def broken_links(site: Path) -> list[str]:
    """Every link of the built site that points to a file the site lacks (a folder's
    link goes to its index.html): ``page -> link``."""
    broken = []
    for page in site.rglob("*.html"):
        for link in re.findall(r'(?:href|src)="([^"]+)"', page.read_text(encoding="utf-8")):
            if re.match(r"^[a-z][a-z0-9+.-]*:", link) or link.startswith(("#", "//")):
                continue  # another site, mailto:, data:, or the page itself
            path = link.split("#")[0].split("?")[0]
            if not path:
                continue
            target = (site / path.lstrip("/")) if path.startswith("/") else page.parent / path
            if target.is_dir() or path.endswith("/"):
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)} -> {link}")
    return broken


def test_links_out_of_the_docs_name_files_of_the_repository():
    """Links to repository files outside docs/ are written /path from the repository root
    (GitHub resolves them there; MkDocs leaves them as they are)."""
    checked = 0
    for page in (ROOT / "docs").rglob("*.md"):
        for target in re.findall(r"\]\((/[^)#\s]+)", page.read_text(encoding="utf-8")):
            assert (ROOT / target.lstrip("/")).exists(), f"{page.relative_to(ROOT)}: {target}"
            checked += 1
    assert checked >= 10


def test_top_level_pages_link_to_files_that_exist():
    for name in ("README.md", "ARCHITECTURE.md", "CHANGELOG.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
        local = [link for link in links if "://" not in link]
        assert local or name == "CHANGELOG.md", name
        for link in local:
            assert (ROOT / link).exists(), f"{name} links to {link}, which does not exist"


def test_readme_is_short_and_holds_exactly_the_two_setup_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) < 10 * 1024, "README.md must stay under 10 KB"
    assert SETUP_HEADING in text.splitlines()
    section = text.split(SETUP_HEADING, 1)[1].split("\n## ", 1)[0]
    assert [lines for _, lines in _code_blocks(section)] == [[c] for c in SETUP_COMMANDS]
    installs = [line for line in text.splitlines() if "pip install torch" in line]
    assert installs == SETUP_COMMANDS
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b|\b20\d{6}-\d{6}\b", text), "a dated figure"


# Options whose value is a file the command reads (an output path need not exist yet).
_INPUT_OPTIONS = {"--tests", "--config", "--baseline", "--predict"}
_PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*(\.[a-z]+)?$")  # FILE, RUN, YOUR_TEST.py


def _readme_commands() -> list[tuple[Path, list[str]]]:
    commands = []
    for info, lines in _code_blocks(README.read_text(encoding="utf-8")):
        if info not in ("", "sh", "bash", "console"):
            continue  # an output excerpt, not a command
        for line in lines:
            cwd = ROOT
            parts = [part.strip() for part in line.split("&&")]
            for part in parts:
                words = shlex.split(part, comments=True)
                if words[:1] == ["cd"]:
                    cwd = cwd / words[1]
                elif words[:1] == ["mutant-gate"]:
                    commands.append((cwd, words[1:]))
    return commands


def test_readme_commands_name_files_that_exist():
    commands = _readme_commands()
    assert len(commands) >= 4, commands
    assert {words[0] for _, words in commands} >= {"run", "tui", "report"}
    for cwd, words in commands:
        named = []
        if words[0] in ("run", "tui", "study"):
            named += [w for w in words[1:] if not w.startswith("-")][:1]
        named += [
            value for flag, value in zip(words, words[1:], strict=False) if flag in _INPUT_OPTIONS
        ]
        if words[0] in ("run", "tui"):
            assert named, f"`mutant-gate {' '.join(words)}` names no kernel file"
        for path in named:
            # a library run names directories (``run src/pkg --tests tests``)
            assert _PLACEHOLDER.match(path) or (cwd / path).exists(), (
                f"README.md: `mutant-gate {' '.join(words)}` names {path}, "
                f"which is not a file under {cwd.relative_to(ROOT.parent)}"
            )
