"""The setup panel's network diagram shows each layer's gradient of the picture on screen,
agreeing with the snapshot's own parameter health and norms (real app, real runs)."""

from __future__ import annotations

import math

from fixtures_app import RUN_TIMEOUT_MS, isolated_settings, make_lab, small  # noqa: F401

from gradviz.core.common.health import HEALTH_LABELS, Health
from gradviz.gui.widgets.palette import OKABE_ITO

NET = "3-6:tanh-5:relu-3"


def shown_after_one_step(qtbot, controller):
    controller.step_once()
    qtbot.waitUntil(
        lambda: controller.session.shown is not None and controller.session.shown.step >= 1,
        timeout=RUN_TIMEOUT_MS,
    )
    return controller.session.shown


def diagram_agrees_with(controller, snapshot) -> list[dict]:
    """Each drawn parameter's colour, health and norm are the snapshot's."""
    readouts = controller.form.network_editor().readouts()
    health = dict(snapshot.param_health)
    norms = dict(snapshot.param_norms)
    drawn = [
        param
        for layer in readouts["gradients"]
        for param in (layer["weight"], layer["bias"])
        if param is not None
    ]
    assert [p["name"] for p in drawn] == list(health)  # every parameter, in order
    for param in drawn:
        code = Health(health[param["name"]])
        assert param["health"] == HEALTH_LABELS[code]
        assert param["colour"] == OKABE_ITO[code]
        norm = norms[param["name"]]
        assert param["norm"] == norm or (math.isnan(param["norm"]) and math.isnan(norm))
    assert readouts["gradient_note"] == "Gradients of step 0."
    return drawn


def test_a_naive_run_turns_every_layer_nan_at_step_0(qtbot, make_lab):  # noqa: F811 - fixture
    controller = make_lab(small("naive", net=NET))
    snapshot = shown_after_one_step(qtbot, controller)
    drawn = diagram_agrees_with(controller, snapshot)
    assert {p["health"] for p in drawn} == {"NaN"}
    assert all(p["colour"] == OKABE_ITO[Health.NAN] for p in drawn)


def test_a_masked_run_draws_finite_layers_with_their_norms(qtbot, make_lab):  # noqa: F811 - fixture
    controller = make_lab(small("masked", net=NET))
    snapshot = shown_after_one_step(qtbot, controller)
    drawn = diagram_agrees_with(controller, snapshot)
    assert "NaN" not in {p["health"] for p in drawn}
    assert all(math.isfinite(p["norm"]) for p in drawn)
    # Hovering the first layer reads its numbers.
    from gradviz.core.nets.layer_gradients import format_norm

    tip = controller.form.network_editor().diagram.layer_tooltip(0)
    assert "Linear 1: 3 → 6 (step 0)" in tip
    assert f"weight gradient: norm {format_norm(drawn[0]['norm'])}, worst entry" in tip
    # A wider norm draws a thicker line (log scale): the readouts order them alike.
    by_norm = sorted(drawn, key=lambda p: p["norm"])
    assert [p["thickness"] for p in by_norm] == sorted(p["thickness"] for p in drawn)


def test_an_edited_network_shows_no_gradients_of_the_run_on_screen(qtbot, make_lab):  # noqa: F811 - fixture
    controller = make_lab(small("masked", net=NET))
    shown_after_one_step(qtbot, controller)
    controller.answer = False  # keep the run: the edit applies at the next Reset
    editor = controller.form.network_editor()
    editor.column(1)["more"].click()
    readouts = editor.readouts()
    assert readouts["gradients"] == []
    assert f"has the network {NET}" in readouts["gradient_note"]
    assert controller.questions == ["Reset the run?"]  # the run on screen is kept
