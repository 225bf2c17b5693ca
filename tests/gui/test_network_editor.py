"""The network editor drives the spec: clicks and typing give one network in the spec text,
the run's config and the diagram's readouts (lab setup panel, no torch needed)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from gradviz.core.nets.networks import NetworkSpec
from gradviz.core.settings.config import FitConfig
from gradviz.gui.widgets.settings_form import SetupForm


@pytest.fixture
def form(qtbot):
    form = SetupForm(FitConfig(net="8-16-3:tanh", dim=3))
    qtbot.addWidget(form)
    form.resize(360, 900)
    form.show()
    qtbot.waitExposed(form)
    return form


def spec_line(form: SetupForm):
    """The line edit of the spec text in the tree, as the user types in it."""
    (item,) = form.param("net_spec").items
    item.showEditor()
    return item.widget


def agree(form: SetupForm) -> dict:
    """The spec text, the run's config and the diagram say the same network; its readouts."""
    editor = form.network_editor()
    shown = editor.readouts()
    text = form.param("net_spec").value()
    spec = NetworkSpec.parse(text)
    assert NetworkSpec.parse(form.config().net) == spec
    assert NetworkSpec.parse(shown["text"]) == spec
    assert shown["widths"] == shown["shown_widths"] == spec.widths()
    assert shown["activations"] == shown["shown_activations"] == spec.chain_activations()
    assert not shown["stale"] and form.problem_text == ""
    return shown


def test_adding_a_layer_and_changing_a_width_and_an_activation_by_clicks(qtbot, form):
    editor = form.network_editor()
    with qtbot.waitSignal(form.changed) as changed:
        qtbot.mouseClick(editor.add_layer, Qt.MouseButton.LeftButton)
    assert changed.args == ["net"]
    assert agree(form)["widths"] == [8, 16, 16, 3]
    assert form.param("net_spec").value() == "8-16-16-3:tanh"
    qtbot.mouseClick(editor.column(2)["more"], Qt.MouseButton.LeftButton)
    qtbot.mouseClick(editor.column(0)["less"], Qt.MouseButton.LeftButton)
    assert agree(form)["widths"] == [7, 16, 17, 3]
    combo = editor.column(2)["activation"]
    combo.setFocus()
    qtbot.keyClick(combo, Qt.Key.Key_Up)  # tanh -> relu, as a user picks from the list
    shown = agree(form)
    assert shown["activations"] == ["tanh", "relu"]
    assert form.param("net_spec").value() == "7-16:tanh-17:relu-3"
    assert form.config().net == "7-16:tanh-17:relu-3"
    qtbot.mouseClick(editor.column(1)["remove"], Qt.MouseButton.LeftButton)
    assert agree(form)["widths"] == [7, 17, 3]
    assert form.param("net_spec").value() == "7-17-3:relu"


def test_typed_text_redraws_the_diagram_and_bad_text_keeps_the_last_valid_network(qtbot, form):
    editor = form.network_editor()
    form.param("net_spec").setValue("4-10:relu-12:sigmoid-3")
    assert agree(form)["units_drawn"] == [(4, False), (7, True), (7, True), (3, False)]
    line = spec_line(form)
    line.selectAll()
    qtbot.keyClicks(line, "4-10:swish-3")
    shown = editor.readouts()
    assert shown["stale"] and "last valid network" in shown["words"]
    # "4-10" parsed on the way; nothing typed after it did: the diagram stays there.
    assert shown["widths"] == [4, 10]
    assert "'swish'" in form.problem_text
    line.selectAll()
    qtbot.keyClicks(line, "4-9-3")
    assert editor.readouts()["widths"] == [4, 9, 3] and not editor.readouts()["stale"]
    qtbot.keyClick(line, Qt.Key.Key_Return)
    assert agree(form)["widths"] == [4, 9, 3]


def test_the_output_width_is_d_and_follows_it(qtbot, form):
    editor = form.network_editor()
    assert agree(form)["output_locked"]
    assert not editor.column(2)["width"].isEnabled()
    assert "3 = D" in editor.readouts()["words"]
    form.param("dim").setValue(2)
    shown = agree(form)
    assert shown["widths"] == [8, 16, 2] and form.config().dim == 2
    assert "2 = D" in shown["words"]
    # A typed spec that ends in another width is left as typed, with what to change.
    form.param("net_spec").setValue("8-16-5:tanh")
    assert "D = 2" in form.problem_text


def test_switching_to_a_network_gives_one_that_ends_in_d(qtbot):
    form = SetupForm(FitConfig(net=None, dim=2))
    qtbot.addWidget(form)
    form.param("net").setValue("network")
    assert form.config().net == "8-64-2:tanh"
    assert form.network_editor().readouts()["widths"] == [8, 64, 2]
