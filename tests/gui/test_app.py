"""The distance-fit lab driven through its real window, views and runs (offscreen)."""
# The shared fixtures are imported by name, which pyflakes reads as a redefinition:
# ruff: noqa: F811

from __future__ import annotations

import numpy as np
import pytest
from fixtures_app import (  # noqa: F401 - fixtures
    RUN_TIMEOUT_MS,
    isolated_settings,
    make_lab,
    small,
)
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLineEdit

from gradviz.core.common.health import Health
from gradviz.gui.run.session import RunState

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pyqtgraph")


def _run_until(qtbot, lab, predicate, timeout=RUN_TIMEOUT_MS):
    qtbot.waitUntil(
        lambda: lab.session.latest is not None and predicate(lab.session.latest), timeout=timeout
    )


def test_window_opens_large_enough_with_start_enabled_once_torch_is_ready(make_lab):
    lab = make_lab()
    assert lab.window.width() >= 1280 and lab.window.height() >= 800
    assert lab.window.actions["start"].isEnabled()
    assert lab.session.state is RunState.READY and lab.session.latest.step == 0
    assert lab.session.latest.n_points == 200  # the default helix


def test_naive_run_shows_nan_on_the_mask_diagonal_and_first_nan_step_in_status_bar(qtbot, make_lab):
    lab = make_lab(small("naive"))
    lab.start()
    _run_until(qtbot, lab, lambda s: s.step >= 5)
    assert lab.session.pinned is not None
    assert "first at step 0" in lab.window.status_labels["nan"].text()
    # By now every coordinate is NaN; the pinned first-NaN snapshot brings back the diagonal.
    assert np.isnan(lab.session.latest.coords).all()
    lab.window.actions["first_nan"].trigger()
    shown = lab.views.snapshot
    assert shown is lab.session.pinned and shown.step == 0  # the gradients of step 0
    mask = shown.entry_health
    assert (np.diag(mask) == Health.NAN).all()
    off_diagonal = mask[~np.eye(len(mask), dtype=bool)]
    assert (off_diagonal != Health.NAN).all()
    assert lab.views.widgets["mask"].counts()[Health.NAN] == len(mask)
    assert lab.window.status_labels["state"].text() == "showing first NaN"
    lab.window.actions["live"].trigger()
    assert lab.views.snapshot is lab.session.latest


def test_safe_run_shows_no_nonfinite_gradient(qtbot, make_lab):
    lab = make_lab(small("safe", steps=40))
    lab.start()
    qtbot.waitUntil(lambda: lab.session.state is RunState.FINISHED, timeout=RUN_TIMEOUT_MS)
    assert lab.session.latest.step == 40
    assert lab.session.pinned is None
    assert not lab.window.actions["first_nan"].isEnabled()
    assert lab.window.status_labels["nan"].text() == "gradients finite"
    counts = lab.views.widgets["mask"].counts()
    assert counts[Health.NAN] == counts[Health.POS_INF] == counts[Health.NEG_INF] == 0


def test_pause_step_resume_and_reset(qtbot, make_lab):
    lab = make_lab(small("safe"))
    lab.start()
    _run_until(qtbot, lab, lambda s: s.step >= 3)
    lab.pause()
    assert lab.session.state is RunState.PAUSED
    worker = lab.session.worker
    # Paused for real: the step in flight is done and its state is on screen.
    qtbot.waitUntil(
        lambda: worker.idle.is_set() and lab.session.latest.step == worker.steps_taken,
        timeout=RUN_TIMEOUT_MS,
    )
    before = lab.session.latest.step
    lab.step_once()
    _run_until(qtbot, lab, lambda s: s.step == before + 1)
    paused_at = lab.session.latest.step
    lab.step_once()
    _run_until(qtbot, lab, lambda s: s.step == paused_at + 1)
    qtbot.waitUntil(worker.idle.is_set, timeout=RUN_TIMEOUT_MS)  # sits paused again
    QApplication.processEvents()
    assert worker.steps_taken == paused_at + 1  # paused: exactly one step was taken
    assert lab.session.latest.step == paused_at + 1
    lab.start()  # resume
    _run_until(qtbot, lab, lambda s: s.step >= paused_at + 10)
    generation = lab.session.generation
    lab.reset()
    assert lab.session.generation > generation
    _run_until(qtbot, lab, lambda s: s.step == 0)
    assert lab.session.state is RunState.READY
    assert lab.session.latest.generation == lab.session.generation
    step_label = lab.window.status_labels["step"]
    assert step_label.text() == "0 steps done"
    lab.step_once()
    _run_until(qtbot, lab, lambda s: s.step == 1)
    qtbot.waitUntil(lambda: step_label.text() == "1 step done", timeout=RUN_TIMEOUT_MS)


