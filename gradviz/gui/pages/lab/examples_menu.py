"""File > Examples: the bundled experiments, each with a thumbnail of its point set and its
one line; choosing one fills the setup form and restarts the run with it.

The thumbnail is the example's target drawn by its generator at the example's N, D and seed
(as the point-set gallery draws it), never a picture shipped by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction, QIcon
from PySide6.QtWidgets import QMenu, QProxyStyle, QStyle

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.examples import Example, bundled_examples
from gradviz.core.settings.table import FILE_PREFIX
from gradviz.gui.widgets.form_points import read_point_file
from gradviz.gui.widgets.point_gallery import draw_points, thumbnail_points
from gradviz.gui.widgets.settings_form import SetupForm

if TYPE_CHECKING:
    from PySide6.QtWidgets import QMainWindow as MainWindow  # the shell's window

#: Thumbnail side in the menu (px).
ICON = 40


def example_points(example: Example) -> np.ndarray | None:
    """The target points an example's thumbnail draws (None where they cannot be made)."""
    config = example.config
    try:
        if config.target.startswith(FILE_PREFIX):
            return read_point_file(config.target[len(FILE_PREFIX) :])
        return thumbnail_points(config.target, config.n, config.dim, config.seed)[0]
    except GradvizError:
        return None


class _LargeIcons(QProxyStyle):
    """The application's style with ICON-pixel menu icons (a point set in 16 px is a dot)."""

    def pixelMetric(self, metric, option=None, widget=None) -> int:  # noqa: N802 - Qt override
        if metric == QStyle.PixelMetric.PM_SmallIconSize:
            return ICON
        return super().pixelMetric(metric, option, widget)


class ExamplesMenu(QObject):
    """The File menu's Examples submenu of ``window``; ``opened(name)`` after an example is
    put into ``form`` (``experiments_opened`` is then called, which restarts the run)."""

    opened = Signal(str)

    def __init__(
        self,
        window: MainWindow,
        form: SetupForm,
        experiments_opened: Callable[[], Any],
        examples: Callable[[], list[Example]] = bundled_examples,
    ) -> None:
        super().__init__(window)
        self.window, self.form, self.experiments_opened = window, form, experiments_opened
        self.menu = QMenu("&Examples", window)
        self.menu.setObjectName("examples-menu")
        self.menu.setToolTipsVisible(True)
        self._style = _LargeIcons()  # the menu does not own its style: keep it alive
        self.menu.setStyle(self._style)
        window.file_menu.insertMenu(window.actions["save"], self.menu)
        self.actions: dict[str, QAction] = {}
        try:
            found = examples()
        except GradvizError as exc:  # a damaged install: say so in the menu
            broken = self.menu.addAction(f"The examples cannot be read: {exc}")
            broken.setEnabled(False)
            return
        for example in found:
            self._add(example)

    def _add(self, example: Example) -> None:
        action = self.menu.addAction(f"{example.name}  —  {example.description}")
        action.setIcon(QIcon(draw_points(example_points(example), ICON, "no preview")))
        action.setToolTip(example.description)
        action.setStatusTip(example.description)
        action.triggered.connect(lambda _checked=False, e=example: self.open(e))
        self.actions[example.name] = action

    def open(self, example: Example) -> None:
        """Fill the form with ``example`` and run it (the previous setup can be undone)."""
        self.form.set_config(example.config, example.live)
        self.experiments_opened()
        self.window.statusBar().showMessage(f"Example {example.name}: {example.description}")
        self.opened.emit(example.name)
