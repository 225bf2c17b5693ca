"""A widget made the first time it is painted or asked for: for pages and docks that are
hidden at start-up and that most sessions never open."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from gradviz.gui.common.readouts import Readouts, readouts_of


class LazyWidget(QWidget):
    """Holds the widget ``factory`` makes, made the first time this one is painted or
    ``content`` is asked for; ``built(content)`` is emitted once, when it is made (connect
    to it before anything can ask for ``content``).

    Painted, not shown: a dock tabbed away counts as visible (``isVisible``) and gets no
    show event when its tab is chosen, but it is painted only then. Building every hidden
    page's and dock's plots before the window's first paint cost start-up ~0.4 s.
    """

    built = Signal(object)

    def __init__(self, factory: Callable[[], QWidget], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._factory: Callable[[], QWidget] | None = factory
        self._content: QWidget | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)

    @property
    def is_built(self) -> bool:
        return self._content is not None

    @property
    def content(self) -> QWidget:
        if self._content is None:
            self._content = self._factory()
            self._factory = None
            self.layout().addWidget(self._content)
            self.built.emit(self._content)
        return self._content

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().paintEvent(event)
        if self._content is None:
            QTimer.singleShot(0, self, lambda: self.content)  # not while painting

    def readouts(self) -> Readouts:
        return readouts_of(self.content) or {}
