"""One run, one state: every part of the window agrees about the run (real widgets, real runs).

Each test here is a defect a user met when two parts of the window kept their own copy of
the run's state; each drives the real widgets.
"""
# The shared fixtures are imported by name, which pyflakes reads as a redefinition:
# ruff: noqa: F811

from __future__ import annotations

import json
import re
import shlex

import numpy as np
import pytest
from fixtures_app import (  # noqa: F401 - fixtures
    RUN_TIMEOUT_MS,
    isolated_settings,
    make_lab,
    small,
)
from PySide6.QtWidgets import QApplication, QWidget

from gradviz.core.common.health import Health
from gradviz.gui.run.session import RunState

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pyqtgraph")


def _status(lab, name: str) -> str:
    return lab.window.status_labels[name].text()


# ---- defect 1: a hovered cell beyond a smaller matrix ----------------------------------------
def test_a_hovered_cell_beyond_a_new_smaller_matrix_raises_nothing(qtbot):
    from gradviz.gui.widgets.heatmap import HeatmapView

    view = HeatmapView("d_pred")
    qtbot.addWidget(view)
    view.resize(400, 400)
    view.show()
    qtbot.waitExposed(view)
    view.set_matrix(np.arange(50 * 50, dtype=np.float32).reshape(50, 50))
    view.view.scene().sigMouseMoved.emit(view.cell_scene_pos(40, 3))  # the pointer rests
    assert "i = 40" in view.readout.text()
    view.set_matrix(np.ones((20, 20), dtype=np.float32))  # N changed; the pointer has not moved
    view.set_matrix(np.zeros((20, 20), dtype=np.float32))
    assert "i = 40" not in view.readout.text()


def test_the_error_dialogs_details_never_cover_its_buttons(qtbot):
    from gradviz.gui.shell.dialogs import ErrorDialog

    dialog = ErrorDialog("The run stopped.", "Traceback\n" * 80, "/tmp/gradviz.log")
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    dialog.show_button.click()
    QApplication.processEvents()
    details = dialog.details_box.geometry()
    buttons = dialog.show_button.parentWidget().geometry()
    assert details.bottom() < buttons.top()
    assert dialog.height() >= dialog.layout().minimumSize().height()


# ---- defect 3: naive at step 0 ----------------------------------------------------------------
def test_naive_at_step_0_the_status_bar_and_why_nan_agree_with_the_health_view(make_lab):
    lab = make_lab(small("naive"))
    assert lab.views.snapshot.step == 0
    assert lab.views.widgets["mask"].counts()[Health.NAN] == 24  # the diagonal
    assert "NaN/Inf gradient first at step 0" in _status(lab, "nan")
    assert "finite" not in _status(lab, "nan")
    assert lab.window.actions["why_nan"].isEnabled()
    assert lab.window.actions["first_nan"].isEnabled()


# ---- defect 4: one number per quantity, named, as the CLI reports it -------------------------
@pytest.mark.parametrize("method", ["naive", "masked", "safe"])
def test_status_bar_loss_plot_and_cli_agree_on_every_steps_loss(
    qtbot, make_lab, method, tmp_path, capsys
):
    from gradviz.cli import main as cli_main
    from gradviz.core.settings.reproduce import fit_command_line

    lab = make_lab(small(method, n=12, steps=25))
    lab.start()
    qtbot.waitUntil(lambda: lab.session.state is RunState.FINISHED, timeout=RUN_TIMEOUT_MS)
    args = shlex.split(fit_command_line(lab.session.config))[2:]
    capsys.readouterr()
    assert cli_main(["fit", *args, "--json", "--out", str(tmp_path / "run.npz")]) == 0
    cli = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    losses = np.load(tmp_path / "run.npz")["loss"]
    # The loss plot: step k's loss at x = k, NaN/Inf marked at the CLI's steps.
    plot = lab.views.widgets["loss"]
    x, y = plot.curve.getOriginalDataset()
    drawable = np.isfinite(losses) & (losses > 0)
    np.testing.assert_array_equal(x, np.flatnonzero(drawable))
    np.testing.assert_allclose(y, losses[drawable], rtol=1e-12)
    bad = np.flatnonzero(~np.isfinite(losses))
    assert plot.nonfinite_steps().tolist() == bad.tolist()
    if len(bad):
        assert bad[0] == cli["first_nonfinite_loss_step"]
        assert plot.first_bad_line.value() == cli["first_nonfinite_loss_step"]
    # The status bar names its loss, with the CLI's number for that quantity.
    label = _status(lab, "loss")
    if label.startswith("final loss"):
        expected = cli["final_loss"]
    else:
        k = int(re.match(r"loss of step ([\d,]+) =", label).group(1).replace(",", ""))
        expected = losses[k]
    if expected is None or not np.isfinite(expected):
        assert label.endswith("= nan"), label
    else:
        assert label.endswith(f"= {expected:.4g}"), (label, expected)
    # Both first non-finite steps, each named, with the CLI's numbers.
    nan_text = _status(lab, "nan")
    grad, loss = cli["first_nonfinite_grad_step"], cli["first_nonfinite_loss_step"]
    assert (f"gradient first at step {grad}" in nan_text) == (grad is not None)
    assert (f"loss first at step {loss}" in nan_text) == (loss is not None)
    if grad is None and loss is None:
        assert nan_text == "gradients finite"


