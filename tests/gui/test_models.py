"""Opening and saving models in the app: drops, trust, hostile files, cancel, save, recent."""

from __future__ import annotations

import gc
import hashlib
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from fixtures_app import isolated_settings, make_lab, small  # noqa: F401 - fixtures
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QPushButton

from gradviz.gui.pages.models.open_model import OpenState

WAIT_MS = 120_000
SHOTS = "/tmp/gv_models"

NET_X_SCRIPT = textwrap.dedent(
    """
    import sys, warnings
    import torch
    warnings.simplefilter("ignore")

    # Defined only here (the app cannot import it), and spelt as the tutorials spell it.
    class net_x(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(3, 5)
            self.fc2 = torch.nn.Linear(5, 4)
            self.out = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.out(self.fc2(self.fc1(x)))

    torch.manual_seed(0)
    net = net_x()
    torch.save(net, sys.argv[1] + "/net_x.pt")
    torch.jit.save(torch.jit.script(net), sys.argv[1] + "/net_x_script.pt")
    """
)


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    """net_x as a whole pickle and as TorchScript, written by a separate interpreter."""
    folder = tmp_path_factory.mktemp("models")
    script = folder / "write_net_x.py"  # a file: TorchScript reads the class's source
    script.write_text(NET_X_SCRIPT)
    subprocess.run([sys.executable, str(script), str(folder)], check=True, timeout=180)
    return folder


@pytest.fixture
def app(make_lab):  # noqa: F811 - the fixture imported above
    """The real app; every network handed to the explorer is recorded in ``app.sent``."""
    controller = make_lab(small())
    opener = controller.models.opener
    controller.sent = []
    original = opener.send_network

    def record(module, label, spec, in_dim, out_dim, **shape):
        controller.sent.append((module, label, spec, in_dim, out_dim))
        original(module, label, spec, in_dim, out_dim, **shape)

    opener.send_network = record
    opener.ask_in_dim = lambda info, guess: guess
    return controller


