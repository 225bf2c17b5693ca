"""The wheel over a combo box or spin box of a scrolled panel scrolls the panel until the
box has the focus; then it changes the box's value."""

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QComboBox, QScrollArea, QSpinBox, QVBoxLayout, QWidget

from gradviz.core.settings.config import FitConfig
from gradviz.gui.widgets.settings_form import SetupForm
from gradviz.gui.widgets.wheel import wheel_scrolls_past


def wheel_down(widget) -> None:
    centre = QPointF(widget.rect().center())
    event = QWheelEvent(
        centre, QPointF(widget.mapToGlobal(centre.toPoint())), QPoint(0, 0), QPoint(0, -120),
        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase,
        False,
    )  # fmt: skip
    QApplication.sendEvent(widget, event)


def test_the_wheel_scrolls_the_panel_past_a_box_until_the_box_is_clicked(qtbot):
    area = QScrollArea()
    inside = QWidget()
    layout = QVBoxLayout(inside)
    combo, spin = QComboBox(), QSpinBox()
    combo.addItems(["tanh", "relu", "sigmoid"])
    layout.addWidget(combo)
    layout.addWidget(spin)
    layout.addSpacing(3000)
    area.setWidget(inside)
    area.resize(300, 200)
    qtbot.addWidget(area)
    area.show()
    qtbot.waitExposed(area)
    wheel_scrolls_past(combo, spin)
    bar = area.verticalScrollBar()
    for box in (combo, spin):
        before = bar.value()
        wheel_down(box)
        assert bar.value() > before  # the panel scrolled
    assert combo.currentText() == "tanh" and spin.value() == 0  # no value changed
    combo.setFocus()
    qtbot.waitUntil(combo.hasFocus)
    wheel_down(combo)
    assert combo.currentText() == "relu"  # focused: the wheel is the box's


def test_scrolling_the_labs_setup_panel_over_a_layers_activation_leaves_it(qtbot):
    form = SetupForm(FitConfig(target="helix", n=20, net="8-16-3:tanh"))
    qtbot.addWidget(form)
    form.resize(360, 300)  # short: the panel scrolls
    form.show()
    qtbot.waitExposed(form)
    editor = form.network_editor()
    combo = editor.findChild(QComboBox, "activation-1")
    width = editor.findChild(QSpinBox, "width-1")
    bar = form.tree.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0)
    for box in (combo, width):
        before = bar.value()
        wheel_down(box)
        assert bar.value() > before
    assert form.config().net == "8-16-3:tanh" and combo.currentText() == "tanh"