# ---- defect 5: the loss axis after a new run -------------------------------------------------
def test_the_loss_axis_fits_a_new_run_after_a_reset(qtbot):
    from gradviz.gui.widgets.loss import LossView

    view = LossView()
    qtbot.addWidget(view)
    view.resize(400, 300)
    view.show()
    view.set_history(np.geomspace(1e-9, 1e-14, 50))  # the last run converged
    view.clear()  # Reset
    view.set_history(np.zeros(0))  # step 0 of the new run: no loss yet
    view.set_history(np.array([1.6, 0.9, 0.3, 0.02]))
    _, (y0, y1) = view.plot.getViewBox().viewRange()  # log10 units
    assert np.log10(0.02) - 0.3 <= y0 <= np.log10(0.02)
    assert np.log10(1.6) <= y1 <= np.log10(1.6) + 0.3


# ---- defect 7: closing while the comparison runs ---------------------------------------------
def test_closing_the_window_while_compare_runs_asks_first(qtbot, make_lab):
    lab = make_lab(small("safe", n=10))
    window = lab.investigations.open_compare()
    window.start()
    qtbot.waitUntil(lambda: window.left.session.latest is not None, timeout=RUN_TIMEOUT_MS)
    assert lab.session.state is RunState.READY  # the lab itself has not run
    lab.answer = False
    assert not lab.window.close()
    assert lab.questions == ["Quit gradviz?"]
    assert window.left.session.state is RunState.RUNNING
    lab.answer = True
    assert lab.window.close()
    assert lab.thread_count == 0


# ---- defect 9: what the toolbar and the status bar offer before and between runs -------------
def test_before_anything_has_run_only_start_step_and_reset_are_offered(make_lab):
    lab = make_lab(small("safe"))
    a = lab.window.actions
    assert a["start"].isEnabled() and a["step"].isEnabled() and a["reset"].isEnabled()
    assert not a["pause"].isEnabled() and not a["pause"].isCheckable()
    assert a["pause"].iconText() == "Pause"
    assert not a["stop"].isEnabled()
    assert _status(lab, "state") == "ready"


def test_a_paused_run_shows_no_speed_and_speeds_read_well(qtbot, make_lab):
    from gradviz.gui.run.status import rate_text

    lab = make_lab(small("safe"))
    lab.start()
    qtbot.waitUntil(lambda: _status(lab, "speed") != "", timeout=RUN_TIMEOUT_MS)
    lab.pause()
    assert _status(lab, "speed") == ""
    assert lab.window.actions["pause"].iconText() == "Resume"
    assert lab.window.actions["stop"].isEnabled()
    assert rate_text(1.0) == "1.0 steps/s" and rate_text(42.4) == "42 steps/s"
    assert rate_text(1234.4) == "1,234 steps/s" and rate_text(float("nan")) == ""


# ---- defect 12: saving says so ----------------------------------------------------------------
def test_save_experiment_confirms_in_the_status_bar(make_lab, tmp_path):
    lab = make_lab(small("safe"))
    path = tmp_path / "mine.json"
    assert lab.experiments.save(str(path))
    assert f"Saved the experiment to {path}" in lab.window.statusBar().currentMessage()
    assert json.loads(path.read_text())["fit"]["method"] == "safe"


