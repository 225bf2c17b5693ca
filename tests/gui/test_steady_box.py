"""Readouts that change every frame do not lay the window out again, and never lose text."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication, QLabel, QVBoxLayout, QWidget

from gradviz.gui.widgets.steady import SteadyBox


class LayoutRequests(QObject):
    """Counts the layout requests that reach one widget."""

    def __init__(self, widget: QWidget) -> None:
        super().__init__()
        self.count = 0
        widget.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt override
        if event.type() == QEvent.Type.LayoutRequest:
            self.count += 1
        return False


def window_with(label: QLabel, qtbot) -> tuple[QWidget, SteadyBox]:
    window = QWidget()
    qtbot.addWidget(window)
    box = SteadyBox(label)
    layout = QVBoxLayout(window)
    layout.addWidget(QLabel("a neighbour"))
    layout.addWidget(box)
    layout.addStretch(1)  # the box gets the room it asks for, no more
    window.resize(400, 200)
    window.show()
    qtbot.waitExposed(window)
    return window, box


def test_a_readout_changing_within_its_room_does_not_lay_the_window_out(qtbot):
    label = QLabel("step 1,000")
    window, box = window_with(label, qtbot)
    QApplication.processEvents()
    requests = LayoutRequests(window)
    for step in range(1000, 1020):
        label.setText(f"step {step:,}")
        QApplication.processEvents()
    label.setText("step 1")  # shorter: the room stays
    QApplication.processEvents()
    assert requests.count == 0
    assert label.text() == "step 1" and label.geometry() == box.rect()
    # Without the box each new text would have reached the window (the cost it saves).
    bare = QLabel("step 1,000")
    window.layout().addWidget(bare)
    QApplication.processEvents()
    requests.count = 0
    bare.setText("step 1,001")
    QApplication.processEvents()
    assert requests.count > 0


def test_a_longer_readout_gets_the_room_it_needs(qtbot):
    label = QLabel("loss 1")
    window, box = window_with(label, qtbot)
    label.setText("loss 1.2345e-03 at step 123,456 of a much longer run")
    qtbot.waitUntil(lambda: box.width() >= label.sizeHint().width())
    assert label.width() == box.width()


def test_a_wrapped_readout_that_needs_another_line_gets_it(qtbot):
    label = QLabel("one line")
    label.setWordWrap(True)
    window, box = window_with(label, qtbot)
    one_line = box.height()
    label.setText(" ".join(["several words that wrap"] * 12))
    qtbot.waitUntil(lambda: box.height() > one_line)
    assert box.height() >= label.heightForWidth(box.width())
