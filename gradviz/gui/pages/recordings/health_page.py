"""The Model health page: where in a model, and when, gradients went bad.

A heatmap of the watched tensors (rows, model order) over the recorded steps (columns),
the loss on the same step axis, the selected tensor's histogram and counts at the selected
step, the first non-finite gradient one click away (with where it began, when the recording
knows: ``OriginPanel``), a rank selector, the per-entry health
matrices of watched intermediate tensors (``rec.tensor``), and the timeline. It is fed
``RecordingData`` (``set_data``) and never reads files itself.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from gradviz.core.record.origin_place import unnamed_place
from gradviz.core.record.recording_data import RecordingData
from gradviz.gui.common.readouts import step_in
from gradviz.gui.pages.recordings.health_plots import (
    READOUT_HINT,
    HealthOverTime,
    StepLoss,
    TensorHistogram,
)
from gradviz.gui.pages.recordings.origin_panel import OriginPanel
from gradviz.gui.widgets.healthmap import HealthMapView
from gradviz.gui.widgets.heatmap import HeatmapView
from gradviz.gui.widgets.timeline import Timeline

PAGE_TITLE = "Model health"


class ModelHealthPage(QWidget):
    """``rankChosen(rank)`` asks for another rank's stream; ``tensorsSelected(rows)``: the
    user chose the tensors ``rows`` (a tuple of row indices) here (a cell, Ctrl/Shift+click
    for more, the first non-finite one), for the Graph page.

    The selection is a set of tensors (the rows of one module, when the Graph page chose a
    node), outlined on the health map; the histogram shows the first of them and the
    selection line says so."""

    rankChosen = Signal(int)
    tensorsSelected = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("model-health-page")
        self.data: RecordingData | None = None
        self.selected_rows: tuple[int, ...] = (0,)
        self.path_label = QLabel("Open a recording (File > Open recording…)")
        self.damage_label = QLabel("")
        self.damage_label.setObjectName("recording-damage")
        self.damage_label.setWordWrap(True)
        self.damage_label.hide()
        self.rank = QComboBox()
        self.rank.setToolTip("Rank of a distributed recording")
        self.rank.activated.connect(self._on_rank)
        self.first_bad = QPushButton("No non-finite gradient")
        self.first_bad.setObjectName("first-nonfinite")
        self.first_bad.setEnabled(False)
        self.first_bad.clicked.connect(self.go_to_first_bad)
        self.image_choice = QComboBox()
        self.image_choice.setToolTip("Watched intermediate tensor (rec.tensor) to show")
        self.image_choice.currentIndexChanged.connect(self._show_image)
        self.health = HealthOverTime()
        self.health.cellClicked.connect(self.select_cell)
        self.health.cellAdded.connect(self.add_cell)
        self.selection_label = QLabel("")
        self.selection_label.setObjectName("tensor-selection")
        self.selection_label.setWordWrap(True)
        self.loss = StepLoss()
        self.loss.plot.setXLink(self.health.plot)
        self.histogram = TensorHistogram()
        self.origin = OriginPanel()
        self.entry_health = HealthMapView("per-entry health", legend_columns=3)
        self.entry_values = HeatmapView("values")
        self.timeline = Timeline()
        self.timeline.indexChanged.connect(self.show_index)
        self._layout()

    def _layout(self) -> None:
        top = QHBoxLayout()
        top.addWidget(self.path_label, 1)
        top.addWidget(QLabel("rank"))
        top.addWidget(self.rank)
        top.addWidget(self.first_bad)
        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(self.health)
        left.addWidget(self.loss)
        left.setSizes([560, 240])
        # The per-entry matrices of rec.tensor: hidden for a recording without any, where an
        # empty map's legend ("NaN 0") would sit beside NaN gradients it says nothing about.
        self.images_box = images = QWidget()
        box = QVBoxLayout(images)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.image_choice)
        box.addWidget(self.entry_health, 1)
        box.addWidget(self.entry_values, 1)
        self.entry_values.hide()
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.origin)
        detail = QWidget()
        box = QVBoxLayout(detail)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.selection_label)
        box.addWidget(self.histogram, 1)
        right.addWidget(detail)
        right.addWidget(images)
        body = QSplitter(Qt.Orientation.Horizontal)
        body.addWidget(left)
        body.addWidget(right)
        body.setStretchFactor(0, 3)
        body.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.damage_label)
        layout.addWidget(body, 1)
        layout.addWidget(self.timeline)

    # ---- feeding ----------------------------------------------------------------------------
    def set_data(self, data: RecordingData) -> None:
        """Show ``data`` (a new recording or a re-read one with more steps)."""
        if self.data is None or (self.data.path, self.data.rank) != (data.path, data.rank):
            # Another recording (or rank): no readout may still name the previous one's cell.
            self.health.readout.setText(READOUT_HINT)
        self.data = data
        self.path_label.setText(f"{data.path}  ({data.source}, {len(data.tensors)} tensors)")
        self.rank.clear()
        for r in data.ranks:
            self.rank.addItem(f"rank {r}", r)
        self.rank.setCurrentIndex(max(list(data.ranks).index(data.rank), 0))
        self.rank.setEnabled(len(data.ranks) > 1)
        self.health.set_data(
            data.tensors, data.steps, data.worst(), data.grad_norm, data.counts,
            data.missing_cells(),
        )  # fmt: skip
        notes = [line for line in (data.damage_line(), data.ranks_line()) if line]
        self.damage_label.setText("\n".join(notes))
        self.damage_label.setVisible(bool(notes))
        self.loss.set_data(data.steps, data.losses, data.loss_logged)
        self.loss.plot.getAxis("left").setWidth(self.health.left_width)  # step axes line up
        self._set_first_bad(data.first_nonfinite, data.first_not_known)
        names = sorted(data.images)
        if names != [self.image_choice.itemText(k) for k in range(self.image_choice.count())]:
            self.image_choice.clear()
            self.image_choice.addItems(names)
        self.images_box.setVisible(bool(names))
        kept = tuple(r for r in self.selected_rows if r < len(data.tensors))
        self.selected_rows = kept or (0,)
        self._show_selection()
        self.timeline.set_steps(data.steps)  # emits indexChanged: everything follows

    def _set_first_bad(self, first: dict | None, not_known: str = "") -> None:
        """The shown rank's first non-finite gradient (``first``); ``not_known``: why the
        recording names no first rank and step (another rank's records end before it)."""
        self.first_bad.setEnabled(first is not None)
        self.timeline.set_first_bad_step(None if first is None else int(first["step"]))
        self.origin.show_origin(None if first is None else first.get("origin"))
        text, tip = first_bad_words(first, not_known)
        self.first_bad.setText(text)
        self.first_bad.setToolTip(tip)

    def arrays(self) -> dict[str, np.ndarray]:
        """The page's arrays, for File > Export view data (empty before a recording)."""
        data = self.data
        if data is None:
            return {}
        return {
            "steps": data.steps,
            "losses": data.losses,
            "worst_health": data.worst(),  # MISSING_CODE (255) where lost
            "missing": data.missing_cells(),
            "grad_norm": data.grad_norm,
            "counts": data.counts,
            "histograms": data.histograms,
        }

    def readouts(self) -> dict:
        """The page as it reads: the header, the first non-finite button (the step it names,
        and its tooltip: why the recording names no origin, where it says), the damage
        line, the origin panel, the timeline, the health map's and the loss plot's cursors,
        the readout under the map and the histogram's counts line."""
        data = self.data
        first_text = self.first_bad.text()
        return {
            "path": None if data is None else data.path,
            "header": self.path_label.text(),
            "rank": self.rank.currentData(),
            "first_nonfinite": first_text,
            "first_nonfinite_step": step_in(first_text) if self.first_bad.isEnabled() else None,
            "first_nonfinite_why": self.first_bad.toolTip(),
            "damage": self.damage_label.text() if self.damage_label.isVisibleTo(self) else "",
            "origin": self.origin.values() if self.origin.isVisibleTo(self) else None,
            "timeline": self.timeline.readouts(),
            "health": self.health.readouts(),
            "loss": self.loss.readouts(),
            "histogram": self.histogram.title.text(),
        }

    # ---- selection --------------------------------------------------------------------------
    @Slot(int)
    def show_index(self, index: int) -> None:
        """Every part of the page shows the index-th recorded step."""
        data = self.data
        if data is None or not data.n_steps:
            return
        index = min(index, data.n_steps - 1)
        self.health.set_cursor(index)
        self.loss.set_cursor(index)
        self._show_histogram(index)
        self._show_image()

    @property
    def tensor_index(self) -> int:
        """The tensor whose histogram is shown: the first selected."""
        return self.selected_rows[0]

    @Slot(int, int)
    def select_cell(self, tensor: int, index: int) -> None:
        """Tensor ``tensor`` alone at the index-th recorded step: its histogram, and the
        timeline there."""
        self.selected_rows = (tensor,)
        self._show_selection()
        self.timeline.set_following(False)
        self.timeline.select_index(index)
        self._show_histogram(index)
        self.tensorsSelected.emit(self.selected_rows)

    @Slot(int, int, bool)
    def add_cell(self, tensor: int, index: int, span: bool) -> None:
        """Ctrl+click: ``tensor`` joins the selection (or leaves it); Shift+click (``span``):
        the rows from the first selected one to ``tensor``. The histogram stays on the first
        selected tensor, the timeline moves to the index-th step."""
        rows = set(self.selected_rows)
        if span:
            first = self.selected_rows[0]
            rows = set(range(min(first, tensor), max(first, tensor) + 1))
        elif tensor in rows and len(rows) > 1:
            rows.discard(tensor)
        else:
            rows.add(tensor)
        first = self.selected_rows[0] if self.selected_rows[0] in rows else min(rows)
        self.selected_rows = (first, *sorted(rows - {first}))
        self._show_selection()
        self.timeline.set_following(False)
        self.timeline.select_index(index)
        self._show_histogram(self.timeline.index)
        self.tensorsSelected.emit(self.selected_rows)

    def select_tensors(self, rows) -> None:
        """The tensors ``rows`` (the Graph page chose their node), at the step shown: outlined,
        the first one's histogram (no signal back)."""
        if self.data is None:
            return
        rows = tuple(int(r) for r in rows if 0 <= int(r) < len(self.data.tensors))
        if not rows:
            return
        self.selected_rows = rows
        self._show_selection()
        self._show_histogram(self.timeline.index)

    def selected_tensors(self) -> list[str]:
        """The names of the selected tensors, the one whose histogram is shown first."""
        if self.data is None:
            return []
        return [self.data.tensors[r] for r in self.selected_rows]

    def _show_selection(self) -> None:
        self.health.set_selection(self.selected_rows)
        names = self.selected_tensors()
        if len(names) <= 1:
            self.selection_label.setText("")
            self.selection_label.hide()
            return
        listed = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        self.selection_label.setText(
            f"{len(names)} tensors selected ({listed}); the histogram shows {names[0]}."
        )
        self.selection_label.show()

    @Slot()
    def go_to_first_bad(self) -> None:
        data = self.data
        if data is None or data.first_nonfinite is None:
            return
        first = data.first_nonfinite
        if first["tensor"] in data.tensors:
            self.selected_rows = (data.tensors.index(first["tensor"]),)
            self._show_selection()
        self.timeline.go_to_first_bad()
        self._show_histogram(self.timeline.index)
        self.tensorsSelected.emit(self.selected_rows)

    def _show_histogram(self, index: int) -> None:
        data = self.data
        if data is None or not data.tensors:
            return
        t = self.tensor_index
        self.histogram.set_histogram(self.health.describe(t, index), data.histograms[t, index])

    @Slot()
    def _show_image(self) -> None:
        data, name = self.data, self.image_choice.currentText()
        step = self.timeline.step
        found = None if data is None or not name or step is None else data.image_at(name, step)
        if found is None:
            self.entry_health.clear()
            self.entry_values.clear()
            return
        _, image = found
        codes = image.dtype == np.uint8  # health codes (rec.tensor); others are values
        self.entry_health.setVisible(codes)
        self.entry_values.setVisible(not codes)
        if codes:
            self.entry_health.set_codes(image)
        else:
            self.entry_values.set_matrix(np.asarray(image, dtype=np.float32))

    @Slot(int)
    def _on_rank(self, k: int) -> None:
        self.rankChosen.emit(int(self.rank.itemData(k)))


def first_bad_words(first: dict | None, not_known: str = "") -> tuple[str, str]:
    """The first non-finite button's text and tooltip for a rank's ``first_nonfinite``
    (``not_known``: why no first rank and step can be named)."""
    origin = None if first is None else first.get("origin")
    why = [] if first is None or not first.get("origin_unknown") else [first["origin_unknown"]]
    if not_known:
        why.append(f"Which rank went non-finite first is not known: {not_known}.")
    ranks = " · first rank not known" if not_known else ""
    on = " on this rank" if ranks else ""
    if first is None:
        return f"No non-finite gradient{on}{ranks}", "\n".join(why)
    text = f"First {first['kind']}{on}: step {first['step']}, {first['tensor']}[{first['index']}]"
    if origin is not None:
        where = f"module {origin['module']}" if origin.get("module") else unnamed_place(origin)
        text += f" · began in the {origin['phase']}, {where}"
    elif first.get("origin_unknown"):
        text += " · where it began is not known"
    return text + ranks, "\n".join(why)