def drop_file(window, path) -> bool:
    """Drag ``path`` over the window and drop it, as a file manager would."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    point = QPointF(window.width() / 2, window.height() / 2)
    action, button, mods = (
        Qt.DropAction.CopyAction,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    enter = QDragEnterEvent(point.toPoint(), action, mime, button, mods)
    QApplication.sendEvent(window, enter)
    drop = QDropEvent(point, action, mime, button, mods)
    QApplication.sendEvent(window, drop)
    return enter.isAccepted()


def shot(window, name: str) -> None:
    os.makedirs(SHOTS, exist_ok=True)
    window.grab().save(f"{SHOTS}/{name}.png")


def run_in_listed_order(qtbot, app) -> None:
    """Press "Run these layers in this order" on the panel listing a custom-class module."""
    opener = app.models.opener
    qtbot.waitUntil(lambda: opener.state is OpenState.LISTED, timeout=WAIT_MS)
    button = opener.panel.order.button
    assert button.isVisibleTo(opener.panel)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: opener.state is not OpenState.LISTED, timeout=WAIT_MS)


def open_in_order(qtbot, app, path) -> None:
    """Open a custom-class pickle and confirm its layer order."""
    app.models.opener.open_path(str(path))
    run_in_listed_order(qtbot, app)


def test_dropped_whole_pickle_net_x_opens_with_assumptions_and_reaches_explorer(
    qtbot, app, model_files
):
    assert drop_file(app.window, model_files / "net_x.pt")
    run_in_listed_order(qtbot, app)
    qtbot.waitUntil(lambda: app.models.opener.state is OpenState.OPEN, timeout=WAIT_MS)
    panel = app.models.opener.panel
    assert "forward order was assumed" in panel.assumptions.text()
    assert "'identity'" in panel.assumptions.text()
    assert panel.activation_row.isVisibleTo(panel)
    rows = panel.layers.row_texts()
    assert [r[:2] for r in rows] == [["fc1", "Linear"], ["fc2", "Linear"], ["out", "Linear"]]
    assert rows[0][3] == "20" and rows[0][4] == "finite"
    ((module, label, spec, in_dim, out_dim),) = app.sent
    assert (label, in_dim, out_dim, str(spec.to_text())) == ("net_x.pt", 3, 2, "3-5-4-2")
    explorer = getattr(app.window, "explorer", None)
    if explorer is not None:
        assert explorer.network_label() == "net_x.pt"
        qtbot.waitUntil(lambda: explorer.result is not None and not explorer.busy, timeout=WAIT_MS)
    shot(app.window, "dropped_net_x")


def test_choosing_another_activation_reloads_the_pickle_with_it(qtbot, app, model_files):
    open_in_order(qtbot, app, model_files / "net_x.pt")
    qtbot.waitUntil(lambda: len(app.sent) == 1, timeout=WAIT_MS)
    combo = app.models.opener.panel.activation
    combo.setCurrentText("tanh")
    combo.activated.emit(combo.currentIndex())
    qtbot.waitUntil(lambda: len(app.sent) == 2, timeout=WAIT_MS)
    assert app.sent[1][2].to_text() == "3-5-4-2:tanh"


def test_the_model_panel_never_describes_a_network_the_explorer_does_not_show(
    qtbot, app, model_files
):
    open_in_order(qtbot, app, model_files / "net_x.pt")
    qtbot.waitUntil(lambda: len(app.sent) == 1, timeout=WAIT_MS)
    panel = app.models.opener.panel
    assert "--activation" not in panel.assumptions.text()  # the app's words, not the CLI's
    assert "choose another below" in panel.assumptions.text()
    assert not panel.reason.isVisibleTo(panel) and panel.activation_row.isVisibleTo(panel)
    app.explorer.set_spec_text("3-8-2")  # the user explores a typed spec instead
    assert panel.reason.isVisibleTo(panel)
    assert "The explorer now shows typed spec, not this file" in panel.reason.text()
    assert not panel.activation_row.isVisibleTo(panel)  # no choice that would replace it


def _wait_trust_dialog(qtbot, app):
    qtbot.waitUntil(
        lambda: (
            app.models.opener.trust_dialog is not None
            and app.models.opener.trust_dialog.isVisible()
        ),
        timeout=WAIT_MS,
    )
    return app.models.opener.trust_dialog


def test_torchscript_opens_only_after_the_trust_dialog_is_accepted(
    qtbot, app, model_files, monkeypatch
):
    from gradviz.core.modelio.program_launcher import Launcher

    asked = []  # the launcher is asked for while the question is read
    shared = Launcher.shared
    monkeypatch.setattr(Launcher, "shared", lambda: asked.append(1) or shared())
    path = model_files / "net_x_script.pt"
    before = set(_program_processes())
    app.models.opener.open_path(str(path))
    dialog = _wait_trust_dialog(qtbot, app)
    if Launcher.supported():  # the launcher runs; no program does yet
        assert asked and Launcher._shared is not None and Launcher._shared.alive()
        assert set(_program_processes()) == before
    text = " ".join(label.text() for label in dialog.findChildren(type(dialog.reason)))
    assert hashlib.sha256(path.read_bytes()).hexdigest() in text
    assert "net_x_script.pt" in text and "run code" in text
    assert dialog.cancel_button.isDefault() and not dialog.open_button.isDefault()
    shot(dialog, "trust_dialog")
    qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: app.models.opener.state is OpenState.CANCELLED, timeout=WAIT_MS)
    assert app.sent == [] and app.models.opener.loaded is None

    app.models.opener.open_path(str(path))  # asked again: trust is never remembered
    dialog = _wait_trust_dialog(qtbot, app)
    qtbot.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: app.models.opener.state is OpenState.OPEN, timeout=WAIT_MS)
    ((module, label, spec, in_dim, out_dim),) = app.sent
    assert (label, in_dim, out_dim, spec) == ("net_x_script.pt", 3, 2, None)


def test_hostile_pickle_gives_the_error_dialog_and_runs_nothing(qtbot, app, tmp_path):
    import torch

    marker = tmp_path / "marker"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    torch.save({"weight": Payload()}, tmp_path / "evil.pt")
    app.models.opener.open_path(str(tmp_path / "evil.pt"))
    qtbot.waitUntil(lambda: app.models.opener.state is OpenState.FAILED, timeout=WAIT_MS)
    dialog = app.error_dialog
    assert dialog is not None and dialog.isVisible()
    assert "evil.pt" in dialog.sentence and "\n" not in dialog.sentence
    assert dialog.windowTitle() == "gradviz: the model could not be opened"
    assert not marker.exists() and app.sent == []
    shot(dialog, "hostile_error_dialog")
    dialog.close()
    app.models.opener.open_path(str(tmp_path / "nothing-here.pt"))  # still usable
    qtbot.waitUntil(lambda: app.models.opener.state is OpenState.FAILED, timeout=WAIT_MS)


def test_cancel_during_load_discards_the_late_result(qtbot, app, model_files, monkeypatch):
    from gradviz.gui.pages.models import open_model

    release = threading.Event()
    real_load = open_model._load

    def slow_load(request, limits=None):
        release.wait(60)
        return real_load(request, limits)

    monkeypatch.setattr(open_model, "_load", slow_load)
    opener = app.models.opener
    open_in_order(qtbot, app, model_files / "net_x.pt")
    qtbot.waitUntil(lambda: opener.state is OpenState.LOADING, timeout=WAIT_MS)
    assert opener.wait_dialog is not None and opener.wait_dialog.isVisible()
    shot(opener.wait_dialog, "loading_wait")
    cancel = opener.wait_dialog.findChild(QPushButton)
    assert cancel.text() == "Cancel"
    qtbot.mouseClick(cancel, Qt.MouseButton.LeftButton)
    assert opener.wait_dialog is None and opener.state is OpenState.CANCELLED
    release.set()
    qtbot.waitUntil(lambda: opener.tasks.running() == 0, timeout=WAIT_MS)
    qtbot.wait(50)  # let the queued late result arrive (and be dropped)
    assert app.sent == [] and opener.loaded is None and opener.state is OpenState.CANCELLED


def test_save_network_round_trips_through_load_network(qtbot, app, model_files, tmp_path):
    import torch

    from gradviz.core.nets.networks import load_network

    save = app.window.actions["save_network"]
    assert not save.isEnabled()
    open_in_order(qtbot, app, model_files / "net_x.pt")
    qtbot.waitUntil(lambda: app.models.opener.state is OpenState.OPEN, timeout=WAIT_MS)
    assert save.isEnabled()
    app.models.choose_save_path = lambda what: str(tmp_path / "saved.safetensors")
    save.trigger()
    spec, module = load_network(tmp_path / "saved.safetensors")
    x = torch.randn(7, 3, dtype=torch.float64)
    original = app.sent[0][0].double()
    with torch.no_grad():
        np.testing.assert_allclose(module.double()(x).numpy(), original(x).numpy(), rtol=1e-12)
    assert spec.to_text() == "3-5-4-2"


def test_opened_models_go_to_the_recent_models_menu(qtbot, app, model_files):
    from gradviz.gui.common.settings import RecentFiles
    from gradviz.gui.pages.models.open_model import RECENT_MODELS_KEY

    for name in ("net_x.pt", "net_x_script.pt", "net_x.pt"):
        app.models.opener.open_path(str(model_files / name))
        if name.endswith("script.pt"):
            qtbot.mouseClick(_wait_trust_dialog(qtbot, app).open_button, Qt.MouseButton.LeftButton)
        else:
            run_in_listed_order(qtbot, app)
        qtbot.waitUntil(lambda: app.models.opener.state is OpenState.OPEN, timeout=WAIT_MS)
    expected = [str(model_files / "net_x.pt"), str(model_files / "net_x_script.pt")]
    assert RecentFiles(app.settings, RECENT_MODELS_KEY).read() == expected
    menu = app.window.recent_models_menu
    assert [a.text() for a in menu.actions()] == expected and menu.isEnabled()
    menu.actions()[1].trigger()  # reopening from the menu asks for trust again
    _wait_trust_dialog(qtbot, app).reject()
    qtbot.waitUntil(lambda: app.models.opener.state is OpenState.CANCELLED, timeout=WAIT_MS)


def test_non_runnable_model_is_listed_with_the_reason_it_cannot_run(qtbot, app, tmp_path):
    import torch

    convnet = torch.nn.Sequential(
        torch.nn.Conv2d(1, 2, 3), torch.nn.Flatten(), torch.nn.Linear(8, 2)
    )
    torch.save(convnet.state_dict(), tmp_path / "conv.pt")
    app.models.opener.open_path(str(tmp_path / "conv.pt"))
    qtbot.waitUntil(lambda: app.models.opener.state is OpenState.LISTED, timeout=WAIT_MS)
    panel = app.models.opener.panel
    assert panel.reason.isVisibleTo(panel) and "not a Linear layer" in panel.reason.text()
    rows = panel.layers.row_texts()
    assert [(r[0], r[3]) for r in rows] == [("0", "20"), ("2", "18")]
    assert app.sent == [] and not app.window.actions["save_network"].isEnabled()
    # The first and last weights say the widths, labelled as read from them.
    assert "1 input channels → 2 outputs (from the weights)" in panel.summary.text()
    shot(app.window, "not_runnable")


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")
def test_a_pt2_exported_for_one_batch_size_runs_in_the_explorer(qtbot, app, tmp_path):
    """A .pt2 exported for batches of exactly 3 runs in the explorer at its B, 3 samples at
    a time, and the panel says so (every computation failed with torch's guard)."""
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh()).eval()
    path = tmp_path / "batch3.pt2"
    torch.export.save(torch.export.export(net, (torch.randn(3, 3),)), path)
    app.models.opener.open_path(str(path))
    qtbot.mouseClick(_wait_trust_dialog(qtbot, app).open_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: app.models.opener.state is OpenState.OPEN, timeout=WAIT_MS)
    explorer = getattr(app.window, "explorer", None)
    if explorer is None:
        pytest.skip("this layout has no explorer")
    assert "3 samples at a time" in app.models.opener.panel.assumptions.text()
    qtbot.waitUntil(lambda: explorer.result is not None and not explorer.busy, timeout=WAIT_MS)
    assert explorer.last_error == ""
    assert explorer.result.batch == explorer.settings.batch_box.value() != 3


