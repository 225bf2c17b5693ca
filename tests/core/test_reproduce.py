"""Edit > Copy as command: the copied line must rebuild exactly the same FitConfig."""

from __future__ import annotations

import os
import shlex
from dataclasses import fields

import pytest

from gradviz.cli import build_parser
from gradviz.core.settings.config import FitConfig
from gradviz.core.settings.reproduce import fit_command_line

#: One changed value for every FitConfig field (a test below checks none is missing).
CHANGED = {
    "target": "spiral",
    "n": 37,
    "dim": 2,
    "init": "circle",
    "method": "naive",
    "net": "8-64-3:tanh",
    "optimizer": "sgd",
    "lr": 0.1 + 0.2,  # 0.30000000000000004: needs every digit to round-trip
    "steps": 12,
    "seed": 2**40 + 3,
    "device": "cpu",
    "dtype": "float64",
    "threads": 2,
    "stop_on_nan": True,
}


def parse_fit_line(line: str) -> FitConfig:
    words = shlex.split(line)
    assert words[:2] == ["gradviz", "fit"]
    args = build_parser().parse_args(words[1:])
    return FitConfig(**{f.name: getattr(args, f.name) for f in fields(FitConfig)})


def test_default_settings_copy_as_the_bare_command():
    assert fit_command_line(FitConfig()) == "gradviz fit"
    assert parse_fit_line("gradviz fit") == FitConfig()


def test_every_field_has_a_changed_value_to_test():
    assert set(CHANGED) == {f.name for f in fields(FitConfig)}
    assert all(CHANGED[name] != getattr(FitConfig(), name) for name in CHANGED)


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_one_changed_setting_round_trips_and_only_it_is_written(name):
    config = FitConfig().with_changes(**{name: CHANGED[name]})
    line = fit_command_line(config)
    assert parse_fit_line(line) == config
    options = [w for w in shlex.split(line) if w.startswith("--")]
    assert options == ["--" + name.replace("_", "-")]


def test_all_settings_changed_at_once_round_trip():
    config = FitConfig(**CHANGED)
    assert parse_fit_line(fit_command_line(config)) == config


def test_point_files_with_spaces_and_quotes_round_trip(tmp_path):
    target = tmp_path / "my points 'v2'.csv"
    init = tmp_path / "start;rm -rf x.npy"
    config = FitConfig(target=f"file:{target}", init=f"file:{init}")
    line = fit_command_line(config)
    assert parse_fit_line(line) == config
    assert f"file:{target}" in shlex.split(line)


def test_relative_point_file_becomes_absolute_so_the_line_works_anywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = fit_command_line(FitConfig(target="file:data/points.csv"))
    expected = "file:" + os.path.join(str(tmp_path), "data", "points.csv")
    assert parse_fit_line(line).target == expected


def test_value_starting_with_a_dash_is_not_taken_for_an_option():
    config = FitConfig(device="-weird")
    line = fit_command_line(config)
    assert "--device=-weird" in shlex.split(line)
    assert parse_fit_line(line) == config
