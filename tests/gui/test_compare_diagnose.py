"""Side by side, "Why NaN here?", Diagnose, About, Copy as command and the per-point
Jacobian dock, driven through the real window, views and runs (offscreen)."""
# The shared fixtures are imported by name, which pyflakes reads as a redefinition:
# ruff: noqa: F811

from __future__ import annotations

import shlex

import numpy as np
import pytest
from fixtures_app import (  # noqa: F401 - fixtures
    RUN_TIMEOUT_MS,
    isolated_settings,
    make_lab,
    small,
)
from PySide6.QtGui import QGuiApplication

from gradviz.core.common.health import Health
from gradviz.gui.run.session import RunState

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pyqtgraph")

DIAGNOSE_TIMEOUT_MS = 120_000


def _both_at(qtbot, window, step: int) -> None:
    qtbot.waitUntil(
        lambda: all(
            s.session.latest is not None and s.session.latest.step >= step for s in window.sides
        ),
        timeout=RUN_TIMEOUT_MS,
    )


def test_side_by_side_naive_beside_safe_shows_nan_on_the_naive_side_only(qtbot, make_lab):
    lab = make_lab(small("naive"))
    lab.window.actions["compare"].trigger()
    window = lab.investigations.compare_window
    assert window is not None and window.isVisible()
    window.method_box.setCurrentText("safe")
    window.start()
    _both_at(qtbot, window, 3)
    naive, safe = window.sides
    assert naive.session.config.method == "naive" and safe.session.config.method == "safe"
    # Same data on both sides: target and initial state agree.
    np.testing.assert_array_equal(
        naive.session.latest.target_distances, safe.session.latest.target_distances
    )
    assert naive.session.first_nonfinite_grad_step == 0
    assert safe.session.first_nonfinite_grad_step is None
    assert naive.mask_view.counts()[Health.NAN] > 0
    assert safe.mask_view.counts()[Health.NAN] == 0
    assert "NaN" in naive.verdict.text() and "finite" in safe.verdict.text()
    assert "naive" in window.summary.text() and "safe" in window.summary.text()
    for side in window.sides:  # each run's thread choice, on hovering its numbers
        tooltip = side.numbers.toolTip()
        assert (
            tooltip
            == "torch CPU threads: 1 thread (auto: a step of 24 points is too small to share)"
        )
    window.close()
    assert window.thread_count == 0


def test_compare_zoom_and_selected_cell_are_shared_by_all_four_matrices(qtbot, make_lab):
    lab = make_lab(small("naive", steps=3))
    window = lab.investigations.open_compare()
    window.start()
    _both_at(qtbot, window, 3)
    source = window.left.mask_view
    source.view.setRange(xRange=(2, 8), yRange=(4, 10), padding=0)
    source.view.sigRangeChangedManually.emit([True, True])
    for panel in (window.right.mask_view, window.left.distances_view, window.right.distances_view):
        (x0, x1), (y0, y1) = panel.view.viewRange()
        assert (x0, x1, y0, y1) == pytest.approx((2, 8, 4, 10), abs=1e-6)
    window.right.distances_view.cellClicked.emit(5, 6)  # as a click on that cell emits
    for panel in (window.left.mask_view, window.left.distances_view, window.right.mask_view):
        xs, ys = panel.marker.getData()
        assert (list(xs), list(ys)) == ([6.5], [5.5])


def test_closing_the_compare_window_mid_run_joins_both_threads(qtbot, make_lab):
    lab = make_lab(small("safe"))
    window = lab.investigations.open_compare()
    window.method_box.setCurrentText("clamp")
    window.start()
    _both_at(qtbot, window, 2)
    workers = [w for side in window.sides for w in side.session.workers()]
    assert len(workers) == 2 and not any(w.idle.is_set() for w in workers)
    window.close()
    assert all(w.idle.is_set() for w in workers)  # each loop has returned
    assert window.thread_count == 0 and lab.investigations.thread_count == 0


def test_quitting_mid_compare_leaves_no_thread(qtbot, make_lab):
    lab = make_lab(small("safe"))
    window = lab.investigations.open_compare()
    window.start()
    _both_at(qtbot, window, 2)
    lab.shutdown()
    assert lab.thread_count == 0


