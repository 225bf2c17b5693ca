"""The Performance page's figures, from the committed results files (``docs/bench/*.json``).

``gradviz bench --out FILE.json`` writes one results file (schema 1): the command, date, the
versions of gradviz, torch and Python, the machine, the load average before and after, the
repeats, and per suite its tables (title, columns, rows, notes). This hook replaces the line
``<!-- bench-results -->`` of ``performance.md`` with every file's header and tables, newest
date first, so a change of figures is a new results file, not an edit of prose. With no
results file the page says that no results are committed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

BENCH_DIR = Path(__file__).resolve().parents[1] / "bench"
MARKER = "<!-- bench-results -->"
PAGE = "performance.md"
SCHEMA = 1
NONE_COMMITTED = "No results committed: `docs/bench/` holds no results file."


class ResultsError(ValueError):
    """A results file that does not follow the schema: one sentence naming the file."""


def load_results(folder: Path) -> list[tuple[str, dict]]:
    """Each ``*.json`` of ``folder`` as (file name, its checked contents), newest date first
    (then by name). A missing folder holds none."""
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ResultsError(f"{path.name}: not a JSON results file ({exc}).") from None
        check_results(path.name, data)
        found.append((path.name, data))
    found.sort(key=lambda item: item[0])
    found.sort(key=lambda item: item[1]["date"], reverse=True)
    return found


def check_results(name: str, data: Any) -> None:
    """ResultsError unless ``data`` has what the page shows, of the right types."""

    def need(ok: bool, what: str) -> None:
        if not ok:
            raise ResultsError(f"{name}: {what}.")

    need(isinstance(data, dict), "the file holds no JSON object")
    need(data.get("schema") == SCHEMA, f"schema must be {SCHEMA}, got {data.get('schema')!r}")
    for key in ("command", "date", "gradviz", "torch", "python"):
        need(isinstance(data.get(key), str), f"'{key}' must be a text")
    machine = data.get("machine")
    need(isinstance(machine, dict), "'machine' must be an object")
    need(isinstance(machine.get("cpu"), str), "'machine.cpu' must be a text")
    need(isinstance(machine.get("cores"), int), "'machine.cores' must be a whole number")
    need(isinstance(machine.get("platform"), str), "'machine.platform' must be a text")
    load = data.get("load")
    need(isinstance(load, dict), "'load' must be an object")
    for key in ("before", "after"):
        need(_is_load(load.get(key)), f"'load.{key}' must be three numbers (1, 5, 15 min)")
    need(isinstance(data.get("repeats"), int), "'repeats' must be a whole number")
    need(isinstance(data.get("quick"), bool), "'quick' must be true or false")
    suites = data.get("suites")
    need(isinstance(suites, dict), "'suites' must be an object")
    for suite, result in suites.items():
        need(isinstance(result, dict), f"suite '{suite}' must be an object")
        for i, table in enumerate(result.get("tables", [])):
            _check_table(f"{name}: suite '{suite}', table {i + 1}", table)


def _is_load(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 3
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    )


def _check_table(where: str, table: Any) -> None:
    if not isinstance(table, dict) or not isinstance(table.get("title"), str):
        raise ResultsError(f"{where}: a table needs a 'title' text.")
    columns = table.get("columns")
    if not isinstance(columns, list) or not columns:
        raise ResultsError(f"{where}: 'columns' must be a list of column names.")
    rows = table.get("rows")
    if not isinstance(rows, list) or any(
        not isinstance(row, list) or len(row) != len(columns) for row in rows
    ):
        raise ResultsError(f"{where}: each row must be a list of {len(columns)} cells.")
    if not isinstance(table.get("notes", []), list):
        raise ResultsError(f"{where}: 'notes' must be a list of texts.")


def cell(value: Any) -> str:
    """A table cell as the page shows it: a text as it is, a whole number with thousands
    separators, any other number to 3 significant digits (the file keeps every digit), null
    (not measured, or not a number) as a dash."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return _significant(value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def _significant(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, but never fewer than its whole part."""
    if value == 0 or not math.isfinite(value):
        return str(value)
    if abs(value) >= 10 ** (digits - 1):
        return f"{value:,.0f}"
    rounded = float(f"{value:.{digits}g}")  # 0.999999 is 1.00, not 1.000
    if abs(rounded) >= 1e-3:
        return f"{rounded:.{max(0, digits - 1 - math.floor(math.log10(abs(rounded))))}f}"
    return f"{value:.{digits}g}"


def _load_words(load: list[float]) -> str:
    return " / ".join(f"{v:.2f}" for v in load)


def render_file(name: str, data: Mapping[str, Any]) -> str:
    """One results file: its header (what ran where) and each suite's tables."""
    machine = data["machine"]
    lines = [
        f"### {data['date']}: {machine['cpu']}",
        "",
        "| | |",
        "| --- | --- |",
        f"| command | `{cell(data['command'])}` |",
        f"| date | {cell(data['date'])} |",
        f"| machine | {cell(machine['cpu'])}, {machine['cores']} cores, "
        f"{cell(machine['platform'])} |",
        f"| versions | gradviz {cell(data['gradviz'])}, torch {cell(data['torch'])}, "
        f"Python {cell(data['python'])} |",
        f"| load average (1, 5, 15 min) | before {_load_words(data['load']['before'])}; "
        f"after {_load_words(data['load']['after'])} |",
        f"| repeats | {data['repeats']}"
        + (" (quick: small sizes only)" if data["quick"] else "")
        + " |",
        f"| results file | `docs/bench/{name}` |",
    ]
    for suite, result in data["suites"].items():
        lines += ["", f"#### Suite `{suite}`", ""]
        tables = result.get("tables", [])
        if not tables:
            reason = result.get("skipped")
            lines.append(f"Skipped: {cell(reason)}." if reason else "No tables in this suite.")
        for table in tables:
            lines += render_table(table)
    return "\n".join(lines) + "\n"


def render_table(table: Mapping[str, Any]) -> list[str]:
    """A table as Markdown: its title, the rows, then its notes."""
    columns = table["columns"]
    lines = [f"**{cell(table['title'])}**", ""]
    lines.append("| " + " | ".join(cell(c) for c in columns) + " |")
    lines.append("| " + " | ".join("---" for _ in columns) + " |")
    for row in table["rows"]:
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    notes = table.get("notes", [])
    if notes:
        lines.append("")
        lines += [f"- {cell(note)}" for note in notes]
    lines.append("")
    return lines


def render_results(folder: Path) -> str:
    """Every results file of ``folder``, or the sentence saying none is committed."""
    files = load_results(folder)
    if not files:
        return NONE_COMMITTED + "\n"
    return "\n".join(render_file(name, data) for name, data in files)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise PluginError(f"{PAGE} has lost its line {MARKER}, where the results go.")
    try:
        results = render_results(BENCH_DIR)
    except ResultsError as exc:
        raise PluginError(f"docs/bench/{exc}") from None
    return markdown.replace(MARKER, results)
