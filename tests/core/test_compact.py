"""Experiments in one line (``helix;n=200;net=8-16:relu-3;method=masked``) for
``gradviz gui --experiment`` and the Edit menu."""

from __future__ import annotations

import json

import pytest

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.compact import experiment_from, parse_compact, to_compact
from gradviz.core.settings.config import FitConfig, LiveSettings


def test_the_documented_example_reads_as_its_settings():
    config, live = parse_compact("helix;n=200;net=8-16:relu-3;method=masked")
    assert config == FitConfig(target="helix", n=200, net="8-16:relu-3", method="masked")
    assert live == LiveSettings()


@pytest.mark.parametrize(
    ("config", "live"),
    [
        (FitConfig(), LiveSettings()),
        (FitConfig(target="moons", dim=2, lr=0.003, threads=1, stop_on_nan=True), None),
        (FitConfig(target="file:/data/a=b.csv", net="8-16:relu-16:tanh-2"), LiveSettings(2.5)),
        (FitConfig(target="gaussian", seed=2**63 - 1, dtype="float64"), LiveSettings()),
    ],
)
def test_a_setup_written_in_one_line_reads_back_exactly(config, live):
    line = to_compact(config, live)
    assert parse_compact(line) == (config, live or LiveSettings())


def test_only_what_differs_from_the_defaults_is_written():
    assert to_compact(FitConfig()) == "helix"
    assert to_compact(FitConfig(method="naive", net="8-16-3:tanh")) == (
        "helix;method=naive;net=8-16-3:tanh"
    )


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("helix;n=lots", "'n' must be a whole number, got 'lots'"),
        ("helix;colour=red", "Unknown setting 'colour'"),
        ("helix;n=20;n=30", "sets n twice"),
        ("helix;masked", "'masked' in 'helix;masked' is not name=value"),
        ("helix;method=sqrt", "Unknown method 'sqrt'"),
        ("helix;n=1", "between 2"),
        ("helix;stop_on_nan=maybe", "true or false"),
    ],
)
def test_a_bad_line_is_refused_in_one_sentence(line, words):
    with pytest.raises(GradvizError, match=words):
        parse_compact(line)


def test_a_value_with_a_semicolon_cannot_be_written_in_one_line():
    with pytest.raises(GradvizError, match="save an experiment file"):
        to_compact(FitConfig(target="file:/data/a;b.csv"))


def test_experiment_argument_is_a_file_when_one_exists_else_a_line(tmp_path):
    path = tmp_path / "n=30.json"  # a file name with '=' is still a file
    path.write_text(json.dumps({"fit": {"n": 30}}))
    assert experiment_from(str(path))[0].n == 30
    assert experiment_from("grid;n=30")[0] == FitConfig(target="grid", n=30)
    with pytest.raises(GradvizError, match="does not exist"):
        experiment_from(str(tmp_path / "missing.json"))
