"""Experiment files, the CLI front door of the app, and window-first imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures_app import isolated_settings, lab  # noqa: F401 - fixtures

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.experiment import load_experiment, save_experiment
from gradviz.gui.widgets.settings_form import LiveSettings

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "resources" / "experiments").glob("*.json"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_experiment_loads(path):
    config, live = load_experiment(path)
    assert config.validated() is config and live.frame_rate > 0


def test_saved_experiment_reads_back_equal(tmp_path):
    config, live = load_experiment(EXAMPLES[0])
    save_experiment(tmp_path / "e.json", config.with_changes(lr=0.5), LiveSettings(2.0))
    again, again_live = load_experiment(tmp_path / "e.json")
    assert again == config.with_changes(lr=0.5) and again_live == LiveSettings(2.0)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", "not valid JSON"),
        ('{"fit": {"n": 10, "colour": "red"}}', "Unknown setting(s) colour"),
        ('{"fit": {"method": "fast"}}', "Unknown method 'fast'"),
        ('{"display": {"fps": 3}}', "Unknown display setting(s) fps"),
        ("[1, 2]", "JSON object"),
    ],
)
def test_bad_experiment_files_say_what_is_wrong(tmp_path, text, words):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(GradvizError, match=None) as caught:
        load_experiment(path)
    assert words in str(caught.value)


def _run(args, **env):
    full = dict(os.environ, PYTHONPATH=str(REPO), **env)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=full,
                          timeout=120, cwd=REPO)  # fmt: skip


def test_gui_with_a_missing_experiment_file_exits_2_with_one_sentence(tmp_path):
    proc = _run(["-m", "gradviz", "gui", "--experiment", str(tmp_path / "none.json")],
                GRADVIZ_SETTINGS_FILE=str(tmp_path / "s.ini"))  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("gradviz gui: error: The experiment file")
    assert "Traceback" not in proc.stderr


def test_the_gui_import_path_does_not_import_torch():
    code = (
        "import sys\n"
        "import gradviz.gui.shell.app, gradviz.gui.pages.lab.controller\n"
        "import gradviz.gui.run.views\n"
        "from gradviz.gui.shell.app import build_controller, create_application\n"
        "create_application(); c = build_controller(); c.window.show()\n"
        "assert 'torch' not in sys.modules, 'torch imported before the window'\n"
        "c.shutdown()\n"
    )
    proc = _run(["-c", code], QT_QPA_PLATFORM="offscreen", GRADVIZ_SETTINGS_SCOPE="test")
    assert proc.returncode == 0, proc.stderr


def test_plain_gradviz_and_main_py_open_the_window(tmp_path):
    env = dict(QT_QPA_PLATFORM="offscreen", GRADVIZ_EXIT_WHEN_SHOWN="1",
               GRADVIZ_SETTINGS_FILE=str(tmp_path / "s.ini"))  # fmt: skip
    for args in (["-m", "gradviz"], ["main.py"]):
        proc = _run(args, **env)
        assert proc.returncode == 0, proc.stderr
        assert "window-shown" in proc.stdout


def test_example_experiments_are_valid_json_objects():
    for path in EXAMPLES:
        assert isinstance(json.loads(path.read_text()), dict)


def _screenshot(tmp_path, name: str, window_size=None) -> tuple[int, int]:
    from PySide6.QtGui import QImage

    out = tmp_path / name
    args = ["-m", "gradviz", "gui", "--screenshot", str(out), "--run-for", "0.2"]
    if window_size is not None:
        args += ["--window-size", "{}x{}".format(*window_size)]
    proc = _run(args, QT_QPA_PLATFORM="offscreen",
                GRADVIZ_SETTINGS_FILE=str(tmp_path / "s.ini"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    image = QImage(str(out))
    return image.width(), image.height()


@pytest.mark.slow
def test_a_screenshot_is_exactly_the_window_size_asked_for_and_else_the_default(tmp_path):
    assert _screenshot(tmp_path, "small.png", (1024, 700)) == (1024, 700)
    # The next launch does not take the size the last one left behind.
    assert _screenshot(tmp_path, "default.png") == (1440, 900)


def test_gui_with_a_bad_window_size_exits_2_with_one_sentence(tmp_path):
    proc = _run(["-m", "gradviz", "gui", "--window-size", "big"], QT_QPA_PLATFORM="offscreen",
                GRADVIZ_SETTINGS_FILE=str(tmp_path / "s.ini"))  # fmt: skip
    assert proc.returncode == 2
    assert "--window-size must look like 1024x700" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("text", "words"), [("1024", "look like"), ("10x10", "at least")])
def test_a_bad_window_size_is_named_in_one_sentence(text, words):
    from gradviz.gui.shell.app import parse_window_size

    assert parse_window_size("1024x700") == (1024, 700)
    with pytest.raises(GradvizError, match=words):
        parse_window_size(text)


@pytest.mark.slow
def test_start_up_reports_painted_then_step_0_and_start_as_they_happen(tmp_path):
    env = dict(QT_QPA_PLATFORM="offscreen", GRADVIZ_STARTUP_REPORT="1",
               GRADVIZ_SETTINGS_FILE=str(tmp_path / "s.ini"))  # fmt: skip
    proc = _run(["-m", "gradviz", "gui"], **env)
    assert proc.returncode == 0, proc.stderr
    moments = proc.stdout.split()
    assert sorted(moments) == ["frame-drawn", "start-enabled", "window-painted"]
    assert moments[0] == "window-painted"  # the window first, then torch


@pytest.mark.parametrize(
    ("free", "expected"),
    [((1024, 668), (1024, 668)), ((2560, 1400), (1440, 900)), ((800, 500), (960, 600))],
)
def test_the_first_window_fits_the_screen_it_opens_on(monkeypatch, qapp, free, expected):
    from PySide6.QtCore import QRect
    from PySide6.QtGui import QGuiApplication

    from gradviz.gui.shell.app import first_launch_size

    class Screen:
        def availableGeometry(self):  # noqa: N802 - Qt's name
            return QRect(0, 0, *free)

    monkeypatch.setattr(QGuiApplication, "primaryScreen", staticmethod(Screen))
    # A 1024 x 700 screen gets a window that fits it, a big one the default, and a tiny
    # one the smallest window the layout is made for.
    assert first_launch_size() == expected


def test_a_bad_experiment_line_exits_2_with_one_sentence(tmp_path):
    proc = _run(["-m", "gradviz", "gui", "--experiment", "helix;n=lots"],
                GRADVIZ_SETTINGS_FILE=str(tmp_path / "s.ini"))  # fmt: skip
    assert proc.returncode == 2
    assert "'n' must be a whole number, got 'lots'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_copy_as_experiment_line_reads_back_as_the_forms_setup(lab):  # noqa: F811
    from PySide6.QtGui import QGuiApplication

    from gradviz.core.settings.compact import experiment_from

    lab.form.param("method").setValue("naive")
    lab.form.param("net").setValue("network")
    lab.window.actions["copy_experiment"].trigger()
    line = QGuiApplication.clipboard().text()
    assert line == "helix;method=naive;net=8-64-3:tanh"
    assert experiment_from(line) == (lab.form.config(), lab.form.live_settings())
