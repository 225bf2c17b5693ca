"""The Performance page shows every committed results file's tables with the header that says
where and how they were measured, and says "no results committed" only when there are none."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mkdocs")

from hook_modules import load_hook  # noqa: E402
from sample_results import sample_results  # noqa: E402

performance = load_hook("performance")


def write(folder, name, data):
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(json.dumps(data), encoding="utf-8")


def test_a_results_file_is_shown_with_its_machine_versions_load_and_command(tmp_path):
    write(tmp_path, "sample.json", sample_results())
    page = performance.render_results(tmp_path)
    assert "`gradviz bench --suite jacobians --quick --out docs/bench/sample.json`" in page
    assert "Sample CPU 9000, 2 cores, Linux-6.1-x86_64" in page
    assert "gradviz 0.1.0, torch 2.13.0+cpu, Python 3.11.7" in page
    assert "before 0.50 / 0.75 / 1.00; after 1.25 / 1.00 / 1.00" in page
    assert "3 (quick: small sizes only)" in page and "2026-12-01T10:00:00+00:00" in page
    assert performance.NONE_COMMITTED not in page


def test_every_table_row_and_note_is_on_the_page(tmp_path):
    write(tmp_path, "sample.json", sample_results())
    page = performance.render_results(tmp_path)
    assert "**ms per Jacobian of a batch**" in page
    assert "| net | B | auto | loop |" in page
    assert "| 2-20-20-4:tanh | 1,024 | 0.831 | 506 |" in page
    assert "| 64-256-256-10:tanh | 16,384 | 510 | - |" in page  # null: not measured
    assert "- loop timed on its first samples and scaled" in page
    assert "#### Suite `memory`" in page and "Skipped: not enough free memory." in page


def test_numbers_keep_three_significant_digits_and_their_whole_part():
    cell = performance.cell
    assert [cell(v) for v in (0.999999, 0.0012345, 28.0797, 123456.7, 7, True, None)] == [
        "1.00", "0.00123", "28.1", "123,457", "7", "yes", "-",
    ]  # fmt: skip
    assert cell("a|b") == "a\\|b"  # a pipe would split the Markdown table's cell


def test_files_are_shown_newest_first(tmp_path):
    write(tmp_path, "a-old.json", sample_results(date="2026-01-01T00:00:00+00:00"))
    write(tmp_path, "b-new.json", sample_results(date="2026-06-01T00:00:00+00:00"))
    page = performance.render_results(tmp_path)
    assert page.index("docs/bench/b-new.json") < page.index("docs/bench/a-old.json")


@pytest.mark.parametrize("folder", ["empty", "absent"])
def test_with_no_results_file_the_page_says_none_is_committed(tmp_path, folder):
    if folder == "empty":
        (tmp_path / folder).mkdir()
    assert performance.render_results(tmp_path / folder).strip() == performance.NONE_COMMITTED


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"schema": 2}, "schema must be 1"),
        ({"machine": {"cpu": "x", "platform": "y"}}, "'machine.cores' must be a whole number"),
        ({"load": {"before": [1, 2], "after": [1, 2, 3]}}, "'load.before' must be three numbers"),
        ({"command": None}, "'command' must be a text"),
    ],
)
def test_a_file_outside_the_schema_is_named_with_what_is_wrong(tmp_path, change, words):
    write(tmp_path, "bad.json", sample_results(**change))
    with pytest.raises(performance.ResultsError, match="bad.json") as caught:
        performance.render_results(tmp_path)
    assert words in str(caught.value)


def test_a_row_of_the_wrong_length_is_refused(tmp_path):
    data = sample_results()
    data["suites"]["jacobians"]["tables"][0]["rows"].append(["only one cell"])
    write(tmp_path, "bad.json", data)
    with pytest.raises(performance.ResultsError, match="each row must be a list of 4 cells"):
        performance.render_results(tmp_path)


def test_the_page_marker_is_replaced_and_its_loss_fails_the_build(tmp_path, monkeypatch):
    from mkdocs.exceptions import PluginError

    write(tmp_path, "sample.json", sample_results())
    monkeypatch.setattr(performance, "BENCH_DIR", tmp_path)

    class Page:
        class file:  # noqa: N801 (the shape of mkdocs' Page.file)
            src_uri = "performance.md"

    shown = performance.on_page_markdown(f"# P\n\n{performance.MARKER}\n", Page, None, None)
    assert "Sample CPU 9000" in shown and performance.MARKER not in shown
    with pytest.raises(PluginError, match="bench-results"):
        performance.on_page_markdown("# P\n", Page, None, None)


def test_the_committed_performance_page_holds_the_marker():
    from hook_modules import HOOKS

    assert performance.MARKER in (HOOKS.parent / performance.PAGE).read_text(encoding="utf-8")
