"""A MkDocs hook: links out of the docs to repository files land on the built site too.

The pages link to files of the repository outside ``docs/`` as ``/path`` from the
repository root, which GitHub resolves. A built site has no such files, so the hook
copies each linked file (or folder, with an index page listing it) under ``repo/`` in
the site and points the link there, relative to the page, so the site works wherever
it is served from. ``tests/test_docs.py`` checks every link of the built site.
"""

from __future__ import annotations

import html
import os
import posixpath
import re
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: where the linked repository files go in the site
PREFIX = "repo"
_HREF = re.compile(r'href="/([^"#?]+)((?:#[^"]*)?)"')

_linked: set[str] = set()


def _target(path: str) -> str | None:
    """The site path a repository link goes to, or None when ``path`` is no repository
    file or folder (a link the hook leaves alone)."""
    local = os.path.join(ROOT, path)
    if path.startswith("docs/") or not os.path.exists(local):
        return None
    _linked.add(path.rstrip("/"))
    if os.path.isdir(local):
        return f"{PREFIX}/{path.rstrip('/')}/index.html"
    return f"{PREFIX}/{path}"


def on_page_content(html_text: str, page, config, files) -> str:  # noqa: ARG001 (MkDocs' signature)
    """Each ``href="/path"`` to a repository file, relative to the page's own URL."""
    here = posixpath.dirname(page.url.rstrip("/") + "/x") if page.url else ""

    def relative(match: re.Match) -> str:
        target = _target(match.group(1))
        if target is None:
            return match.group(0)
        return f'href="{posixpath.relpath(target, here or ".")}{match.group(2)}"'

    return _HREF.sub(relative, html_text)


def _index(folder: str, site_dir: str) -> None:
    """An index page for a linked folder: its files, each a link."""
    out = os.path.join(site_dir, PREFIX, folder)
    names = sorted(os.listdir(os.path.join(ROOT, folder)))
    items = "\n".join(
        f'<li><a href="{html.escape(n)}{"/index.html" if os.path.isdir(os.path.join(out, n)) else ""}">'
        f"{html.escape(n)}</a></li>"
        for n in names
    )
    with open(os.path.join(out, "index.html"), "w", encoding="utf-8") as fh:
        fh.write(
            f"<!doctype html><meta charset=utf-8><title>{html.escape(folder)}</title>"
            f"<h1>{html.escape(folder)}/</h1><ul>\n{items}\n</ul>\n"
        )
    for name in names:
        if os.path.isdir(os.path.join(out, name)):
            _index(f"{folder}/{name}", site_dir)


def on_post_build(config) -> None:
    """Copy every linked repository file and folder into the site."""
    site_dir = config["site_dir"]
    for path in sorted(_linked):
        source = os.path.join(ROOT, path)
        dest = os.path.join(site_dir, PREFIX, path)
        if os.path.isdir(source):
            shutil.copytree(source, dest, dirs_exist_ok=True)
            _index(path, site_dir)
        else:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy2(source, dest)
    _linked.clear()