def test_nan_weights_are_flagged_in_the_layer_list_and_the_model_still_opens(qtbot, app, tmp_path):
    import torch

    net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))
    with torch.no_grad():
        net[0].weight[0, 0] = float("nan")
    torch.save(net.state_dict(), tmp_path / "nan.pt")
    app.models.opener.open_path(str(tmp_path / "nan.pt"))
    qtbot.waitUntil(lambda: app.models.opener.state is OpenState.OPEN, timeout=WAIT_MS)
    rows = app.models.opener.panel.layers.row_texts()
    assert [r[4] for r in rows] == ["NaN/Inf in weight", "finite"]
    assert "NaN or Inf in 0.weight" in app.models.opener.panel.assumptions.text()


def test_save_network_writes_the_fit_runs_coordinate_network(qtbot, make_lab, tmp_path):  # noqa: F811
    import torch

    from gradviz.core.nets.networks import NetworkSpec, load_network

    controller = make_lab(small(net="4-8-3", steps=1000))  # paused at step 0
    save = controller.window.actions["save_network"]
    qtbot.waitUntil(save.isEnabled, timeout=WAIT_MS)
    assert controller.models.save_source() == "run"
    path = tmp_path / "coords.safetensors"
    controller.models.choose_save_path = lambda what: str(path)
    save.trigger()
    qtbot.waitUntil(lambda: controller.models.saved_paths == [str(path)], timeout=WAIT_MS)
    spec, module = load_network(path)
    # At step 0 the run's network is the seeded build of its spec: the same weights.
    expected = NetworkSpec.parse("4-8-3").build(seed=1, dtype=torch.float32)
    assert spec.to_text() == "4-8-3"
    for name, tensor in expected.state_dict().items():
        torch.testing.assert_close(module.state_dict()[name], tensor, rtol=0, atol=0)
    # Readable as any file the user saves (the umask decides), not private to the owner.
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
    assert f"Saved the network to {path}" in controller.window.statusBar().currentMessage()


