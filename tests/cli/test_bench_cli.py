"""`gradviz bench`: the quick distances run end to end, the results file (`--out`), and how
missing suites are handled."""

import copy
import json
import math
import os
import shlex
import subprocess
import sys
import types
from pathlib import Path

import pytest
from cli_runner import run_cli

import gradviz.commands.bench as bench_command
from gradviz.bench.harness import format_table
from gradviz.cli import main
from gradviz.core.settings.config import DISTANCE_METHODS

ROOT = Path(__file__).resolve().parents[2]


def test_quick_distances_bench_reports_every_method_as_json_on_the_last_line():
    result = run_cli("bench", "--suite", "distances", "--quick", "--repeats", "1", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    distances = summary["suites"]["distances"]
    assert distances["sizes"] == [10, 100]
    for table in ("steps_per_second", "ratio_to_masked"):
        assert set(distances[table]) == set(DISTANCE_METHODS)
        for method in DISTANCE_METHODS:
            assert set(distances[table][method]) == {"10", "100"}
            assert all(v > 0 for v in distances[table][method].values())
    assert distances["ratio_to_masked"]["masked"] == {"10": 1.0, "100": 1.0}
    assert distances["target"]["met"] is None  # the target sizes are not in a quick run
    cpu = distances["op_alone_cpu_time"]["ms"]  # the op against cdist in CPU time
    assert set(cpu) == {f"{t} {s}" for t in ("float32", "float64") for s in ("300x3", "4x100x3")}
    assert all(v > 0 for row in cpu.values() for v in row.values())
    assert "safe" in result.stderr  # the human-readable tables go to stderr with --json


def _without_suites(monkeypatch, missing: set[str], stand_in: dict[str, types.ModuleType]):
    real_import = bench_command.importlib.import_module

    def fake_import(name: str):
        suite = name.rsplit(".", 1)[-1]
        if suite in missing:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return stand_in.get(suite) or real_import(name)

    monkeypatch.setattr(bench_command.importlib, "import_module", fake_import)


def test_naming_a_suite_that_is_not_available_is_a_clear_error(monkeypatch, capsys):
    _without_suites(monkeypatch, {"jacobians"}, {})
    assert main(["bench", "--suite", "jacobians", "--quick", "--repeats", "1"]) == 2
    err = capsys.readouterr().err
    assert "'jacobians' benchmark suite is not available" in err
    assert "Traceback" not in err


def test_all_suites_skips_the_unavailable_ones_with_a_note(monkeypatch, capsys):
    calls = []
    fake = types.ModuleType("gradviz.bench.distances")
    fake.run = lambda repeats, quick, emit: calls.append((repeats, quick)) or {"ok": True}
    # Every other suite is unavailable (the real ones take minutes together).
    _without_suites(monkeypatch, set(bench_command.SUITES) - {"distances"}, {"distances": fake})
    assert main(["bench", "--quick", "--repeats", "2", "--json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert calls == [(2, True)]
    assert summary["suites"]["distances"] == {"ok": True, "tables": []}
    assert "skipped" in summary["suites"]["jacobians"]
    assert "distances: this suite returns no tables as data" in captured.err
    assert "gui: skipped" in captured.err and "memory: skipped" in captured.err


@pytest.mark.parametrize("repeats", ["0", "-1"])
def test_fewer_than_one_repeat_is_a_clear_error(capsys, repeats):
    assert main(["bench", "--suite", "distances", "--repeats", repeats]) == 2
    assert "--repeats must be at least 1" in capsys.readouterr().err


def _strict_json(text: str):
    """Parse standard JSON only: NaN, Infinity and -Infinity are not JSON."""

    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _check_table(table: dict) -> None:
    assert set(table) == {"title", "columns", "rows", "notes"}
    assert isinstance(table["title"], str) and table["title"]
    assert table["columns"] and all(isinstance(c, str) for c in table["columns"])
    assert all(isinstance(n, str) for n in table["notes"])
    assert table["rows"]
    for row in table["rows"]:
        assert len(row) == len(table["columns"])
        assert all(v is None or isinstance(v, (str, int, float, bool)) for v in row)


def test_out_writes_a_results_file_of_schema_1_with_the_suites_tables(tmp_path):
    out = tmp_path / "with space" / "results.json"
    out.parent.mkdir()
    args = ["bench", "--suite", "distances", "--quick", "--repeats", "1", "--out", str(out)]
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    assert f"wrote the results to {out}" in result.stdout
    document = _strict_json(out.read_text())
    assert document["schema"] == 1
    assert document["command"] == shlex.join(["gradviz", *args])
    assert shlex.split(document["command"])[1:] == args  # the path with a space stays one word
    assert document["date"].endswith("+00:00")  # ISO 8601, UTC
    assert document["torch"] and document["gradviz"] and document["python"].count(".") == 2
    machine = document["machine"]
    assert isinstance(machine["cpu"], str) and machine["cores"] >= 1 and machine["platform"]
    for moment in ("before", "after"):
        load = document["load"][moment]
        assert len(load) == 3 and all(isinstance(v, float) and v >= 0 for v in load)
    assert document["repeats"] == 1 and document["quick"] is True
    distances = document["suites"]["distances"]
    assert distances["sizes"] == [10, 100]  # the suite's own results, as before
    titles = [t["title"] for t in distances["tables"]]
    assert titles[:2] == ["steps/s", "ratio to masked (median of per-repeat ratios)"]
    for table in distances["tables"]:
        _check_table(table)
    # A table's figures are the ones the suite reports: the steps/s row of each method.
    speed = {row[0]: row[1:] for row in distances["tables"][0]["rows"]}
    for method, by_n in distances["steps_per_second"].items():
        assert speed[method] == [by_n["10"], by_n["100"]]
    # What was printed is these tables, line for line.
    for table in distances["tables"]:
        for line in format_table(table["columns"], table["rows"]):
            assert "  " + line in result.stdout.splitlines()


def _fake_suite(results: dict):
    fake = types.ModuleType("gradviz.bench.distances")
    fake.calls = []

    def run(repeats, quick, emit):
        fake.calls.append((repeats, quick))
        return copy.deepcopy(results)

    fake.run = run
    return fake


def _only_distances(monkeypatch, fake) -> None:
    others = {"jacobians", "gui", "watch", "ddp", "memory", "origin"}
    _without_suites(monkeypatch, others, {"distances": fake})


def test_not_a_number_is_written_as_null_in_the_results_file(monkeypatch, tmp_path):
    table = {"title": "t", "columns": ["case", "ratio"], "rows": [["a", math.nan]], "notes": []}
    _only_distances(monkeypatch, _fake_suite({"ratio": math.inf, "tables": [table]}))
    out = tmp_path / "r.json"
    assert main(["bench", "--suite", "distances", "--out", str(out)]) == 0
    suite = _strict_json(out.read_text())["suites"]["distances"]
    assert suite["ratio"] is None
    assert suite["tables"][0]["rows"] == [["a", None]]


def test_json_prints_the_same_document_as_the_results_file(monkeypatch, tmp_path, capsys):
    table = {"title": "t", "columns": ["case", "ms"], "rows": [["a", 1.5]], "notes": ["n"]}
    _only_distances(monkeypatch, _fake_suite({"ms": 1.5, "tables": [table]}))
    out = tmp_path / "r.json"
    assert main(["bench", "--suite", "distances", "--json", "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed == _strict_json(out.read_text())
    assert printed["suites"]["distances"] == {"ms": 1.5, "tables": [table]}


@pytest.mark.parametrize(
    "name, words",
    [
        ("missing/r.json", "does not exist"),
        ("r.txt", "must end in .json"),
        ("folder.json", "is a folder"),
    ],
)
def test_a_bad_out_path_is_one_sentence_and_exit_2_before_anything_is_measured(
    monkeypatch, tmp_path, capsys, name, words
):
    (tmp_path / "folder.json").mkdir()
    fake = _fake_suite({"tables": []})
    _only_distances(monkeypatch, fake)
    assert main(["bench", "--suite", "distances", "--out", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err
    assert fake.calls == []  # nothing measured for a file that could not be written


@pytest.mark.slow
def test_the_command_field_is_the_command_line_of_the_process(tmp_path):
    out = tmp_path / "r.json"
    argv = ["bench", "--suite", "distances", "--quick", "--repeats", "1", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "gradviz", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert _strict_json(out.read_text())["command"] == shlex.join(["gradviz", *argv])
