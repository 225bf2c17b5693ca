"""A click on a layer in the network diagram opens its weights and gradients as heatmaps:
the numbers are the model's own (against an independent float64 forward/backward), the
health codes are those of the diagram's colour, and the window follows the picture shown."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fixtures_app import RUN_TIMEOUT_MS, isolated_settings, make_lab, small  # noqa: F401
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication

from gradviz.core.common.health import HEALTH_LABELS, Health
from gradviz.core.lab.distances import pairwise_distances
from gradviz.core.lab.fit import DistanceFitRun

NET = "3-6:tanh-5:relu-3"


def shown_at_step(qtbot, controller, step: int):
    while controller.session.latest.step < step:
        controller.step_once()
        qtbot.waitUntil(
            lambda s=controller.session.latest.step: controller.session.latest.step > s,
            timeout=RUN_TIMEOUT_MS,
        )
    session = controller.session
    qtbot.waitUntil(lambda: session.shown is not None and session.shown.step == step)
    return session.shown


def click_layer(qtbot, controller, layer: int):
    """A real click on layer ``layer``'s lines in the diagram; the window it opens."""
    diagram = controller.form.network_editor().diagram
    qtbot.mouseClick(diagram, Qt.MouseButton.LeftButton, pos=diagram.layer_point(layer).toPoint())
    view = controller.lab.network_gradients.layer_view
    qtbot.waitUntil(lambda: view is not None and view.isVisible())
    return view


def reference(config, step_zero: bool = True) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each Linear layer's (weight | bias) and gradient at step 0, float64, by a forward and
    backward of the test's own on the run's network, features and target."""
    run = DistanceFitRun(config)
    model = run.model.double()
    coords = model(run.features.double())
    distances = pairwise_distances(coords, config.method).distances
    F.mse_loss(distances, run.target_distances.double()).backward()
    layers = [m for m in model if isinstance(m, torch.nn.Linear)]
    return [
        (
            torch.column_stack([m.weight, m.bias]).detach().numpy(),
            torch.column_stack([m.weight.grad, m.bias.grad]).numpy(),
        )
        for m in layers
    ]


def numbers(text: str) -> dict[str, float]:
    return {k: float(v) for k, v in re.findall(r"(weight|bias|gradient) = (\S+?),?(?:\s|$)", text)}


def test_a_masked_layer_reads_the_models_weights_and_gradients(qtbot, make_lab):  # noqa: F811
    config = small("masked", net=NET)
    controller = make_lab(config)
    snapshot = shown_at_step(qtbot, controller, 1)  # the gradients of step 0
    view = click_layer(qtbot, controller, 1)
    expected_w, expected_g = reference(config)[1]
    assert view.readouts()["shape"] == (5, 7)  # 5 units; 6 inputs and the bias
    assert "Linear 2: 6 → 5" in view.readouts()["title"] and "step 0" in view.readouts()["title"]
    for i, j in [(0, 0), (4, 5), (2, 6)]:  # a weight, the last weight, a bias
        entry = view.entry(i, j)
        assert entry["weight"] == pytest.approx(expected_w[i, j], rel=1e-6)
        assert entry["gradient"] == pytest.approx(expected_g[i, j], rel=1e-4, abs=1e-9)
        assert entry["health"] == "finite"
        assert entry["drawn_gradient"] == pytest.approx(expected_g[i, j], rel=1e-4, abs=1e-9)
    # The kept values are the run's float32 numbers exactly (its own step-0 model).
    kept = {p.name: p for p in snapshot.param_values}
    assert view.entry(3, 2)["weight"] == float(kept["2.weight"].values[3, 2])
    assert view.entry(3, 6)["gradient"] == float(kept["2.bias"].grads[3])
    # No entry is NaN or Inf; the diagram's worst entry is the window's.
    counts = view.readouts()["health_counts"]
    assert counts["NaN"] == counts["+Inf"] == counts["-Inf"] == 0
    worst = max(Health(dict(snapshot.param_health)[n]) for n in ("2.weight", "2.bias"))
    assert worst == max(Health(int(c)) for c in view.health._codes.ravel())

    # Hover: the readout names the entry and its numbers (6 significant digits).
    panel = view.grads
    qtbot.waitExposed(view)
    qtbot.waitUntil(lambda: panel.view.viewRange()[0][1] >= 7)  # the whole matrix in view
    viewport = panel.graphics.viewport()
    pos = QPointF(panel.graphics.mapFromScene(panel.cell_scene_pos(4, 5)))
    move = QMouseEvent(QEvent.Type.MouseMove, pos, QPointF(viewport.mapToGlobal(pos)),
                       Qt.MouseButton.NoButton, Qt.MouseButton.NoButton,
                       Qt.KeyboardModifier.NoModifier)  # fmt: skip
    QApplication.sendEvent(viewport, move)
    qtbot.waitUntil(lambda: view.readout.text().startswith("row 4 (output unit), column 5"))
    read = numbers(view.readout.text())
    assert read["weight"] == pytest.approx(expected_w[4, 5], rel=1e-5)
    assert read["gradient"] == pytest.approx(expected_g[4, 5], rel=1e-4, abs=1e-9)


def test_a_naive_layer_is_nan_at_step_0_and_follows_the_run(qtbot, make_lab):  # noqa: F811
    config = small("naive", net=NET)
    controller = make_lab(config)
    shown_at_step(qtbot, controller, 1)
    view = click_layer(qtbot, controller, 0)
    counts = view.readouts()["health_counts"]
    assert counts["NaN"] == 6 * 4  # every weight and bias entry of Linear 1 (6 x (3 + 1))
    assert view.entry(0, 3)["health"] == HEALTH_LABELS[Health.NAN]
    assert np.isnan(view.entry(2, 1)["gradient"])
    expected_w, expected_g = reference(config)[0]
    assert np.isnan(expected_g).all()  # the independent backward agrees: all NaN
    assert view.entry(2, 1)["weight"] == pytest.approx(expected_w[2, 1], rel=1e-6)
    # A click on another layer shows that one.
    view = click_layer(qtbot, controller, 2)
    assert view.readouts()["shape"] == (3, 6) and "Linear 3: 5 → 3" in view.readouts()["title"]


def test_the_window_follows_the_live_run_and_the_timeline(qtbot, make_lab):  # noqa: F811
    controller = make_lab(small("masked", net=NET))
    first = shown_at_step(qtbot, controller, 1)
    view = click_layer(qtbot, controller, 0)

    def holds(snapshot) -> bool:
        kept = {p.name: p for p in snapshot.param_values}
        return np.array_equal(view.matrix.grads[:, :3], kept["0.weight"].grads) and (
            np.array_equal(view.matrix.grads[:, 3], kept["0.bias"].grads)
        )

    assert holds(first)
    second = shown_at_step(qtbot, controller, 2)
    qtbot.waitUntil(lambda: "step 1" in view.readouts()["title"])
    assert holds(second) and not holds(first)  # the new step's own gradients
    # The timeline's earlier step brings that picture back, in the window too.
    timeline = controller.recordings.timeline
    timeline.select_index(0)
    qtbot.waitUntil(lambda: controller.session.shown.step == 0 or holds(first))
    shown = controller.session.shown
    assert holds(shown)
    # Another network in the editor: the window draws no numbers of the old run's.
    controller.form.network_editor().column(1)["more"].click()
    qtbot.waitUntil(lambda: view.matrix is None or holds(controller.session.shown))