def test_learning_rate_change_reaches_the_running_worker(qtbot, make_lab):
    # The run reports the learning rate its optimizer used in each step.
    from gradviz.core.lab.fit import DistanceFitRun

    used: list[float] = []

    class RecordsLr(DistanceFitRun):
        def step(self, capture: bool = False) -> float:
            used.append(self.optimizer.param_groups[0]["lr"])
            return super().step(capture)

    lab = make_lab(small("safe", lr=0.01), run_factory=RecordsLr)
    lab.start()
    _run_until(qtbot, lab, lambda s: s.step >= 2)
    lab.form.param("lr").setValue(0.5)
    qtbot.waitUntil(lambda: used[-1] == 0.5, timeout=RUN_TIMEOUT_MS)
    assert used[0] == 0.01 and lab.session.state is RunState.RUNNING
    assert lab.questions == []  # lr applies live, without asking to reset


def test_changing_n_while_running_restarts_the_run_at_once_and_keeps_the_old_curve(qtbot, make_lab):
    lab = make_lab(small("safe"))
    lab.start()
    _run_until(qtbot, lab, lambda s: s.step >= 2)
    restarts = []
    lab.session.cleared.connect(lambda: restarts.append(lab.session.generation))
    lab.form.param("n").setValue(31)
    assert lab.questions == []  # no dialog: the change applies in place
    assert len(restarts) == 1 and lab.session.config.n == 31  # one restart, with the change
    assert lab.session.state is RunState.RUNNING  # a running run goes on running
    _run_until(qtbot, lab, lambda s: s.n_points == 31 and s.step >= 1)
    earlier = lab.views.readouts()["loss"]["earlier_runs"]
    assert len(earlier) == 1 and earlier[0]["label"].startswith("earlier: n=24 (")
    assert earlier[0]["losses"] >= 2  # the old run's curve, as far as it had got


def test_changing_the_method_of_a_paused_run_restarts_it_paused_at_step_0(qtbot, make_lab):
    lab = make_lab(small("safe"))
    lab.step_once()
    _run_until(qtbot, lab, lambda s: s.step >= 1)
    generation = lab.session.generation
    lab.form.param("method").setValue("naive")
    assert lab.questions == []
    assert lab.session.generation > generation and lab.session.config.method == "naive"
    _run_until(qtbot, lab, lambda s: s.method == "naive")
    assert lab.session.state is RunState.READY and lab.session.latest.step == 0
    earlier = lab.views.readouts()["loss"]["earlier_runs"]
    assert [e["losses"] for e in earlier] == [1]
    assert earlier[0]["label"] == "earlier: method=safe (1 step)"  # how it differs


def test_closing_mid_run_asks_then_stops_and_joins_the_worker(qtbot, make_lab):
    lab = make_lab(small("safe"))
    lab.start()
    _run_until(qtbot, lab, lambda s: s.step >= 3)
    lab.answer = False
    assert not lab.window.close()
    assert lab.window.isVisible() and lab.session.state is RunState.RUNNING
    lab.answer = True
    assert lab.window.close()
    assert lab.questions == ["Quit gradviz?", "Quit gradviz?"]
    assert lab.thread_count == 0 and lab.session.worker is None


