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


def test_an_edited_network_restarts_the_run_and_draws_only_its_own_gradients(qtbot, make_lab):  # noqa: F811 - fixture
    controller = make_lab(small("masked", net=NET))
    shown_after_one_step(qtbot, controller)
    editor = controller.form.network_editor()
    editor.column(1)["more"].click()
    edited = controller.form.param("net_spec").value()
    assert edited != NET and controller.questions == []  # restarted in place, no dialog
    assert controller.session.config.net == edited
    assert editor.readouts()["gradients"] == []  # the old run's gradients went with it
    snapshot = shown_after_one_step(qtbot, controller)
    assert snapshot.generation == controller.session.generation
    diagram_agrees_with(controller, snapshot)  # the new network's own gradients
    earlier = controller.views.readouts()["loss"]["earlier_runs"]
    assert len(earlier) == 1 and earlier[0]["label"].startswith(f"earlier: net={NET} (")


def test_a_new_network_that_fails_to_run_leaves_the_last_good_run_on_screen(qtbot, make_lab):  # noqa: F811 - fixture
    from gradviz.core.common.errors import GradvizError
    from gradviz.core.lab.fit import DistanceFitRun

    def only_the_first_network(config):
        if config.net != NET:
            raise GradvizError("This network cannot be built here.")
        return DistanceFitRun(config)

    controller = make_lab(small("masked", net=NET), run_factory=only_the_first_network)
    good = shown_after_one_step(qtbot, controller)
    controller.form.network_editor().column(1)["more"].click()
    session = controller.session
    qtbot.waitUntil(lambda: session.failure is not None, timeout=RUN_TIMEOUT_MS)
    assert session.shown is good  # the last good frame is back on screen
    drawn = {(v["step"], v["generation"]) for v in controller.views.readouts().values()}
    assert drawn == {(good.step, good.generation)}
    message = controller.window.statusBar().currentMessage()
    assert "This network cannot be built here." in message and "run before it" in message
    # The diagram holds the form's (failed) network: it draws no other run's gradients.
    readouts = controller.form.network_editor().readouts()
    assert readouts["gradients"] == []
    assert f"has the network {NET}" in readouts["gradient_note"]
