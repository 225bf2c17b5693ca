"""Links that the strict build cannot check: the README's, which GitHub shows, and the pages'
links to screenshots in resources/, which the site carries under its own folder."""

from __future__ import annotations

import re

import pytest
from doc_blocks import ROOT

_LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_every_relative_link_of_the_readme_reaches_a_file():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = [link for link in _LINK.findall(text) if "://" not in link]
    assert links, "the README links into the docs"
    missing = [link for link in links if not (ROOT / link.split("#")[0]).exists()]
    assert missing == []


def test_the_readme_links_into_the_docs_pages():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {link.split("#")[0] for link in _LINK.findall(text)}
    for page in ("docs/getting-started.md", "docs/architecture.md", "docs/performance.md"):
        assert page in linked


def test_a_screenshot_link_becomes_the_sites_copy_and_other_links_stay():
    pytest.importorskip("mkdocs")
    from hook_modules import load_hook

    resources = load_hook("resources")
    shot = "screenshot-why-nan.png"
    assert resources.site_link("tutorials/a.md", f"../../resources/{shot}") == (
        f"../resources/{shot}"
    )
    assert resources.site_link("index.md", f"../resources/{shot}") == f"resources/{shot}"
    for target in ("../how-to/cli.md", "https://zarr.dev", "#anchor", "../../resources/none.png"):
        assert resources.site_link("tutorials/a.md", target) == target
    text = f'![x](../../resources/{shot} "t") and [y](other.md)'
    assert resources.rewrite_links(text, "app/lab.md") == (
        f'![x](../resources/{shot} "t") and [y](other.md)'
    )


def test_every_screenshot_a_page_shows_exists():
    for page in (ROOT / "docs").rglob("*.md"):
        for link in _LINK.findall(page.read_text(encoding="utf-8")):
            if link.endswith(".png"):
                assert (page.parent / link).resolve().is_file(), f"{page}: {link}"