def test_start_stop_fifty_times_leaves_no_thread_behind(qtbot, make_lab):
    lab = make_lab(small("safe", n=8))
    for _ in range(50):
        lab.start()
        lab.session.stop()
    qtbot.waitUntil(lambda: lab.thread_count == 0, timeout=RUN_TIMEOUT_MS)
    assert lab.session.worker is None


def test_torch_ready_arriving_after_shutdown_starts_no_run(qtbot, make_lab):
    lab = make_lab(small("safe", n=8), wait_ready=False)
    lab.shutdown()  # joins the loader: whatever it queued is delivered by the next events
    assert lab.loader.threads_held == 0  # nothing more can come from it
    QApplication.processEvents()
    assert not lab.torch_ready
    assert lab.session.worker is None and lab.thread_count == 0
    assert lab.session.state is RunState.LOADING
    lab.start()
    lab.step_once()
    assert lab.thread_count == 0


def test_worker_failure_shows_a_dialog_and_the_window_stays_usable(qtbot, make_lab):
    from gradviz.gui.run.worker import default_run_factory

    def out_of_memory(config):
        raise MemoryError("simulated")

    lab = make_lab(small("safe"), run_factory=out_of_memory, wait_ready=False)
    qtbot.waitUntil(lambda: lab.error_dialog is not None, timeout=120_000)
    dialog = lab.error_dialog
    assert dialog.isVisible()
    assert "ran out of memory" in dialog.sentence
    assert "gradviz.log" in dialog.log_label.text()
    dialog.copy_button.click()
    from PySide6.QtGui import QGuiApplication

    assert "MemoryError" in QGuiApplication.clipboard().text()
    assert lab.session.state is RunState.FAILED and lab.window.actions["reset"].isEnabled()
    dialog.close()
    lab.session.run_factory = default_run_factory
    lab.reset()
    _run_until(qtbot, lab, lambda s: s.step == 0)
    assert lab.thread_count == 1


def test_failure_mid_run_keeps_the_last_good_state_on_screen(qtbot, make_lab):
    from gradviz.core.lab.fit import DistanceFitRun

    class FailsAtStepSix(DistanceFitRun):
        def step(self, capture: bool = False) -> float:
            if self.completed_steps == 6:
                raise RuntimeError("device lost")
            return super().step(capture)

    lab = make_lab(small("safe"), run_factory=FailsAtStepSix)
    lab.start()
    qtbot.waitUntil(lambda: lab.session.state is RunState.FAILED, timeout=RUN_TIMEOUT_MS)
    assert "RuntimeError: device lost" in lab.error_dialog.sentence
    assert lab.views.snapshot is lab.session.latest and lab.session.latest.step <= 6
    qtbot.waitUntil(lambda: lab.thread_count == 0, timeout=RUN_TIMEOUT_MS)
    lab.error_dialog.close()


def test_single_key_shortcuts_step_and_reset_but_not_while_typing(qtbot, make_lab):
    lab = make_lab(small("safe"))
    lab.form.param("net").setValue("network")  # restarts the run with a network, at once
    lab.form.param("dim").setValue(3)
    _run_until(qtbot, lab, lambda s: s.step == 0 and s.generation == lab.session.generation)
    lab.window.activateWindow()
    lab.window.setFocus()
    qtbot.keyClick(lab.window, Qt.Key.Key_S)
    _run_until(qtbot, lab, lambda s: s.step == 1)
    # Now type into the network-spec field: S, R and Space are text there.
    item = next(iter(lab.form.param("net_spec").items))
    editor = item.widget
    assert isinstance(editor, QLineEdit)
    editor.show()
    editor.setFocus()
    generation = lab.session.generation
    editor.clear()
    qtbot.keyClicks(editor, "s r")
    assert editor.text() == "s r"
    QApplication.processEvents()  # a shortcut would have been delivered by now
    assert lab.session.generation == generation and lab.session.state is RunState.PAUSED
    assert "width 1" in lab.form.problem_text.lower()  # validated as typed
    # A number field keeps the keys too (its editor rejects letters; no step is taken).
    spin = next(iter(lab.form.param("seed").items)).widget
    spin.show()
    spin.setFocus()
    qtbot.keyClicks(spin, "s")
    qtbot.keyClick(spin, Qt.Key.Key_Space)
    QApplication.processEvents()
    assert lab.session.state is RunState.PAUSED and lab.session.generation == generation
    assert lab.session.latest.step == 1