def _pinned_naive_lab(qtbot, make_lab):
    lab = make_lab(small("naive"))
    lab.start()
    qtbot.waitUntil(lambda: lab.session.pinned is not None, timeout=RUN_TIMEOUT_MS)
    assert lab.window.actions["why_nan"].isEnabled()
    lab.window.actions["why_nan"].trigger()
    panel = lab.investigations.why_nan
    assert panel is not None and panel.isVisible()
    return lab, panel


def test_why_nan_explains_the_naive_diagonal_and_highlights_it(qtbot, make_lab):
    lab, panel = _pinned_naive_lab(qtbot, make_lab)
    text = panel.text.text()
    assert "sqrt is infinite where the squared distance is 0" in text
    assert "24 entries on the diagonal" in text
    assert panel.explanation.diagonal_zero == 24
    # The pinned snapshot is on screen, with a diagonal entry selected in the matrices.
    assert lab.views.snapshot is lab.session.pinned
    i, j = lab.views.selected_pair
    assert i == j
    assert "diagonal" in panel.examples.item(0).text()


def test_diagnose_names_sqrt_backward_with_its_forward_call_and_resumes_the_run(qtbot, make_lab):
    lab, panel = _pinned_naive_lab(qtbot, make_lab)
    assert lab.session.state is RunState.RUNNING and lab.views.snapshot is lab.session.pinned
    panel.diagnose_button.click()
    assert lab.investigations.diagnosing
    # Anomaly mode is process-wide: the lab's run is paused and cannot be stepped meanwhile.
    assert lab.session.state is RunState.PAUSED
    assert not lab.window.actions["start"].isEnabled()
    assert not lab.window.actions["step"].isEnabled()
    qtbot.waitUntil(lambda: not lab.investigations.diagnosing, timeout=DIAGNOSE_TIMEOUT_MS)
    report = panel.report
    assert report is not None and report.found
    assert report.backward.operation == "SqrtBackward0"
    trace = panel.trace.toPlainText()
    assert "SqrtBackward0" in trace
    assert "gradviz/core/lab/distances.py" in trace  # the forward call that made the sqrt
    assert "torch.sqrt" in trace
    # The tracer also says which entries (the diagonal), the module and why.
    assert "first (0, 0), (1, 1)" in trace and "module: (none" in trace
    assert "Cause: sqrt at 0 in the backward" in trace
    assert "sqrt at 0" in panel.diagnose_summary.text()
    assert "SqrtBackward0" in panel.diagnose_status.text()
    assert lab.session.state is RunState.RUNNING  # paused for the diagnosis, resumed after
    assert lab.views.snapshot is lab.session.pinned  # still explaining the pinned state
    assert lab.window.actions["step"].isEnabled()


def test_about_lists_versions_of_gradviz_torch_qt_and_pyqtgraph_and_the_devices(make_lab):
    import pyqtgraph
    import PySide6
    import torch

    import gradviz

    lab = make_lab()
    lab.window.actions["about"].trigger()
    dialog = lab.help.about_dialog
    assert dialog is not None and dialog.isVisible()
    text = dialog.plain_text()
    assert f"gradviz {gradviz.__version__}" in text
    assert f"torch {torch.__version__.split('+')[0]}" in text
    assert f"PySide6 {PySide6.__version__}" in text
    assert f"pyqtgraph {pyqtgraph.__version__}" in text
    assert "Devices cpu" in text
    assert "pyqtgraph" in dialog.table.text()
    dialog.close()


def test_copy_as_command_puts_the_reproducing_fit_line_on_the_clipboard(make_lab):
    lab = make_lab(small("naive"))
    lab.window.actions["copy_command"].trigger()
    words = shlex.split(QGuiApplication.clipboard().text())
    assert words[:2] == ["gradviz", "fit"]
    assert "--method" in words and words[words.index("--method") + 1] == "naive"
    assert "--n" in words and words[words.index("--n") + 1] == "24"


def _show_jacobian_dock(lab):
    """Raise the Jacobians' dock (tabbed behind the loss); returns its view's widget."""
    dock = lab.window.docks["jacobians"]
    dock.show()
    dock.raise_()
    return lab.views.views["jacobians"].view.widget


