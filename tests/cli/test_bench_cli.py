"""`gradviz bench`: the quick distances run end to end, and how missing suites are handled."""

import json
import types
from pathlib import Path

import pytest
from cli_runner import run_cli

import gradviz.commands.bench as bench_command
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
    # Every other suite is unavailable (the real memory suite alone takes 20 s).
    _without_suites(
        monkeypatch,
        {"jacobians", "gui", "watch", "ddp", "memory", "origin"},
        {"distances": fake},
    )
    assert main(["bench", "--quick", "--repeats", "2", "--json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert calls == [(2, True)]
    assert summary["suites"]["distances"] == {"ok": True}
    assert "skipped" in summary["suites"]["jacobians"]
    assert "gui: skipped" in captured.err and "memory: skipped" in captured.err


@pytest.mark.parametrize("repeats", ["0", "-1"])
def test_fewer_than_one_repeat_is_a_clear_error(capsys, repeats):
    assert main(["bench", "--suite", "distances", "--repeats", repeats]) == 2
    assert "--repeats must be at least 1" in capsys.readouterr().err