# ---- one recent-files list -------------------------------------------------------------------
def test_a_stray_value_under_recent_files_does_not_stop_the_start(make_lab, isolated_settings):
    from PySide6.QtCore import QSettings

    settings = QSettings(str(isolated_settings / "settings.ini"), QSettings.Format.IniFormat)
    settings.setValue("recent_files", "5")
    settings.setValue("recent_models", "5")
    settings.sync()
    lab = make_lab(small("safe"), wait_ready=False)
    assert not lab.window.recent_menu.isEnabled()
    assert not lab.window.recent_models_menu.isEnabled()


def test_views_are_fed_through_one_path_from_a_worker_or_a_file(make_lab, make_snapshot):
    lab = make_lab(small("safe"))
    recorded = make_snapshot(n=15, nan_diagonal=True)  # as read back from a file
    lab.session.show(recorded)
    assert lab.views.snapshot is recorded
    assert lab.views.widgets["mask"].counts()[Health.NAN] == 15
    assert _status(lab, "device") == f"{recorded.device} · {recorded.method}"


# ---- defect 8: Enter in a setup field gives the keys back ------------------------------------
def _enter_in_the_seed_field(qtbot, lab):
    """Focus the seed field, press Enter and wait for the focus to leave it; the field."""
    from PySide6.QtCore import Qt

    lab.window.activateWindow()
    spin = next(iter(lab.form.param("seed").items)).widget
    spin.show()
    spin.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is spin, timeout=5_000)
    qtbot.keyClick(spin, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is not spin, timeout=5_000)
    return spin


def test_after_enter_in_a_setup_field_s_takes_a_step(qtbot, make_lab):
    from PySide6.QtCore import Qt

    lab = make_lab(small("safe"))
    _enter_in_the_seed_field(qtbot, lab)
    assert "Space starts or pauses" in lab.window.statusBar().currentMessage()
    qtbot.keyClick(QApplication.focusWidget() or lab.window, Qt.Key.Key_S)
    qtbot.waitUntil(lambda: lab.session.latest.step == 1, timeout=RUN_TIMEOUT_MS)


def test_only_the_focused_setup_field_is_watched_for_enter_not_every_event(qtbot, make_lab):
    """The lab's Enter-leaves-the-field rule runs Python only for the fields that took the
    focus: a running lab's paints and timers never pass through it."""
    from gradviz.gui.pages.lab.focus import EnterLeavesField

    seen = []
    real = EnterLeavesField.eventFilter
    lab = make_lab(small("safe"))
    lab.lab.enter_leaves_field.eventFilter = lambda w, e: (
        seen.append(w) or real(lab.lab.enter_leaves_field, w, e)
    )
    lab.start()  # frames, paints and timers
    qtbot.waitUntil(lambda: lab.session.latest.step >= 20, timeout=RUN_TIMEOUT_MS)
    lab.session.pause()
    setup = lab.window.docks["setup"]
    # None of the views' paints and timers; at most a field that had the focus at start.
    assert all(isinstance(w, QWidget) and setup.isAncestorOf(w) for w in seen), set(seen)
    spin = _enter_in_the_seed_field(qtbot, lab)
    assert spin in seen


def test_colormap_palette_and_locked_levels_are_remembered(make_lab):
    lab = make_lab(small("safe"), wait_ready=False)
    error = lab.views.widgets["error"]
    error.colormap_box.setCurrentIndex(1)
    chosen = error.colormap_box.currentText()
    mask = lab.views.widgets["mask"]
    mask.palette_box.setCurrentIndex(1)
    palette = mask.palette_box.currentText()
    lab.views.widgets["distances"].lock_levels((0.25, 2.5))
    lab.shutdown()
    again = make_lab(small("safe"), wait_ready=False)
    assert again.views.widgets["error"].colormap_box.currentText() == chosen
    assert again.views.widgets["mask"].palette_box.currentText() == palette
    distances = again.views.widgets["distances"]
    assert distances.locked() and distances.levels() == pytest.approx((0.25, 2.5))


