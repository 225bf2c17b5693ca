"""The screenshots in ``resources/`` on the site, from the files themselves (no copies in docs/).

A page links a screenshot by its place in the repository, relative to the page's own file
(``docs/tutorials/x.md`` writes ``../../resources/screenshot-why-nan.png``), so the link works
where the Markdown is read as it is (GitHub). The site carries each ``resources/*.png`` as
``resources/<name>`` beside the pages, and the page's link is rewritten to that place before
MkDocs checks it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
RESOURCES = ROOT / "resources"
#: Where the site carries the screenshots, relative to the docs folder.
SITE_FOLDER = "resources"

# An image or link target in Markdown: ](target) or ](target "title").
_LINK = re.compile(r"\]\((?P<target>[^)\s]+)(?P<rest>[^)]*)\)")


def screenshots() -> list[Path]:
    """The screenshots the site carries: every PNG directly in ``resources/``."""
    return sorted(RESOURCES.glob("*.png"))


def site_link(page_src_uri: str, target: str) -> str:
    """``target`` as the site needs it: a link from the page ``page_src_uri`` (relative to
    docs/) that points at a repository file in ``resources/`` becomes a link to the site's
    copy; any other target is returned as it is."""
    if "://" in target or target.startswith(("#", "/", "mailto:")):
        return target
    page_dir = posixpath.dirname(page_src_uri)
    # The target's place in the repository (docs/ is one level below the root).
    in_repo = posixpath.normpath(posixpath.join("docs", page_dir, target))
    if posixpath.dirname(in_repo) != "resources" or not (ROOT / in_repo).is_file():
        return target
    on_site = posixpath.join(SITE_FOLDER, posixpath.basename(in_repo))
    return posixpath.relpath(on_site, page_dir or ".")


def rewrite_links(markdown: str, page_src_uri: str) -> str:
    """Every link of ``markdown`` passed through ``site_link``."""

    def replace(match: re.Match) -> str:
        return f"]({site_link(page_src_uri, match['target'])}{match['rest']})"

    return _LINK.sub(replace, markdown)


def on_files(files: Files, config) -> Files:
    for path in screenshots():
        files.append(File.generated(config, f"{SITE_FOLDER}/{path.name}", abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    return rewrite_links(markdown, page.file.src_uri)
