"""The Jacobian explorer tab driven through its real widgets (offscreen, real worker)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from PySide6.QtWidgets import QApplication

from gradviz.gui.pages.explorer import ExplorerTab

TIMEOUT_MS = 120_000  # the first job imports torch on the worker thread: be generous


def worker_stopped(tab: ExplorerTab) -> None:
    assert not tab.worker_running()


@pytest.fixture
def tab(show_widget):
    """An ExplorerTab at 1280 x 760, shown; shut down (and checked) afterwards."""
    return show_widget(ExplorerTab(), 1280, 760, after=worker_stopped)


def wait_for_result(qtbot, tab: ExplorerTab) -> None:
    """Wait until the newest request has been answered (result or failure)."""

    def settled() -> bool:
        return not tab.busy and not tab._timer.isActive() and tab.generation > 0

    qtbot.waitUntil(settled, timeout=TIMEOUT_MS)


def explore(qtbot, tab: ExplorerTab, spec: str, batch: int = 16):
    tab.settings.batch_box.setValue(batch)
    tab.set_spec_text(spec)
    tab.compute()
    wait_for_result(qtbot, tab)
    assert tab.last_error == ""
    assert tab.result is not None and tab.result.label == spec
    return tab.result


def test_linear_net_gets_the_same_jacobian_verdict_and_a_block_diagonal_full_jacobian(qtbot, tab):
    result = explore(qtbot, tab, "2-20-20-4")
    verdict = tab.views["batch"].verdict.text()
    assert "Every input has the same Jacobian: this network is linear on this batch" in verdict
    assert result.constant
    assert result.max_off_block == 0.0
    assert "max_off_block = 0</b> exactly" in tab.views["full"].summary.text()
    assert result.full.shape == (16 * 4, 16 * 2)


def test_sigmoid_net_is_not_called_linear_and_its_full_jacobian_is_block_diagonal(qtbot, tab):
    result = explore(qtbot, tab, "2-20-20-4:sigmoid")
    verdict = tab.views["batch"].verdict.text()
    assert "not linear on this batch" in verdict
    assert "Every input has the same Jacobian" not in verdict
    assert not result.constant
    assert result.max_off_block == 0.0
    # The full view's blocks are the per-sample Jacobians.
    block = result.full[4 * 3 : 4 * 4, 2 * 3 : 2 * 4]
    np.testing.assert_array_equal(block, result.jacobians[3])


def test_spec_field_rejects_a_bad_width_with_a_readable_message_and_computes_nothing(qtbot, tab):
    qtbot.keyClicks(tab.settings.spec_edit, "")  # focus the field like a user would
    tab.settings.spec_edit.selectAll()
    qtbot.keyClicks(tab.settings.spec_edit, "2-x-4")
    message = tab.settings.spec_message.text()
    assert "x" in message and "2-20-20-4" not in tab.settings.spec_edit.text()
    assert "width" in message.lower() or "number" in message.lower()
    QApplication.processEvents()
    assert not tab.pending  # nothing scheduled: no computation can follow
    assert tab.generation == 0
    assert tab.result is None
    assert "Fix the network spec" in tab.status.text()


def test_a_spec_made_valid_by_its_last_keystroke_is_computed(qtbot, tab):
    wait_for_result(qtbot, tab)  # the default spec's result
    generation = tab.generation
    tab.settings.spec_edit.setFocus()
    tab.settings.spec_edit.selectAll()
    qtbot.keyClicks(tab.settings.spec_edit, "2-20-20-")  # not a spec yet
    assert "Fix the network spec" in tab.status.text()
    qtbot.keyClicks(tab.settings.spec_edit, "4")  # now it is
    assert tab.pending
    wait_for_result(qtbot, tab)
    assert tab.generation > generation and tab.result.label == "2-20-20-4"
    assert "Fix the network spec" not in tab.status.text()


def test_enter_in_the_spec_field_computes_at_once(qtbot, tab):
    from PySide6.QtCore import Qt

    wait_for_result(qtbot, tab)
    generation = tab.generation
    tab.settings.spec_edit.setFocus()
    tab.settings.spec_edit.selectAll()
    qtbot.keyClicks(tab.settings.spec_edit, "3-8-2:tanh")
    qtbot.keyClick(tab.settings.spec_edit, Qt.Key.Key_Return)
    assert tab.generation == generation + 1 and tab.busy  # sent now, not after the pause
    wait_for_result(qtbot, tab)
    assert tab.result.label == "3-8-2:tanh"


def test_parameter_histograms_count_a_nan_weight_in_its_own_bin(qtbot, tab):
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    with torch.no_grad():
        model[0].weight[1, 0] = float("nan")
    tab.set_network(model, "model with a NaN weight", None, 2, 1)
    wait_for_result(qtbot, tab)
    counts = tab.views["histograms"].counts()
    # Independent count: autograd of the summed output on the same batch.
    x = torch.as_tensor(tab.result.inputs, dtype=torch.float32)
    model.zero_grad()
    model(x).sum().backward()
    expected = {name: int(p.grad.isnan().sum()) for name, p in model.named_parameters()}
    assert expected["2.weight"] == 1 and expected["0.weight"] > 0
    assert {name: c["NaN"] for name, c in counts.items()} == expected
    row = next(r for r in tab.views["histograms"].rows if r.hist.name == "2.weight")
    assert [t.toPlainText() for t in row.special_labels][1] == "1"  # the NaN bar says 1
    assert "non-finite" in tab.views["histograms"].note.text()


def test_grid_inputs_give_a_field_of_the_grid_shape(qtbot, tab):
    s = tab.settings
    s.kind_box.setCurrentIndex(s.kind_box.findData("grid"))
    s.side_box.setValue(12)
    s.dim_a.setValue(0)
    s.dim_b.setValue(2)
    s.base_edit.setText("0.5")
    result = explore(qtbot, tab, "3-5-2:tanh")
    assert result.jacobians.shape == (144, 2, 3)
    assert result.field.shape == (12, 12, 2, 3)
    np.testing.assert_array_equal(result.inputs[:, 1], 0.5)
    view = tab.views["field"]
    view.set_entry(1, 2)
    image = view.image()
    assert image.shape == (12, 12)
    # The batch is the grid, so the field matches the batch Jacobians (top row = largest y).
    grid = result.jacobians.reshape(12, 12, 2, 3)[::-1, :, 1, 2]
    np.testing.assert_allclose(image, grid, rtol=1e-5, atol=1e-7)
    # Hover names the grid point by its coordinates: top-left is (x0 = -2, x2 = 2).
    readout = view.heatmap.hover_cell(0, 0)
    assert "x2 = 2" in readout and "x0 = -2" in readout and "df1/dx2" in readout


def test_set_network_explores_a_private_copy_of_the_given_module(qtbot, tab):
    import torch

    from gradviz.core.nets.networks import NetworkSpec

    spec = NetworkSpec.parse("3-4-2")
    module = spec.build(seed=3)
    tab.settings.dtype_box.setCurrentText("float64")
    tab.set_network(module, "coordinate network of the run", spec, 3, 2)
    with torch.no_grad():  # the caller trains on; the tab keeps what it was given
        for p in module.parameters():
            p.add_(1.0)
    wait_for_result(qtbot, tab)
    result = tab.result
    assert result.label == "coordinate network of the run"
    assert "coordinate network of the run" in tab.status.text()
    assert tab.settings.spec_edit.text() == "3-4-2"
    original = spec.build(seed=3).double()
    expected = (original[1].weight @ original[0].weight).detach().numpy()
    np.testing.assert_allclose(result.jacobians[5], expected, rtol=1e-12, atol=1e-12)
    assert result.constant


def test_typing_a_spec_after_set_network_switches_back_to_the_typed_network(qtbot, tab):
    from gradviz.core.nets.networks import NetworkSpec

    spec = NetworkSpec.parse("3-4-2")
    tab.set_network(spec.build(), "from a file", spec, 3, 2)
    wait_for_result(qtbot, tab)
    result = explore(qtbot, tab, "2-6-3:relu")
    assert result.shape == (3, 2)
    assert "typed spec" in tab.settings.source_label.text()


def test_newer_request_supersedes_an_older_one(qtbot, tab):
    shown = []
    tab.resultShown.connect(lambda: shown.append(tab.result.label))
    tab.settings.batch_box.setValue(200)
    tab.set_spec_text("8-64-64-8:tanh")
    tab.compute()
    tab.set_spec_text("2-20-20-4:sigmoid")
    tab.compute()
    wait_for_result(qtbot, tab)
    assert tab.generation == 2
    assert tab.result.label == "2-20-20-4:sigmoid"
    # Every job's outcome passed on (or dropped): nothing older can arrive afterwards.
    qtbot.waitUntil(lambda: tab._worker.threads_held == 0, timeout=TIMEOUT_MS)
    assert shown == ["2-20-20-4:sigmoid"] and tab.result.label == "2-20-20-4:sigmoid"


def test_held_explorer_computes_nothing_until_released_then_runs_the_held_job(qtbot, tab):
    explore(qtbot, tab, "2-20-20-4")
    worker = tab.hold_computations()
    started = worker.started_generation
    tab.set_spec_text("2-20-20-4:sigmoid")
    tab.compute()
    # A held worker takes nothing up: the job waits for the release, no thread took it.
    assert worker.waiting and worker.threads_held == 0 and worker.started_generation == started
    assert worker.idle.is_set() and tab.busy
    assert tab.result.label == "2-20-20-4"
    tab.release_computations()
    wait_for_result(qtbot, tab)
    assert tab.result.label == "2-20-20-4:sigmoid"


def test_a_job_in_flight_stops_at_the_hold_and_runs_again_on_release(qtbot, tab):
    tab.settings.batch_box.setValue(200)
    tab.set_spec_text("8-64-64-8:tanh")
    tab.compute()
    worker = tab._worker.worker
    qtbot.waitUntil(lambda: worker.started_generation == tab.generation, timeout=TIMEOUT_MS)
    tab.hold_computations()
    qtbot.waitUntil(worker.idle.is_set, timeout=TIMEOUT_MS)
    tab.release_computations()
    wait_for_result(qtbot, tab)
    assert tab.last_error == "" and tab.result.label == "8-64-64-8:tanh"


def test_worker_failure_reaches_the_failed_signal_with_a_sentence(qtbot, tab, tmp_path):
    path = tmp_path / "three_columns.csv"
    np.savetxt(path, np.ones((5, 3)), delimiter=",")
    received = []

    from PySide6.QtCore import QObject, Slot

    class Receiver(QObject):
        @Slot(str, str)
        def on_failed(self, sentence: str, details: str) -> None:
            received.append((sentence, details))

    receiver = Receiver()
    tab.failed.connect(receiver.on_failed)
    s = tab.settings
    s.kind_box.setCurrentIndex(s.kind_box.findData("file"))
    s.file_field.set_path(str(path))
    tab.set_spec_text("2-20-20-4")
    tab.compute()
    qtbot.waitUntil(lambda: bool(received), timeout=TIMEOUT_MS)
    sentence, details = received[-1]
    assert "3 columns" in sentence and "2 inputs" in sentence
    assert "Traceback" in details
    assert sentence in tab.status.text()


def test_saliency_of_the_sum_is_the_row_sum_of_each_jacobian(qtbot, tab):
    result = explore(qtbot, tab, "3-10-2:tanh")
    view = tab.views["saliency"]
    np.testing.assert_allclose(view.saliency(), result.jacobians.sum(axis=1), rtol=1e-6)
    view.output_box.setCurrentIndex(2)  # f1
    np.testing.assert_array_equal(view.saliency(), result.jacobians[:, 1])


def test_output_and_input_selection_limits_what_the_views_show(qtbot, tab):
    result = explore(qtbot, tab, "6-8-5:tanh")
    tab.settings.outputs_edit.setText("1-2, 4")
    tab.settings.inputs_edit.setText("0, 5")
    tab.settings.outputs_edit.editingFinished.emit()
    shown = tab.views["sample"].heatmap._values
    np.testing.assert_array_equal(shown, result.jacobians[0][np.ix_([1, 2, 4], [0, 5])])
    assert tab.views["all"].heatmap._values.shape == (16, 6)
    assert "f2, x5" in tab.views["sample"].heatmap.hover_cell(1, 1)


def test_closing_the_tab_mid_computation_leaves_no_thread_running(qtbot, tab):
    import threading

    import torch

    closing = threading.Event()

    class SlowNet(torch.nn.Module):
        """A linear map whose forward pass lasts until the tab closes (a big model)."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(2, 3)

        def forward(self, x):
            closing.wait(60)
            return self.linear(x)

    tab.set_network(SlowNet(), "slow network", None, 2, 3)
    worker = tab._worker.worker
    qtbot.waitUntil(lambda: worker.started_generation == tab.generation, timeout=TIMEOUT_MS)
    assert tab.busy and tab.result is None  # several forward passes still to go
    closing.set()
    tab.close()
    assert not tab.worker_running() and tab._worker.threads_held == 0  # joined
    QApplication.processEvents()  # deliver whatever the joined thread queued
    assert tab.result is None  # nothing arrives after closing