def test_settings_are_remembered_in_the_isolated_settings_file(qtbot, make_lab, isolated_settings):
    lab = make_lab(small("clamp"))
    lab.form.param("lr").setValue(0.123)
    lab.shutdown()
    assert (isolated_settings / "settings.ini").exists()
    again = make_lab(None)
    assert again.form.config().method == "clamp"
    assert again.form.config().lr == pytest.approx(0.123)


def test_an_exception_escaping_a_slot_becomes_a_dialog_not_a_crash(qtbot, make_lab):
    from gradviz.gui.shell.app import ExceptionHook

    lab = make_lab(small("safe"))
    hook = ExceptionHook(lab.report_exception)
    try:
        raise ValueError("a bug in a slot")
    except ValueError as exc:
        hook._on_exception(type(exc), exc, exc.__traceback__)
    assert lab.error_dialog.isVisible()
    assert "ValueError: a bug in a slot" in lab.error_dialog.sentence
    assert "Traceback" in lab.error_dialog.details
    lab.error_dialog.close()
    lab.step_once()  # still usable
    _run_until(qtbot, lab, lambda s: s.step == 1)


def test_a_first_nan_between_frames_is_pinned_exactly_by_replay(qtbot, make_lab):
    # SGD with a huge learning rate overflows to a non-finite gradient after some steps; at
    # half a frame a second that step is not captured, so the worker replays the run to pin
    # it exactly (the snapshot of its gradients, before its update spoiled the coordinates).
    from gradviz.core.lab.fit import DistanceFitRun

    lab = make_lab(small("masked", optimizer="sgd", lr=100.0))
    lab.form.param("frame_rate").setValue(0.5)
    reference = DistanceFitRun(lab.form.config().with_changes(stop_on_nan=True))
    while not reference.done:
        reference.step()
    assert reference.stopped_on_nan and reference.completed_steps > 1
    expected = reference.snapshot()
    lab.start()
    qtbot.waitUntil(
        lambda: lab.session.pinned is not None and lab.session.pinned.step == expected.step,
        timeout=RUN_TIMEOUT_MS,
    )
    pinned = lab.session.pinned
    assert pinned.generation == lab.session.generation
    assert np.isfinite(pinned.coords).all()  # the state before the spoiling update
    assert (pinned.entry_health == expected.entry_health).all()
    assert (pinned.entry_health >= Health.NEG_INF).any()


def test_copy_as_command_puts_the_matching_fit_line_on_the_clipboard(make_lab):
    from PySide6.QtGui import QGuiApplication

    lab = make_lab(small("naive", n=30))
    lab.window.actions["copy_command"].trigger()
    line = QGuiApplication.clipboard().text()
    assert line.startswith("gradviz fit ")
    assert "--method naive" in line and "--n 30" in line
    assert "--target" not in line  # helix is the shared default: the CLI needs no option


def test_an_opened_experiment_runs_at_the_frame_rate_its_file_and_the_form_say(
    qtbot, make_lab, tmp_path
):
    # The form is filled from the file without a change signal per setting; the run made
    # from it must take the file's frame rate too, not the one the form showed before.
    from gradviz.core.settings.config import LiveSettings
    from gradviz.core.settings.experiment import save_experiment

    lab = make_lab(small("safe"))
    assert lab.form.live_settings().frame_rate != 0.5
    path = tmp_path / "slow_frames.json"
    save_experiment(path, small("safe", n=12), LiveSettings(frame_rate=0.5))
    lab.experiments.open(str(path))
    qtbot.waitUntil(
        lambda: lab.session.latest is not None and lab.session.settings_now.n == 12,
        timeout=RUN_TIMEOUT_MS,
    )
    assert lab.form.live_settings().frame_rate == 0.5
    assert lab.session.frame_rate == 0.5
    assert lab.session.worker.frame_interval == 2.0
