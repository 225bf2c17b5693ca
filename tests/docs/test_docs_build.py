"""The site builds with `mkdocs build --strict`: a broken link or anchor, a page left out of the
navigation, a reference to a name the code does not have, or a results file outside the schema
fails it. Skipped where MkDocs is not installed (`pip install -e ".[docs]"`; CI installs it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from doc_blocks import ROOT
from sample_results import sample_results

pytestmark = pytest.mark.slow


def build(config, site) -> subprocess.CompletedProcess:
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    pytest.importorskip("mkdocstrings")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config)]
    return subprocess.run(
        [*command, "--site-dir", str(site)], capture_output=True, text=True, env=env, timeout=300
    )


def test_the_site_builds_strictly(tmp_path):
    result = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr[-3000:]
    site = tmp_path / "site"
    for page in ("reference/cli", "reference/settings", "reference/api", "performance"):
        assert (site / page / "index.html").is_file()
    assert (site / "resources" / "screenshot-why-nan.png").is_file()
    api = (site / "reference/api/index.html").read_text(encoding="utf-8")
    assert "trace_nonfinite" in api and "per_input_jacobians" in api


def _copy_of_the_docs(tmp_path):
    """The docs and their configuration in a folder of their own, beside links to the code
    and the screenshots, so that a test can add a results file."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns("bench"))
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    for name in ("gradviz", "resources"):
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    return tmp_path


def test_a_committed_results_file_is_shown_on_the_performance_page(tmp_path):
    tree = _copy_of_the_docs(tmp_path / "tree")
    (tree / "docs" / "bench").mkdir()
    (tree / "docs" / "bench" / "sample.json").write_text(json.dumps(sample_results()))
    result = build(tree / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr[-3000:]
    page = (tmp_path / "site" / "performance" / "index.html").read_text(encoding="utf-8")
    assert "Sample CPU 9000" in page and "510.25" not in page and "510" in page
    assert "No results committed" not in page


def test_a_results_file_outside_the_schema_fails_the_build(tmp_path):
    tree = _copy_of_the_docs(tmp_path / "tree")
    (tree / "docs" / "bench").mkdir()
    (tree / "docs" / "bench" / "broken.json").write_text(json.dumps(sample_results(schema=0)))
    result = build(tree / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0 and "broken.json: schema must be 1" in result.stderr