def test_enter_in_the_trust_dialog_does_not_trust_the_file(qtbot):
    from gradviz.gui.pages.models.trust_dialog import TrustDialog

    dialog = TrustDialog("/models/x.pt", "ab" * 32, "pt2")
    qtbot.addWidget(dialog)
    answers = []
    dialog.answered.connect(answers.append)
    dialog.open()
    qtbot.waitExposed(dialog)
    qtbot.keyClick(dialog, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: answers == [False])
    assert ".pt2" in dialog.reason.text() and "run code" in dialog.reason.text()


def _panel_problems(explorer, panel) -> list[str]:
    """What a user would see cut or doubled in the model panel as the window lays it out."""
    from PySide6.QtWidgets import QLabel

    from gradviz.gui.pages.models.layer_list import COLUMNS

    QApplication.processEvents()
    problems = []
    for button in panel.findChildren(QPushButton):
        if button.isVisibleTo(panel):
            needed = button.fontMetrics().horizontalAdvance(button.text())
            if needed > button.width():
                problems.append(f"button {button.text()!r}: {needed} px in {button.width()} px")
    for label in panel.findChildren(QLabel):
        if label.isVisibleTo(panel) and ".." in label.text().replace("…", ""):
            problems.append(f"label ends a sentence twice: {label.text()!r}")
    table, column = panel.layers, COLUMNS.index("Parameters")
    header = table.horizontalHeader()
    needed = max(table.sizeHintForColumn(column), header.sectionSizeHint(column))
    right = header.sectionViewportPosition(column) + header.sectionSize(column)
    if header.sectionSize(column) < needed or right > table.viewport().width():
        problems.append(f"Parameters column cut: {header.sectionSize(column)} of {needed} px")
    if explorer.width() < explorer.minimumSizeHint().width():
        problems.append(f"explorer squeezed to {explorer.width()} px")
    return problems