def test_explorer_import_does_not_import_torch():
    code = "import sys, gradviz.gui.pages.explorer; sys.exit('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()


def test_full_batch_view_says_why_when_the_batch_is_too_big_to_draw(qtbot, tab):
    result = explore(qtbot, tab, "2-4-3", batch=300)
    assert result.full is None and result.max_off_block is None
    assert "up to 256 samples" in tab.views["full"].summary.text()
    assert result.batch == 300  # every other view still shows the whole batch


def test_mse_histograms_need_a_target_file_and_use_it_when_given(qtbot, tab, tmp_path):
    import torch

    from gradviz.core.nets.networks import NetworkSpec

    s = tab.settings
    s.loss_box.setCurrentIndex(s.loss_box.findData("mse"))
    explore(qtbot, tab, "2-5-3:tanh", batch=8)
    assert tab.views["histograms"].rows == []
    assert "needs a target file" in tab.views["histograms"].note.text()

    target = np.linspace(-1, 1, 24).reshape(8, 3)
    path = tmp_path / "target.npy"
    np.save(path, target)
    s.target_field.set_path(str(path))
    tab.compute()
    wait_for_result(qtbot, tab)
    rows = {row.hist.name: row.hist for row in tab.views["histograms"].rows}
    # Independent reference: the same net, inputs and target through F.mse_loss.
    model = NetworkSpec.parse("2-5-3:tanh").build(seed=0)
    x = torch.as_tensor(tab.result.inputs)
    loss = torch.nn.functional.mse_loss(model(x), torch.as_tensor(target, dtype=torch.float32))
    grad = torch.autograd.grad(loss, model[2].weight)[0].double().numpy()
    expected, _ = np.histogram(grad[grad != 0], bins=30)
    np.testing.assert_array_equal(rows["2.weight"].counts, expected)


