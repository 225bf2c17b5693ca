"""The row over the Graph page's drawing: the search (modules found by name, the others
faded; Enter steps through them) and the page's buttons."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QPushButton, QWidget


class GraphSearch(QObject):
    """``edit`` (the search field) and ``label`` (how many found) over ``page``'s drawing
    (its ``shown`` graph, ``scene`` and ``view``)."""

    def __init__(self, page: Any) -> None:
        super().__init__(page)
        self.page = page
        self.edit = QLineEdit()
        self.edit.setObjectName("graph-search")
        self.edit.setPlaceholderText("Search modules by name (Enter: next match)")
        self.edit.setClearButtonEnabled(True)
        self.label = QLabel("")
        self._index = -1
        self.edit.textChanged.connect(self.refresh)
        self.edit.returnPressed.connect(self.next_match)

    def matches(self) -> list[str]:
        """Drawn node ids (nodes and module frames) whose module path or name holds the
        search text, in graph order."""
        text = self.edit.text().strip().lower()
        shown, scene = self.page.shown, self.page.scene
        if not text or shown is None or scene is None:
            return []
        drawn = scene.nodes.keys() | scene.boxes.keys()
        return [
            n.id
            for n in shown.nodes
            if n.id in drawn and (text in n.module.lower() or text in n.name.lower())
        ]

    @Slot()
    def refresh(self, *_text) -> None:
        """Fade what does not match (a new drawing, or new text) and go to the first."""
        scene = self.page.scene
        if scene is None:
            return
        matches = set(self.matches())
        searching = bool(self.edit.text().strip())
        for node_id, item in scene.nodes.items():
            item.setOpacity(1.0 if not searching or node_id in matches else 0.25)
        self.label.setText(f"{len(matches):,} found" if searching else "")
        self._index = -1
        if matches:
            self.next_match()

    @Slot()
    def next_match(self) -> None:
        matches = self.matches()
        scene = self.page.scene
        if not matches or scene is None:
            return
        self._index = (self._index + 1) % len(matches)
        item = scene.nodes.get(matches[self._index]) or scene.boxes.get(matches[self._index])
        self.page.view.centerOn(item)


class GraphToolbar(QWidget):
    """The row over the graph: the search (``finder``: its ``edit`` and ``label``) and the
    buttons Fit, Expand all, Collapse, Export PNG…, Export SVG…, acting on ``page``."""

    def __init__(self, page: Any, node_limit: int) -> None:
        super().__init__(page)
        self.finder = GraphSearch(page)
        buttons = []
        for text, tip, slot in (
            ("Fit", "Show the whole graph", page.view.fit),
            ("Expand all", "Expand every module (a large graph takes a while)", page.expand_all),
            ("Collapse", f"Collapse modules until at most {node_limit} nodes show",
             page.collapse_to_fit),
            ("Export PNG…", "Save the whole graph as a PNG image", page.export_png),
            ("Export SVG…", "Save the whole graph as an SVG drawing", page.export_svg),
        ):  # fmt: skip
            button = QPushButton(text)
            button.setToolTip(tip)
            button.clicked.connect(slot)
            buttons.append(button)
        self.buttons = buttons
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.finder.edit, 1)
        row.addWidget(self.finder.label)
        for button in buttons:
            row.addWidget(button)
