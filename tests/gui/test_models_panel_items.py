"""The model panel and the explorer with files found awkward in the app: a .pt2 CNN opens
with the sample shape its program declares, image gradients are drawn as images at any
size, a newly opened model never shows the previous one's result, and the panel's layer
table and buttons stay readable in a narrow column."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt
from safetensors.torch import save_file
from test_models_own_code import live_jacobians, opener, wait_result  # noqa: F401 - fixture

from gradviz.core.modelio import inspect_model
from gradviz.gui.pages.models.layer_list import COLUMNS, LayerTable
from gradviz.gui.pages.models.open_model import OpenState
from gradviz.gui.pages.models.order_confirm import OrderConfirmation

WAIT_MS = 120_000
# torch.export's own notice while it exports (and the app loads) the fixture program.
export_notice = pytest.mark.filterwarnings(
    r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated"
)


class TinyCNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.head = torch.nn.Linear(4 * 8 * 8, 5)

    def forward(self, x):
        return self.head(torch.tanh(self.conv(x)).flatten(1))


@pytest.fixture
def exported_cnn(tmp_path):
    """A CNN exported with a (2, 3, 8, 8) example and a dynamic batch dimension."""
    torch.manual_seed(4)
    live = TinyCNN().eval()
    batch = torch.export.Dim("batch", min=1, max=1024)
    program = torch.export.export(live, (torch.zeros(2, 3, 8, 8),), dynamic_shapes=({0: batch},))
    path = tmp_path / "cnn.pt2"
    torch.export.save(program, path)
    return path, live


def open_trusted(qtbot, opener, path):  # noqa: F811 - the fixture imported above
    opener.open_path(str(path))
    qtbot.waitUntil(lambda: opener.trust_dialog is not None, timeout=WAIT_MS)
    qtbot.mouseClick(opener.trust_dialog.open_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: opener.state is OpenState.OPEN, timeout=WAIT_MS)


@export_notice
def test_an_exported_cnn_opens_with_its_sample_shape_and_its_gradients_as_images(
    qtbot,
    opener,  # noqa: F811
    exported_cnn,
):
    path, live = exported_cnn
    asked = []
    opener.ask_in_dim = lambda info, guess: asked.append(guess)  # must not be asked
    open_trusted(qtbot, opener, path)
    assert asked == [] and opener.errors == []
    explorer = opener.explorer
    assert explorer.settings.shape_label.text() == "3×8×8"
    result = wait_result(qtbot, explorer, "cnn.pt2")
    assert result.shape == (5, 192)  # the Jacobian, under the entries limit
    samples = result.inputs.reshape(-1, 3, 8, 8)
    np.testing.assert_allclose(
        result.jacobians, live_jacobians(live, samples).reshape(-1, 5, 192), rtol=1e-4, atol=1e-6
    )
    # ... and its rows as images over the input, not a 192-column stripe only.
    tabs, view = explorer.view_tabs, explorer.view_tabs.views["saliency_map"]
    assert tabs.isTabEnabled(tabs.indexOf(view)) and tabs.isTabEnabled(0)
    view.channel_box.setCurrentText("sum over channels")
    k = int(np.argmax(result.outputs[0]))
    expected = result.jacobians[0, k].reshape(3, 8, 8).sum(axis=0)
    np.testing.assert_allclose(view.shown_map(), expected, rtol=1e-6, atol=1e-9)


@export_notice
def test_opening_another_model_drops_the_previous_models_result(
    qtbot,
    opener,  # noqa: F811
    exported_cnn,
    tmp_path,
):
    torch.manual_seed(0)
    first = tmp_path / "first.pt"
    torch.save(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)), first)
    opener.open_path(str(first))
    qtbot.waitUntil(lambda: opener.state is OpenState.OPEN, timeout=WAIT_MS)
    explorer = opener.explorer
    wait_result(qtbot, explorer, "first.pt")
    seen = []
    explorer.networkChanged.connect(
        lambda label: seen.append((label, explorer.result, explorer.view_tabs.isEnabled()))
    )
    open_trusted(qtbot, opener, exported_cnn[0])
    assert seen == [("cnn.pt2", None, False)]  # nothing of first.pt shown for cnn.pt2
    wait_result(qtbot, explorer, "cnn.pt2")
    assert explorer.view_tabs.isEnabled() and opener.errors == []


def test_safetensors_layers_are_listed_in_numeric_order(qapp, tmp_path):
    torch.manual_seed(0)
    widths = [3, 4, 5, 6, 7, 8, 2]
    layers = []
    for k in range(len(widths) - 1):
        layers += [torch.nn.Linear(widths[k], widths[k + 1]), torch.nn.Tanh()]
    path = tmp_path / "net.safetensors"
    save_file(torch.nn.Sequential(*layers[:-1]).state_dict(), str(path))  # keys 0 .. 10
    table = LayerTable()
    table.show_info(inspect_model(path, activation="tanh"))
    assert [row[0] for row in table.row_texts()] == ["0", "2", "4", "6", "8", "10"]


def test_the_layer_table_keeps_its_parameter_counts_readable_when_narrow(qtbot, tmp_path):
    path = tmp_path / "wide.pt"
    torch.save({f"block.{k}.weight": torch.zeros(300, 300) for k in range(3)}, path)
    table = LayerTable()
    qtbot.addWidget(table)
    table.resize(360, 200)
    table.show()
    qtbot.waitExposed(table)
    table.show_info(inspect_model(path))
    header = table.horizontalHeader()
    column = COLUMNS.index("Parameters")
    needed = table.sizeHintForColumn(column)
    assert header.sectionSize(column) >= needed  # never cut: the shapes give way
    assert header.sectionViewportPosition(column) + needed <= table.viewport().width() + 1


def test_the_order_buttons_show_their_whole_text_in_a_narrow_panel(qtbot):
    widget = OrderConfirmation()
    qtbot.addWidget(widget)
    widget.show_order(("fc1 (Linear)", "fc2 (Linear)"))
    widget.resize(240, 300)
    widget.show()
    qtbot.waitExposed(widget)
    for button in (widget.button, widget.class_button):
        text_width = button.fontMetrics().horizontalAdvance(button.text())
        assert button.width() >= text_width, button.text()


def test_the_panel_states_the_assumptions_jacobian_prints(qapp, tmp_path, capsys):
    import json

    from gradviz.cli import main
    from gradviz.gui.pages.models.model_panel import ModelPanel

    torch.manual_seed(0)
    path = tmp_path / "weights.pt"
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    torch.save(net.state_dict(), path)
    assert main(["jacobian", "--model", str(path), "--batch", "2", "--activation", "relu",
                 "--json"]) == 0  # fmt: skip
    said = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["assumptions"]
    panel = ModelPanel()
    panel.show_info(inspect_model(path, activation="relu"), activation="relu")
    shown = [line.removeprefix("• ") for line in panel.assumptions.text().splitlines()]
    in_app = [
        s.replace("(choose another with --activation)", "(choose another below)") for s in said
    ]
    assert shown == in_app and len(shown) == 2
    assert panel.activation_row.isVisibleTo(panel)  # the choice --activation makes


def test_the_panel_scrolls_rather_than_squeeze_its_text_or_its_table(qtbot, tmp_path):
    from gradviz.gui.pages.models.model_panel import ModelPanel

    torch.manual_seed(0)
    path = tmp_path / "weights_with_a_long_name_as_people_give_them.pt"
    torch.save({f"blocks.{k}.fc.weight": torch.zeros(6, 6) for k in range(12)}, path)
    panel = ModelPanel()
    qtbot.addWidget(panel)
    panel.resize(240, 300)  # the panel beside the explorer at 1920 x 1080
    panel.show()
    qtbot.waitExposed(panel)
    panel.show_info(inspect_model(path, assume_sequential=True, activation="tanh"))
    panel.show_info(inspect_model(path))  # not runnable: the order to confirm
    qapp = __import__("PySide6.QtWidgets", fromlist=["QApplication"]).QApplication
    qapp.processEvents()
    shown = [w for w in (panel.title, panel.summary, panel.assumptions, panel.reason,
                         panel.order, panel.layers) if w.isVisibleTo(panel)]  # fmt: skip
    for upper, lower in zip(shown, shown[1:]):
        assert upper.geometry().bottom() < lower.geometry().top(), (upper, lower)
    for label in (panel.title, panel.summary, panel.reason):
        assert label.height() >= label.heightForWidth(label.width()) - 1
    assert panel.layers.height() >= 160


@export_notice
def test_a_pt2_exported_for_a_batch_range_runs_in_the_explorer_within_its_range(
    qtbot,
    opener,  # noqa: F811
    tmp_path,
):
    """A .pt2 exported for batches of 2 to 4 runs in the explorer at the explorer's B (over
    4: in chunks of at most 4) with the live module's Jacobians, and the panel says the
    range (every computation failed with torch's guard before)."""
    torch.manual_seed(0)
    live = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh()).eval()
    batch = torch.export.Dim("batch", min=2, max=4)
    program = torch.export.export(live, (torch.randn(3, 3),), dynamic_shapes=[{0: batch}])
    torch.export.save(program, tmp_path / "range.pt2")
    open_trusted(qtbot, opener, tmp_path / "range.pt2")
    assert "exported for batches of 2 to 4 inputs" in opener.panel.assumptions.text()
    explorer = opener.explorer
    result = wait_result(qtbot, explorer, "range.pt2")
    assert result.batch == explorer.settings.batch_box.value() > 4
    np.testing.assert_allclose(
        result.jacobians, live_jacobians(live, result.inputs), rtol=1e-4, atol=1e-6
    )
