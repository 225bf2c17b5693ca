"""Every bash and Python block of the README and the docs runs, so a documented behaviour
that stops working fails the tests (see doc_blocks.py for how each kind of block runs).

One test per page: its blocks run in order in a fresh folder, as a reader types them. A page
whose blocks start another process (the app, a script) is marked slow; CI runs those too.
"""

from __future__ import annotations

import os

import pytest
from doc_blocks import ROOT, RUN, SHOWN, PageRun, blocks_of, doc_files, is_costly, stray_directives


def _page_param(path):
    blocks = blocks_of(path)
    marks = [pytest.mark.slow] if any(is_costly(b) for b in blocks) else []
    return pytest.param(path, id=str(path.relative_to(ROOT)), marks=marks)


PAGES = [path for path in doc_files() if any(b.runs for b in blocks_of(path))]


@pytest.mark.parametrize("path", [_page_param(p) for p in PAGES])
def test_the_page_examples_run(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # Processes an example starts import this checkout's gradviz, as where it is installed.
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    )
    page = PageRun(tmp_path)
    try:
        for block in blocks_of(path):
            if block.runs:
                page.run(block)
    finally:
        page.close()


def test_every_skipped_block_says_why():
    unexplained = [
        block.where for path in doc_files() for block in blocks_of(path) if block.skip_reason == ""
    ]
    assert unexplained == [], "a <!-- docs-test: skip --> needs its reason"


def test_every_docs_test_comment_is_known_and_stands_before_a_block():
    unknown = [
        (block.where, block.directive)
        for path in doc_files()
        for block in blocks_of(path)
        if not block.known_directive
    ]
    stray = [(str(path), line) for path in doc_files() for line in stray_directives(path)]
    assert unknown == [] and stray == []


def test_no_code_block_escapes_the_tests_under_another_language():
    other = [
        (block.where, block.lang)
        for path in doc_files()
        for block in blocks_of(path)
        if block.lang not in RUN + SHOWN
    ]
    assert other == [], f"blocks must be one of {RUN + SHOWN} (bash and python are run)"


def test_the_readme_and_the_docs_have_examples_to_run():
    """A parser that stopped finding blocks would pass every test above."""
    readme = blocks_of(ROOT / "README.md")
    assert sum(b.runs for b in readme) >= 2
    assert len(PAGES) >= 8
