"""One set of run defaults (the app, ``gradviz fit``, experiment files and ``--help`` agree);
Start over a shown recording asks first; dialog titles say what failed."""

from __future__ import annotations

import pytest
from fixtures_app import isolated_settings, make_lab  # noqa: F401 - fixtures
from PySide6.QtCore import Qt
from recording_fixtures import write_fit_recording

from gradviz.cli import build_parser
from gradviz.core.settings.config import FitConfig
from gradviz.core.settings.experiment import experiment_from_dict
from gradviz.core.settings.table import from_arguments, settings_of
from gradviz.gui.widgets.settings_form import DEFAULT_EXPERIMENT, SetupForm


def test_the_cli_and_an_experiment_file_take_the_apps_defaults():
    cli = from_arguments(FitConfig, build_parser().parse_args(["fit"]))
    assert cli == DEFAULT_EXPERIMENT
    assert (cli.target, cli.n, cli.method) == ("helix", 200, "masked")
    config, _ = experiment_from_dict({"fit": {"method": "naive"}})
    assert config == DEFAULT_EXPERIMENT.with_changes(method="naive")


def test_fit_help_prints_every_default(capsys):
    help_text = " ".join(
        build_parser()._subparsers._group_actions[0].choices["fit"].format_help().split()
    )
    for row in settings_of(FitConfig):
        if row.default not in (None, False):
            assert f"(default: {row.default})" in help_text, row.name


def test_typing_0_in_n_points_is_refused_with_a_message_not_turned_into_2(qtbot):
    form = SetupForm()
    qtbot.addWidget(form)
    form.show()
    (item,) = form.param("n").items
    editor = item.widget
    editor.lineEdit().selectAll()
    qtbot.keyClicks(editor.lineEdit(), "0")
    qtbot.keyClick(editor.lineEdit(), Qt.Key.Key_Return)
    assert form.param("n").value() == 0
    assert "between 2 and" in form.problem_text and form.problem.isVisible()


def test_dialog_titles_say_what_failed(qtbot, make_lab, tmp_path):  # noqa: F811
    lab = make_lab(wait_ready=False)
    bad = tmp_path / "bad.json"
    bad.write_text('{"fit": {"method": "fast"}}')
    lab.experiments.open(str(bad))
    dialog = lab.error_dialog
    assert dialog.windowTitle() == "gradviz: the experiment file was not opened"
    lab.recordings.open(str(tmp_path))  # not a recording
    assert lab.error_dialog.windowTitle() == "gradviz: recordings"
    assert "stopped" not in lab.error_dialog.windowTitle()


@pytest.fixture(scope="module")
def fit_recording(tmp_path_factory):
    """A lab recording, read once here: zarr's I/O threads (which live as long as the
    process) start before the tests that check no thread is left behind."""
    import zarr

    path = write_fit_recording(tmp_path_factory.mktemp("fit") / "run", steps=8)
    zarr.open_group(path, mode="r")["rank0/images/distances/data"][:]
    return path


def test_start_while_a_recording_is_shown_asks_before_replacing_it(
    qtbot,
    make_lab,  # noqa: F811 - fixture
    fit_recording,
):
    from gradviz.gui.run.session import RunState

    path = fit_recording
    lab = make_lab()
    shown = []
    lab.recordings.shown.connect(shown.append)
    assert lab.recordings.open(str(path))
    qtbot.waitUntil(lambda: bool(shown) and lab.session.shown is not None, timeout=60_000)
    qtbot.waitUntil(lambda: lab.session.shown.generation < 0, timeout=60_000)
    lab.answer = False
    lab.start()
    assert lab.questions == ["Leave the recording?"]
    assert lab.session.state is not RunState.RUNNING
    assert lab.session.shown.generation < 0  # the recording is still what the lab shows
    lab.answer = True
    lab.start()
    qtbot.waitUntil(lambda: lab.session.state.going, timeout=60_000)
    lab.session.stop()