# ---- the torch threads a run uses, on hovering the status bar's speed ----------------------
@pytest.mark.parametrize(
    ("threads", "said"),
    [
        (None, "1 thread (auto: a step of 24 points is too small to share)"),
        (2, "2 threads (set by the run's settings)"),
    ],
)
def test_the_status_bars_speed_tooltip_names_the_runs_torch_threads(make_lab, threads, said):
    lab = make_lab(small("safe", threads=threads))
    status = lab.lab.run_status.readouts()
    assert status["threads_tooltip"] == f"torch CPU threads: {said}"
    assert lab.window.status_labels["device"].toolTip() == status["threads_tooltip"]


def test_the_speed_tooltip_follows_auto_when_it_times_the_threads_again(
    qtbot, make_lab, monkeypatch
):
    """The lab's worker steps its run with the same chooser as gradviz fit: made to time
    again after every few steps, the tooltip names its latest timing and what set it off."""
    from gradviz.core.common import run_threads

    # Two cores: auto times 1 and 2, the window's thread drawing beside the steps.
    monkeypatch.setattr(run_threads, "available_cores", lambda: 2)
    monkeypatch.setattr(run_threads, "MEASURE_FROM_POINTS", 24)
    # Every 0.05 s of steps (about 50 steps): between timings, long enough for a frame to
    # show the one just finished rather than the next under way.
    monkeypatch.setattr(run_threads, "RECHECK_S", 0.05)
    monkeypatch.setattr(run_threads, "RECHECK_SPACING", 0.0)
    lab = make_lab(small("safe"))
    lab.start()
    again = re.compile(
        r"^torch CPU threads: [12] threads? \(auto: timed [\d.,]+ steps/s on 1, [\d.,]+ "
        r"steps/s on 2 \(again: (a periodic check after [\d.e-]+ s of steps|its steps ran "
        r"[\d.]+x (slower|faster))\)\)$"
    )

    def tooltip() -> str:
        return lab.window.status_labels["device"].toolTip()

    qtbot.waitUntil(lambda: again.match(tooltip()) is not None, timeout=RUN_TIMEOUT_MS)
    assert tooltip() == lab.lab.run_status.readouts()["threads_tooltip"]


def test_the_run_menu_names_space_beside_start_and_resume_without_a_check_mark(qtbot, make_lab):
    from PySide6.QtWidgets import QToolButton

    lab = make_lab(small("safe"))
    window = lab.window
    entries = {a.text().split("\t")[0]: a for a in lab.lab.run_menu.menu.actions() if a.text()}
    assert entries["Start"].text() == "Start\tSpace"  # the menu's shortcut column: Space
    lab.start()
    qtbot.waitUntil(lambda: lab.session.state is RunState.RUNNING, timeout=RUN_TIMEOUT_MS)
    window.actions["pause"].trigger()
    assert lab.session.state is RunState.PAUSED
    entries = {a.text().split("\t")[0]: a for a in lab.lab.run_menu.menu.actions() if a.text()}
    resume = entries["Resume"]
    assert resume.text() == "Resume\tSpace" and not resume.isCheckable()  # no check mark
    buttons = {b.text() for b in lab.lab.run_menu.toolbar.findChildren(QToolButton)}
    assert {"Start", "Resume"} <= buttons  # the buttons read without the key
    resume.trigger()
    assert lab.session.state is RunState.RUNNING


def test_the_labs_run_times_every_core_as_gradviz_fit_does(qtbot, make_lab, monkeypatch):
    """On 2 cores auto times the lab's steps on 1 and on 2 threads, the window drawing
    beside them, and keeps what was faster (the lab used to keep a core for the window)."""
    from gradviz.core.common import run_threads

    monkeypatch.setattr(run_threads, "available_cores", lambda: 2)
    monkeypatch.setattr(run_threads, "MEASURE_FROM_POINTS", 24)
    lab = make_lab(small("safe"))
    lab.start()
    label = lab.window.status_labels["device"]
    timed = re.compile(
        r"^torch CPU threads: [12] threads? \(auto: timed [\d.,]+ steps/s on 1, [\d.,]+ "
        r"steps/s on 2( \(again: [^)]+\))?\)$"  # tiny steps beside the window: timed often
    )
    qtbot.waitUntil(lambda: timed.match(label.toolTip()) is not None, timeout=RUN_TIMEOUT_MS)