def test_the_model_panel_shows_its_buttons_counts_and_sentences_whole_at_both_sizes(
    qtbot, app, model_files
):
    # A class of its own while the explorer shows another network: the reason, the order
    # buttons and the layer table at once. Under a real X server the panel was 240 px at
    # 1920 x 1080: the Parameters column behind a scroll bar and "...layers.. The explorer".
    window, opener = app.window, app.models.opener
    window.resize(1920, 1080)
    opener.open_path(str(model_files / "net_x.pt"))
    qtbot.waitUntil(lambda: opener.state is OpenState.LISTED, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: opener.panel.isVisible(), timeout=WAIT_MS)
    assert "still shows" in opener.panel.reason.text()
    assert _panel_problems(app.explorer, opener.panel) == []
    assert opener.panel.width() >= 1920 // 5  # grows with the window
    window.resize(1024, 700)
    qtbot.waitUntil(lambda: window.width() == 1024, timeout=WAIT_MS)
    assert _panel_problems(app.explorer, opener.panel) == []
    shot(window, "panel_1024")


def _sequential(kind):
    """A whole nn.Sequential of torch.nn layers alone (no class of its own)."""
    import torch

    torch.manual_seed(0)
    if kind == "batchnorm":
        net = torch.nn.Sequential(
            torch.nn.Linear(3, 6), torch.nn.BatchNorm1d(6), torch.nn.Tanh(),
            torch.nn.Dropout(0.3), torch.nn.Linear(6, 2),
        ).double()  # fmt: skip
        net(torch.randn(16, 3, dtype=torch.float64) * 2 + 1)  # running statistics, train mode
        return net, (3,)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(2 * 4 * 4, 3),
    ).double()  # fmt: skip
    return net, (1, 4, 4)