def test_a_hidden_explorer_starts_no_thread_until_it_is_shown(qtbot):
    hidden = ExplorerTab()
    qtbot.addWidget(hidden)
    hidden.set_spec_text("2-20-20-4")
    QApplication.processEvents()
    # Deferred, not scheduled: no timer runs that could start the thread.
    assert hidden.pending and not hidden.busy
    assert hidden.generation == 0 and not hidden.worker_running()
    hidden.show()
    wait_for_result(qtbot, hidden)
    assert hidden.result is not None and hidden.result.label == "2-20-20-4"
    hidden.shutdown()
    assert not hidden.worker_running()


def test_unreadable_fixed_input_values_are_reported_inline_and_compute_nothing(qtbot, tab):
    explore(qtbot, tab, "3-4-2")
    done = tab.generation
    s = tab.settings
    s.kind_box.setCurrentIndex(s.kind_box.findData("grid"))
    s.base_edit.setText("1, x")
    tab.compute()
    assert tab.generation == done
    assert "not a number: 'x'" in s.inputs_message.text()


def _pick(qtbot, combo, name: str) -> None:
    """Choose ``name`` in a combo with the keyboard, as a user does."""
    from PySide6.QtCore import Qt

    combo.setFocus()
    while combo.currentText() != name:
        key = Qt.Key.Key_Down if combo.findText(name) > combo.currentIndex() else Qt.Key.Key_Up
        qtbot.keyClick(combo, key)


