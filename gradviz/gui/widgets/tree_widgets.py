"""A whole widget as one row of a pyqtgraph ParameterTree, across both of its columns.

The setup form shows its network editor and its point-set gallery right under the settings
they edit: a parameter of type ``EMBEDDED`` (created with ``embedded(name, widget)``) holds no
value; its tree row is ``widget``, as tall as the widget wants for the tree's width.
"""

from __future__ import annotations

import pyqtgraph.parametertree as ptree
from PySide6.QtCore import QEvent, QObject, QSize, Qt
from PySide6.QtWidgets import QWidget

EMBEDDED = "gradviz-embedded"


class EmbeddedItem(ptree.ParameterItem):
    """The tree row of an embedded widget: spans both columns, not selectable."""

    def __init__(self, param: ptree.Parameter, depth: int) -> None:
        super().__init__(param, depth)
        self.widget: QWidget = param.opts["widget"]
        self.setFlags(Qt.ItemFlag.ItemIsEnabled)
        self._watcher = _SizeWatcher(self)
        self.widget.installEventFilter(self._watcher)

    def treeWidgetChanged(self) -> None:  # noqa: N802 - pyqtgraph's name
        super().treeWidgetChanged()
        tree = self.treeWidget()
        if tree is None:
            return
        self.setFirstColumnSpanned(True)
        tree.setItemWidget(self, 0, self.widget)
        self.fit()

    def fit(self) -> None:
        """Make the row as tall as the widget needs at the tree's width."""
        tree = self.treeWidget()
        width = tree.viewport().width() if tree is not None else self.widget.width()
        width = max(width - 4, 1)
        if self.widget.hasHeightForWidth():
            height = self.widget.heightForWidth(width)
        else:
            height = self.widget.sizeHint().height()
        height = max(height, self.widget.minimumSizeHint().height())
        if self.sizeHint(0).height() != height:
            self.setSizeHint(0, QSize(width, height))
            if tree is not None:
                # The tree keeps its rows' old heights (and draws the rows under this one
                # over it) until it lays them out again.
                tree.doItemsLayout()

    def optsChanged(self, param, opts) -> None:  # noqa: N802 - pyqtgraph's name
        super().optsChanged(param, opts)
        if "visible" in opts:
            self.setHidden(not opts["visible"])


class _SizeWatcher(QObject):
    """Refits the row when the widget's layout asks for another size."""

    def __init__(self, item: EmbeddedItem) -> None:
        super().__init__(item.widget)
        self._item = item

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 - Qt override
        if event.type() in (QEvent.Type.LayoutRequest, QEvent.Type.Resize):
            self._item.fit()
        return False


class EmbeddedParameter(ptree.Parameter):
    itemClass = EmbeddedItem


ptree.registerParameterType(EMBEDDED, EmbeddedParameter, override=True)


def embedded(name: str, widget: QWidget, visible: bool = True) -> dict:
    """The parameter dict of a tree row that is ``widget``."""
    return {"name": name, "type": EMBEDDED, "widget": widget, "visible": visible, "value": None}