@pytest.mark.parametrize("kind", ["batchnorm", "cnn"])
def test_a_whole_torch_nn_sequential_opens_without_a_question_listing_its_tree(
    qtbot, app, tmp_path, kind
):
    """Rebuilt from torch.nn's classes: no trust dialog, the panel lists the module tree
    with the class names and says how it runs, and the explorer gets a module whose
    Jacobian is the live one's."""
    import torch

    net, shape = _sequential(kind)
    path = tmp_path / f"{kind}.pt"
    torch.save(net, path)
    net.eval()
    opener = app.models.opener
    asked = []
    opener.ask_in_dim = lambda info, guess: asked.append(guess) or shape
    opener.open_path(str(path))
    qtbot.waitUntil(lambda: opener.state is OpenState.OPEN, timeout=WAIT_MS)
    assert opener.trust_dialog is None
    panel = opener.panel
    assert panel.runs_as.isVisibleTo(panel)
    assert panel.runs_as.text() == "Runs as: Rebuilt from torch.nn classes, no code from the file."
    classes = [type(m).__name__ for _, m in net.named_modules()]
    tree = panel.tree.text().splitlines()
    assert [line.split(": ")[1] for line in tree] == classes
    assert tree[1] == "    0: Linear" if kind == "batchnorm" else tree[1] == "    0: Conv2d"
    assert "saved in training mode" in panel.assumptions.text()
    assert len(asked) == (kind == "cnn")  # a CNN's input shape is asked
    ((module, label, _spec, in_dim, _out),) = app.sent
    assert label == f"{kind}.pt" and in_dim == int(np.prod(shape))
    x = torch.randn(3, *shape, dtype=torch.float64)
    expected = torch.func.vmap(torch.func.jacrev(lambda v: net(v[None])[0]))(x)
    module = module.double()
    got = torch.func.vmap(torch.func.jacrev(lambda v: module(v[None])[0]))(x)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


INSTALLED_PACKAGE = textwrap.dedent(
    """
    import torch

    class Doubled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 2)
            self.norm = torch.nn.LayerNorm(2)

        def forward(self, x):
            return 2 * torch.tanh(self.norm(self.fc(x)))

    class Chain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(3, 4)
            self.fc2 = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.fc2(torch.sin(self.fc1(x)))
    """
)


@pytest.fixture
def installed_nets(tmp_path, monkeypatch):
    """The package ``gv_gui_nets`` installed on sys.path, not yet imported."""
    site = tmp_path / "site"
    (site / "gv_gui_nets").mkdir(parents=True)
    (site / "gv_gui_nets" / "__init__.py").write_text(INSTALLED_PACKAGE)
    monkeypatch.syspath_prepend(str(site))
    sys.modules.pop("gv_gui_nets", None)
    import gv_gui_nets

    del sys.modules["gv_gui_nets"]  # not restored: each test imports its own
    yield gv_gui_nets
    sys.modules.pop("gv_gui_nets", None)


def test_an_installed_class_outside_torch_nn_opens_after_the_trust_dialog_naming_it(
    qtbot, app, tmp_path, monkeypatch, installed_nets
):
    import torch

    net = installed_nets.Doubled().eval()
    path = tmp_path / "doubled.pt"
    monkeypatch.setitem(sys.modules, "gv_gui_nets", installed_nets)
    torch.save(net, path)
    monkeypatch.delitem(sys.modules, "gv_gui_nets")
    opener = app.models.opener
    errors = []
    opener.show_error = lambda sentence, details: errors.append(sentence)
    opener.open_path(str(path))
    dialog = _wait_trust_dialog(qtbot, app)
    assert "'gv_gui_nets.Doubled'" in dialog.reason.text()
    assert "no code from the file runs" in dialog.reason.text()
    assert "gv_gui_nets" not in sys.modules  # asked before importing it
    qtbot.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: opener.state in (OpenState.OPEN, OpenState.FAILED), timeout=WAIT_MS)
    assert opener.state is OpenState.OPEN and errors == [], errors
    assert opener.panel.tree.text().splitlines() == [
        "(top): Doubled",
        "    fc: Linear",
        "    norm: LayerNorm",
    ]
    ((module, _label, _spec, in_dim, out_dim),) = app.sent
    assert (in_dim, out_dim) == (3, 2)
    x = torch.randn(4, 3)
    torch.testing.assert_close(module(x), net(x))