def test_the_jacobian_view_is_made_when_its_dock_is_first_shown_with_the_pair_chosen_before(
    qtbot, make_lab
):
    lab = make_lab(small("safe", net="8-16-3:tanh"))
    lazy = lab.views.views["jacobians"]
    assert not lazy.built  # tabbed behind the loss at start-up: not made yet
    lab.views.select_pair(4, 9)
    dock = lab.window.docks["jacobians"]
    dock.raise_()  # as a click on its tab: the view is made once the dock is painted
    qtbot.waitUntil(lambda: lazy.built and lazy.view.widget.isVisible(), timeout=RUN_TIMEOUT_MS)
    widget = lazy.view.widget
    qtbot.waitUntil(lambda: widget.jacobians is not None, timeout=RUN_TIMEOUT_MS)
    assert widget.jacobians.shape == (24, 3, 8) and widget.point_view.point == 4


def test_jacobian_dock_shows_per_point_jacobians_of_a_network_run(qtbot, make_lab):
    lab = make_lab(small("safe", net="8-16-3:tanh"))
    view = _show_jacobian_dock(lab)
    lab.start()
    qtbot.waitUntil(
        lambda: lab.session.latest.step >= 3 and view.jacobians is not None,
        timeout=RUN_TIMEOUT_MS,
    )
    assert not view.showing_note
    assert view.jacobians.shape == (24, 3, 8)
    assert view.all_view.displayed_image is not None
    assert view.point_view.displayed_image().shape == (3, 8)
    lab.views.select_pair(5, 7)  # a pair picked in the matrices selects point i
    assert view.point_view.point == 5
    readout = view.point_view.hover_cell(2, 4)
    value = float(view.jacobians[5, 2, 4])
    assert "point 5" in readout and "coord[2]" in readout and "feature[4]" in readout
    assert f"{value:.4g}" in readout


def test_jacobian_dock_says_there_are_none_for_free_coordinates(qtbot, make_lab):
    lab = make_lab(small("safe"))
    view = _show_jacobian_dock(lab)
    lab.step_once()
    qtbot.waitUntil(lambda: lab.session.latest.step >= 1, timeout=RUN_TIMEOUT_MS)
    assert view.showing_note and view.jacobians is None
    assert "free coordinates" in view.note.text()


def test_diagnose_pauses_the_compared_runs_and_resumes_them_after(qtbot, make_lab):
    lab, panel = _pinned_naive_lab(qtbot, make_lab)
    window = lab.investigations.open_compare()
    window.start()
    _both_at(qtbot, window, 2)
    panel.diagnose_button.click()
    assert [side.session.state for side in window.sides] == [RunState.PAUSED, RunState.PAUSED]
    assert not window.start_button.isEnabled()
    qtbot.waitUntil(lambda: not lab.investigations.diagnosing, timeout=DIAGNOSE_TIMEOUT_MS)
    assert panel.report.backward.operation == "SqrtBackward0"
    assert [side.session.state for side in window.sides] == [RunState.RUNNING, RunState.RUNNING]
    assert window.start_button.isEnabled()
    # The paused runs were not broken by anomaly mode: they keep stepping afterwards.
    at = [side.session.latest.step for side in window.sides]
    _both_at(qtbot, window, max(at) + 2)
    assert all(side.session.state is RunState.RUNNING for side in window.sides)


def test_diagnose_holds_the_explorer_computations_and_releases_them_after(qtbot, make_lab):
    lab, panel = _pinned_naive_lab(qtbot, make_lab)
    explorer = lab.explorer
    worker = explorer._worker.worker
    panel.diagnose_button.click()
    assert worker.held  # anomaly mode is process-wide: no explorer backward meanwhile
    lab.window.pages.show_page(1)
    explorer.set_spec_text("2-20-20-4:sigmoid")
    explorer.compute()
    qtbot.waitUntil(lambda: not lab.investigations.diagnosing, timeout=DIAGNOSE_TIMEOUT_MS)
    assert not worker.held
    qtbot.waitUntil(lambda: explorer.result is not None, timeout=DIAGNOSE_TIMEOUT_MS)
    assert explorer.last_error == "" and explorer.result.label == "2-20-20-4:sigmoid"


def test_quitting_during_diagnose_joins_its_thread(qtbot, make_lab):
    lab, panel = _pinned_naive_lab(qtbot, make_lab)
    panel.diagnose_button.click()
    assert lab.investigations.diagnosing
    lab.shutdown()
    assert lab.thread_count == 0 and not lab.investigations.diagnosing