def test_net_x_built_by_clicks_is_linear_until_an_activation_is_added(qtbot, tab):
    from PySide6.QtCore import Qt

    wait_for_result(qtbot, tab)  # the default spec's result
    editor = tab.settings.network_editor
    for _ in range(2):
        qtbot.mouseClick(editor.remove_layer, Qt.MouseButton.LeftButton)
    assert tab.settings.spec_edit.text() == "2-4"
    for _ in range(2):
        qtbot.mouseClick(editor.add_layer, Qt.MouseButton.LeftButton)
    for column in (1, 2):
        box = editor.column(column)["width"]
        box.setFocus()
        box.selectAll()
        qtbot.keyClicks(box, "20")
        qtbot.keyClick(box, Qt.Key.Key_Return)
        _pick(qtbot, editor.column(column)["activation"], "identity")
    assert tab.settings.spec_edit.text() == "2-20-20-4"
    assert editor.readouts()["widths"] == [2, 20, 20, 4]
    wait_for_result(qtbot, tab)
    assert tab.result.label == "2-20-20-4" and tab.result.constant
    assert "Every input has the same Jacobian" in tab.views["batch"].verdict.text()

    _pick(qtbot, editor.column(2)["activation"], "tanh")
    assert tab.settings.spec_edit.text() == "2-20-20:tanh-4"
    wait_for_result(qtbot, tab)
    assert tab.result.label == "2-20-20:tanh-4" and not tab.result.constant
    verdict = tab.views["batch"].verdict.text()
    assert "not linear on this batch" in verdict
    assert "Every input has the same Jacobian" not in verdict


def test_a_typed_spec_redraws_the_explorer_diagram(qtbot, tab):
    tab.settings.spec_edit.setFocus()
    tab.settings.spec_edit.selectAll()
    qtbot.keyClicks(tab.settings.spec_edit, "3-7:relu-2")
    shown = tab.settings.network_editor.readouts()
    assert shown["widths"] == [3, 7, 2] and shown["activations"] == ["relu"]
    assert not shown["output_locked"]