def test_a_listed_chain_of_an_installed_class_runs_its_forward_after_the_trust_dialog(
    qtbot, app, tmp_path, monkeypatch, installed_nets
):
    """Its layers could run in their listed order (the panel offers that, as for a class no
    package provides) or in the installed class's own forward, after the trust question."""
    import torch

    torch.manual_seed(0)
    net = installed_nets.Chain().eval()
    path = tmp_path / "chain.pt"
    monkeypatch.setitem(sys.modules, "gv_gui_nets", installed_nets)
    torch.save(net, path)
    monkeypatch.delitem(sys.modules, "gv_gui_nets")
    opener = app.models.opener
    opener.open_path(str(path))
    qtbot.waitUntil(lambda: opener.state is OpenState.LISTED, timeout=WAIT_MS)
    order = opener.panel.order
    assert order.button.isVisibleTo(opener.panel)
    assert order.installed_button.isVisibleTo(opener.panel)
    assert "'gv_gui_nets.Chain'" in order.intro.text()
    qtbot.mouseClick(order.installed_button, Qt.MouseButton.LeftButton)
    dialog = _wait_trust_dialog(qtbot, app)
    assert "'gv_gui_nets.Chain'" in dialog.reason.text()
    qtbot.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: opener.state is OpenState.OPEN, timeout=WAIT_MS)
    ((module, _label, _spec, in_dim, out_dim),) = app.sent
    x = torch.randn(4, 3)
    torch.testing.assert_close(module(x), net(x))  # sin between the layers: its own forward


def _program_processes() -> list[int]:
    """Process ids of the processes running this process's trusted programs: those its
    program launcher forked (see program_launcher), or its own program_child interpreters."""
    processes = {}  # pid -> (parent pid, command line)
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat, open(f"/proc/{entry}/cmdline", "rb") as cmd:
                processes[int(entry)] = (int(stat.read().rsplit(")", 1)[1].split()[1]), cmd.read())
        except (OSError, ValueError, IndexError):
            continue
    ours = {pid for pid, (parent, _) in processes.items() if parent == os.getpid()}
    launchers = {pid for pid in ours if b"program_launcher" in processes[pid][1]}
    forked = {pid for pid, (parent, _) in processes.items() if parent in launchers}
    return sorted(forked | {pid for pid in ours if b"program_child" in processes[pid][1]})


@pytest.mark.filterwarnings(
    r"ignore:`torch\.jit\.script` is deprecated:DeprecationWarning",
    r"ignore:`torch\.jit\.script` is deprecated:FutureWarning",
)
def test_cancel_stops_a_trusted_program_that_never_returns(qtbot, app, model_files, tmp_path):
    """A program that loops forever: the wait counts its seconds, Cancel stops its process
    long before the 60 s limit, the panel says so, and the next file opens."""
    import torch

    class Forever(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(2, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            steps = 1
            while steps > 0:  # 2**63 steps: never ends (the result is used: not dropped)
                steps = steps + 1
            return self.fc(x) * steps

    path = tmp_path / "forever.pt"
    torch.jit.script(Forever()).save(str(path))
    earlier = set(_program_processes())  # programs other tests opened
    opener = app.models.opener
    opener.open_path(str(path))
    qtbot.mouseClick(_wait_trust_dialog(qtbot, app).open_button, Qt.MouseButton.LeftButton)
    # The first load learns no width (TorchScript declares none); the second runs it.
    qtbot.waitUntil(
        lambda: (
            opener.request.in_dim == 2
            and opener.wait_dialog is not None
            and "forever.pt's program in a process of its own" in opener.wait_dialog.labelText()
            and opener.wait_dialog.labelText().endswith(": 1 s.")
        ),
        timeout=WAIT_MS,
    )
    assert set(_program_processes()) - earlier
    shot(opener.wait_dialog, "program_wait")
    qtbot.mouseClick(opener.wait_dialog.findChild(QPushButton), Qt.MouseButton.LeftButton)
    assert opener.state is OpenState.CANCELLED and opener.wait_dialog is None
    assert (
        opener.panel.reason.text() == "Opening forever.pt was cancelled: its program was stopped."
    )
    # The load's thread ends once the process is gone: well before the 60 s time limit.
    # (The first load's process, never used, ends when it is collected.)
    qtbot.waitUntil(
        lambda: (
            opener.tasks.running() == 0
            and gc.collect() >= 0
            and not set(_program_processes()) - earlier
        ),
        timeout=20_000,
    )
    assert app.sent == []
    opener.open_path(str(model_files / "net_x_script.pt"))  # the panel is still usable
    qtbot.mouseClick(_wait_trust_dialog(qtbot, app).open_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: opener.state is OpenState.OPEN, timeout=WAIT_MS)
    assert [sent[1] for sent in app.sent] == ["net_x_script.pt"]
