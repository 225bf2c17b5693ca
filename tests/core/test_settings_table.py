"""The settings table: the CLI options and file validation are read from the fields' metadata.

Each test reads the table (``settings_of``) rather than a copied list of fields, so a field
added to FitConfig is covered by these tests without editing them.
"""

from __future__ import annotations

import argparse

import pytest

from gradviz.cli import build_parser, main
from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.config import APP_SETTINGS, FitConfig, LiveSettings
from gradviz.core.settings.experiment import experiment_from_dict
from gradviz.core.settings.table import (
    add_arguments,
    from_arguments,
    needs_reset,
    settings_from_dict,
    settings_of,
)


def _fit_options() -> dict[str, argparse.Action]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {
        flag: action for action in sub.choices["fit"]._actions for flag in action.option_strings
    }


def _beyond(row) -> object:
    """A value just outside the setting's limits."""
    _low, high = row.info.limits
    return high + 1 if row.kind is int else high * 2


def test_every_setting_is_a_fit_option_with_its_default_choices_and_help():
    options = _fit_options()
    for row in settings_of(FitConfig):
        action = options[row.flag]
        assert action.default == row.default, row.name
        assert action.help.startswith(row.info.cli_help or row.info.tooltip), row.name
        if row.info.choices is not None and not row.info.accepts_file:
            assert list(action.choices) == list(row.info.choices), row.name


def test_the_cli_defaults_are_the_run_defaults():
    args = build_parser().parse_args(["fit"])
    assert from_arguments(FitConfig, args) == FitConfig()


@pytest.mark.parametrize(
    "row",
    [row for row in settings_of(FitConfig) if row.info.limits],
    ids=lambda row: row.name,
)
def test_limits_give_the_same_sentence_in_the_cli_and_in_experiment_files(capsys, row):
    value = _beyond(row)
    code = main(["fit", "--steps", "1", row.flag, str(value)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    prefix = "gradviz fit: error: "
    assert err.startswith(prefix) and err.count("\n") == 1
    sentence = err[len(prefix) :].strip()
    assert row.title in sentence and str(value) in sentence
    with pytest.raises(GradvizError) as caught:
        experiment_from_dict({"fit": {row.name: value}}, source="e.json")
    assert str(caught.value) == f"In e.json: {sentence}"


@pytest.mark.parametrize(
    "row",
    [row for row in settings_of(FitConfig) if row.info.choices and not row.info.accepts_file],
    ids=lambda row: row.name,
)
def test_choices_are_enforced_by_the_cli_and_by_experiment_files(capsys, row):
    with pytest.raises(SystemExit) as exited:
        main(["fit", row.flag, "no-such-choice"])
    assert exited.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(GradvizError, match=f"Unknown {row.name} 'no-such-choice'"):
        experiment_from_dict({"fit": {row.name: "no-such-choice"}})


def test_a_new_setting_is_an_option_with_its_limits_and_is_checked_in_files(extended_config):
    ExtendedConfig = extended_config  # noqa: N806 (a class)
    parser = argparse.ArgumentParser()
    add_arguments(parser, ExtendedConfig)
    assert from_arguments(ExtendedConfig, parser.parse_args([])).momentum == 0.9
    assert from_arguments(ExtendedConfig, parser.parse_args(["--momentum", "0.5"])).momentum == 0.5
    with pytest.raises(GradvizError) as from_cli:
        from_arguments(ExtendedConfig, parser.parse_args(["--momentum", "2"]))
    assert str(from_cli.value) == "The momentum must be between 0 and 1, got 2.0."
    with pytest.raises(GradvizError) as from_file:
        settings_from_dict(ExtendedConfig, {"momentum": 2})
    assert str(from_file.value) == str(from_cli.value)
    with pytest.raises(GradvizError, match="'momentum' must be a number"):
        settings_from_dict(ExtendedConfig, {"momentum": "high"})
    assert "Momentum of SGD. [between 0 and 1]" in parser.format_help()


def test_display_settings_in_files_are_checked_against_their_limits():
    with pytest.raises(GradvizError, match="frame_rate.*between 0.5 and 60, got 500"):
        experiment_from_dict({"display": {"frame_rate": 500}})
    assert experiment_from_dict({"display": {"frame_rate": 2}})[1] == LiveSettings(2.0)


def test_only_the_settings_marked_live_apply_without_a_reset():
    rows = settings_of(FitConfig) + settings_of(LiveSettings)
    live = {row.name for row in rows if not needs_reset(row.name, APP_SETTINGS)}
    assert live == {"lr", "frame_rate"}  # the two the running worker can take
