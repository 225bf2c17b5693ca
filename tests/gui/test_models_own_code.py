"""Models whose forward is not in the file: a pickled module of a class of its own runs only
after the user confirms its layer order, and a state_dict runs in the user's own class
(File > Open with model class…) only after the user trusts that code."""

from __future__ import annotations

import hashlib
import textwrap

import numpy as np
import pytest
import torch
from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QHBoxLayout, QMainWindow, QWidget

from gradviz.gui.pages.explorer.explorer_tab import ExplorerTab
from gradviz.gui.pages.models.model_panel import ModelPanel
from gradviz.gui.pages.models.open_model import ModelOpener, OpenState

WAIT_MS = 120_000


class Chain(torch.nn.Module):
    """A class of its own whose forward runs its layers in declaration order."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(3, 5)
        self.act = torch.nn.Tanh()
        self.fc2 = torch.nn.Linear(5, 2)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


RESIDUAL_SOURCE = textwrap.dedent(
    """
    import torch

    class ResidualMLP(torch.nn.Module):
        def __init__(self, width=4, hidden=6):
            super().__init__()
            self.inp = torch.nn.Linear(width, hidden)
            self.block = torch.nn.Linear(hidden, hidden)
            self.out = torch.nn.Linear(hidden, 3)

        def forward(self, x):
            h = torch.tanh(self.inp(x))
            h = h + torch.tanh(self.block(h))  # the skip connection no file records
            return self.out(h)
    """
)


@pytest.fixture
def opener(qtbot, tmp_path):
    """The model opener, its panel and a real explorer tab in one shown window."""
    window = QMainWindow()
    body = QWidget()
    layout = QHBoxLayout(body)
    panel = ModelPanel()
    explorer = ExplorerTab()
    layout.addWidget(panel)
    layout.addWidget(explorer, stretch=1)
    window.setCentralWidget(body)
    errors: list[str] = []
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    opener = ModelOpener(
        window,
        settings,
        lambda sentence, details: errors.append(sentence),
        send_network=explorer.set_network,
        panel=panel,
    )
    opener.explorer, opener.errors = explorer, errors
    qtbot.addWidget(window)
    window.resize(1400, 800)
    window.show()
    qtbot.waitExposed(window)
    yield opener
    opener.shutdown()
    explorer.shutdown()


def wait_result(qtbot, explorer, label: str):
    qtbot.waitUntil(
        lambda: (
            explorer.result is not None and explorer.result.label == label and not explorer.pending
        ),
        timeout=WAIT_MS,
    )
    return explorer.result


def live_jacobians(module: torch.nn.Module, inputs: np.ndarray) -> np.ndarray:
    """torch.func's per-sample Jacobians of the live module, in float64: each sample is
    run as a batch of one, so layers that need a batch axis (Flatten) see one."""
    module = module.double().eval()
    x = torch.as_tensor(inputs, dtype=torch.float64)
    one = lambda sample: module(sample[None])[0]  # noqa: E731
    return torch.func.vmap(torch.func.jacrev(one))(x).detach().numpy()


def test_a_custom_class_pickle_runs_only_after_its_layer_order_is_confirmed(
    qtbot, opener, tmp_path
):
    torch.manual_seed(0)
    live = Chain()
    torch.save(live, tmp_path / "chain.pt")
    opener.open_path(str(tmp_path / "chain.pt"))
    qtbot.waitUntil(lambda: opener.state is OpenState.LISTED, timeout=WAIT_MS)
    panel, explorer = opener.panel, opener.explorer
    assert panel.order.isVisibleTo(panel)
    assert panel.order.order.text() == "fc1 (Linear) → act (Tanh) → fc2 (Linear)"
    assert "confirm the order" in panel.reason.text()
    assert explorer.network_label() != "chain.pt"  # not run before the user confirms
    qtbot.mouseClick(panel.order.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: opener.state is OpenState.OPEN, timeout=WAIT_MS)
    assert not panel.order.isVisibleTo(panel)
    assert "forward order was assumed" in panel.assumptions.text()
    result = wait_result(qtbot, explorer, "chain.pt")
    np.testing.assert_allclose(
        result.jacobians, live_jacobians(live, result.inputs), rtol=1e-4, atol=1e-6
    )


#: Added to the class's file where a test checks that it was never imported.
IMPORT_MARKER = '\nimport pathlib\npathlib.Path(__file__).with_suffix(".imported").touch()\n'


def _write_residual(tmp_path, marker: bool = False):
    code = tmp_path / "residual_model.py"
    code.write_text(RESIDUAL_SOURCE + (IMPORT_MARKER if marker else ""))
    namespace: dict = {}
    exec(compile(RESIDUAL_SOURCE, str(code), "exec"), namespace)
    torch.manual_seed(1)
    live = namespace["ResidualMLP"](width=4, hidden=6)
    torch.save(live.state_dict(), tmp_path / "residual.pt")
    return code, live


def _fill_model_class_dialog(qtbot, opener, tmp_path, code):
    opener.choose_model_class()
    dialog = opener.model_class_dialog
    qtbot.waitUntil(dialog.isVisible, timeout=WAIT_MS)
    dialog.weights_edit.setText(str(tmp_path / "residual.pt"))
    dialog.code_edit.setText(str(code))
    dialog.class_edit.setText("ResidualMLP")
    dialog.args_edit.setText('{"width": 4, "hidden": 6}')
    qtbot.mouseClick(dialog.ok_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: opener.trust_dialog is not None and opener.trust_dialog.isVisible(),
        timeout=WAIT_MS,
    )
    return opener.trust_dialog


def test_a_state_dict_runs_in_the_users_class_after_trusting_its_code(qtbot, opener, tmp_path):
    code, live = _write_residual(tmp_path)
    trust = _fill_model_class_dialog(qtbot, opener, tmp_path, code)
    text = " ".join(label.text() for label in trust.findChildren(type(trust.reason)))
    assert str(code) in text and hashlib.sha256(code.read_bytes()).hexdigest() in text
    assert trust.cancel_button.isDefault() and "Python code" in trust.reason.text()
    assert trust.windowTitle() == "Trust this Python code?"
    qtbot.mouseClick(trust.open_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: opener.state is OpenState.OPEN, timeout=WAIT_MS)
    assert "ResidualMLP (your model class)" in opener.panel.assumptions.text()
    result = wait_result(qtbot, opener.explorer, "residual.pt")
    assert result.shape == (3, 4)
    np.testing.assert_allclose(
        result.jacobians, live_jacobians(live, result.inputs), rtol=1e-4, atol=1e-6
    )


def test_cancelling_the_trust_question_for_a_model_class_loads_nothing(qtbot, opener, tmp_path):
    code, _live = _write_residual(tmp_path, marker=True)
    trust = _fill_model_class_dialog(qtbot, opener, tmp_path, code)
    qtbot.mouseClick(trust.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: opener.state is OpenState.CANCELLED, timeout=WAIT_MS)
    assert opener.loaded is None and opener.tasks.running() == 0
    assert not code.with_suffix(".imported").exists()  # the code never ran
    assert opener.explorer.network_label() != "residual.pt" and opener.errors == []


CNN_SOURCE = textwrap.dedent(
    """
    import torch

    class SmallCNN(torch.nn.Module):
        def __init__(self, classes=600):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.head = torch.nn.Linear(8, classes)

        def forward(self, x):
            h = torch.relu(self.conv(x)).mean(dim=(2, 3))
            return self.head(h)
    """
)


def _choose_inputs(settings, kind: str, path) -> None:
    settings.kind_box.setCurrentIndex(settings.kind_box.findData(kind))
    field = settings.image_field if kind == "image" else settings.file_field
    field.set_path(str(path))


def test_a_cnn_on_an_image_or_npy_input_shows_the_saliency_core_computes(qtbot, opener, tmp_path):
    from PySide6.QtGui import QImage

    from gradviz.core.explorer.input_gradients import input_gradients

    code = tmp_path / "cnn_model.py"
    code.write_text(CNN_SOURCE)
    namespace: dict = {}
    exec(compile(CNN_SOURCE, str(code), "exec"), namespace)
    torch.manual_seed(2)
    live = namespace["SmallCNN"]().eval()
    torch.save(live.state_dict(), tmp_path / "cnn.pt")
    pixels = np.random.default_rng(0).integers(0, 256, (24, 24, 3), dtype=np.uint8)
    image = QImage(pixels.tobytes(), 24, 24, 72, QImage.Format.Format_RGB888)
    assert image.save(str(tmp_path / "picture.png"))

    opener.choose_model_class()
    dialog = opener.model_class_dialog
    dialog.weights_edit.setText(str(tmp_path / "cnn.pt"))
    dialog.code_edit.setText(str(code))
    dialog.class_edit.setText("SmallCNN")
    dialog.shape_edit.setText("3,24,24")
    qtbot.mouseClick(dialog.ok_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: opener.trust_dialog is not None, timeout=WAIT_MS)
    qtbot.mouseClick(opener.trust_dialog.open_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: opener.state is OpenState.OPEN, timeout=WAIT_MS)
    explorer = opener.explorer
    assert explorer.settings.shape_label.text() == "3×24×24"

    _choose_inputs(explorer.settings, "image", tmp_path / "picture.png")
    qtbot.waitUntil(lambda: explorer.result is not None and explorer.result.batch == 1,
                    timeout=WAIT_MS)  # fmt: skip
    view = explorer.view_tabs.views["saliency_map"]
    assert explorer.view_tabs.currentWidget() is view
    assert not explorer.view_tabs.isTabEnabled(0)  # no Jacobian views without a Jacobian
    x = torch.as_tensor(pixels.transpose(2, 0, 1)[None] / 255.0, dtype=torch.float32)
    expected = input_gradients(live, x)
    assert expected.kind == "saliency"
    assert int(explorer.result.explained[0]) == int(expected.explained[0])
    np.testing.assert_allclose(
        view.shown_map(), expected.values[0].abs().amax(dim=0).numpy(), rtol=1e-5, atol=1e-9
    )
    assert view.underlay.isVisible()  # drawn over the picture

    batch = np.random.default_rng(1).standard_normal((2, 3, 24, 24))
    np.save(tmp_path / "batch.npy", batch)
    _choose_inputs(explorer.settings, "file", tmp_path / "batch.npy")
    qtbot.waitUntil(lambda: explorer.result.batch == 2 and not explorer.pending, timeout=WAIT_MS)
    view.sample_box.setValue(1)
    view.what_box.setCurrentText("gradient × input")
    view.channel_box.setCurrentText("channel 2")
    expected = input_gradients(live, torch.as_tensor(batch, dtype=torch.float32))
    np.testing.assert_allclose(
        view.shown_map(), expected.grad_x_input[1, 2].numpy(), rtol=1e-5, atol=1e-9
    )


def test_a_torchscript_cnn_takes_the_sample_shape_given_and_its_jacobian_is_exact(
    qtbot, opener, tmp_path
):
    import warnings

    torch.manual_seed(3)
    live = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Tanh(), torch.nn.Flatten(),
        torch.nn.Linear(4 * 6 * 6, 5),
    ).eval()  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecation notice for jit.trace
        torch.jit.save(torch.jit.trace(live, torch.zeros(2, 3, 6, 6)), tmp_path / "cnn_ts.pt")
    asked = []
    opener.ask_in_dim = lambda info, guess: asked.append(guess) or (3, 6, 6)
    opener.open_path(str(tmp_path / "cnn_ts.pt"))
    qtbot.waitUntil(lambda: opener.trust_dialog is not None, timeout=WAIT_MS)
    qtbot.mouseClick(opener.trust_dialog.open_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: opener.state is OpenState.OPEN, timeout=WAIT_MS)
    assert len(asked) == 1
    result = wait_result(qtbot, opener.explorer, "cnn_ts.pt")
    assert result.shape == (5, 108) and result.full is not None  # flattened (B, n) views
    samples = result.inputs.reshape(-1, 3, 6, 6)
    expected = live_jacobians(live, samples).reshape(len(samples), 5, 108)
    np.testing.assert_allclose(result.jacobians, expected, rtol=1e-4, atol=1e-6)


def test_a_whole_residual_module_listed_by_the_panel_runs_in_its_own_class(
    qtbot, opener, tmp_path, monkeypatch
):
    import importlib
    import sys

    code = tmp_path / "residual_whole_model.py"
    code.write_text(RESIDUAL_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))  # so that torch.save can name the class
    live = importlib.import_module("residual_whole_model").ResidualMLP(width=4, hidden=6)
    torch.save(live, tmp_path / "residual_whole.pt")
    monkeypatch.delitem(sys.modules, "residual_whole_model")  # the app imports its own copy
    opener.open_path(str(tmp_path / "residual_whole.pt"))
    qtbot.waitUntil(lambda: opener.state is OpenState.LISTED, timeout=WAIT_MS)
    assert opener.panel.order.order.text() == "inp (Linear) → block (Linear) → out (Linear)"
    qtbot.mouseClick(opener.panel.order.class_button, Qt.MouseButton.LeftButton)
    dialog = opener.model_class_dialog
    assert dialog.weights_edit.text() == str(tmp_path / "residual_whole.pt")
    dialog.code_edit.setText(str(code))
    dialog.class_edit.setText("ResidualMLP")
    qtbot.mouseClick(dialog.ok_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: opener.trust_dialog is not None, timeout=WAIT_MS)
    qtbot.mouseClick(opener.trust_dialog.open_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: opener.state is OpenState.OPEN, timeout=WAIT_MS)
    result = wait_result(qtbot, opener.explorer, "residual_whole.pt")
    np.testing.assert_allclose(
        result.jacobians, live_jacobians(live, result.inputs), rtol=1e-4, atol=1e-6
    )


def test_weights_named_by_a_class_of_their_own_run_once_their_order_is_confirmed(
    qtbot, opener, tmp_path
):
    torch.manual_seed(0)
    live = torch.nn.Sequential()
    live.add_module("fc1", torch.nn.Linear(3, 5))
    live.add_module("fc2", torch.nn.Linear(5, 2))
    torch.save(live.state_dict(), tmp_path / "weights.pt")  # fc1.weight, fc2.weight: no order
    opener.open_path(str(tmp_path / "weights.pt"))
    qtbot.waitUntil(lambda: opener.state is OpenState.LISTED, timeout=WAIT_MS)
    panel, explorer = opener.panel, opener.explorer
    # The app offers the order to confirm (the CLI's --assume-sequential), not a dead end.
    assert panel.order.isVisibleTo(panel)
    assert panel.order.order.text() == "fc1 (Linear) → fc2 (Linear)"
    qtbot.mouseClick(panel.order.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: opener.state is OpenState.OPEN, timeout=WAIT_MS)
    result = wait_result(qtbot, explorer, "weights.pt")
    np.testing.assert_allclose(
        result.jacobians, live_jacobians(live, result.inputs), rtol=1e-4, atol=1e-6
    )
