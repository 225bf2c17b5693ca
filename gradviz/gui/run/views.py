"""The lab's views: one interface, one registry.

Each view is a ``LabView``: a widget (``widget``) and two methods, ``show(snapshot)`` and
``clear()``. ``VIEWS`` lists them once as (key, title, factory, dock area); the main window
builds its docks from that table and ``LabViews`` feeds every view from it. Adding a view
is one class plus one line in ``VIEWS``.

Views are fed up to ~30 times a second and redraw only what changed. Views that are
hidden (a tabbed-away dock) draw their latest snapshot when shown.

Each view reports what it shows as data (``readouts()``, read back from its widget: the
counts in a legend, the points of a curve), and ``LabViews.readouts()`` adds the step and
run of the snapshot each visible view last drew, so a test can compare them with the source.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QEvent, QObject, Signal, Slot
from PySide6.QtWidgets import QWidget

from gradviz.core.common.health import HEALTH_LABELS
from gradviz.core.lab.snapshot import Snapshot
from gradviz.gui.run.worker import CellValues
from gradviz.gui.widgets.coord_grads import CoordGradsView
from gradviz.gui.widgets.healthmap import HealthMapView
from gradviz.gui.widgets.heatmap import HeatmapView
from gradviz.gui.widgets.jacobian_dock import JacobianView
from gradviz.gui.widgets.lazy import LazyWidget
from gradviz.gui.widgets.loss import LossView
from gradviz.gui.widgets.pair import PairView
from gradviz.gui.widgets.panel import MatrixPanel, RangeLink
from gradviz.gui.widgets.points import PointsView

Pair = tuple[int, int] | None


class LabView:
    """A view of a run: ``widget`` draws one aspect of the Snapshot given to ``show``.

    ``panel`` is set by the N x N matrix views (they share zoom, pan and the selected cell).
    """

    widget: QWidget
    panel: MatrixPanel | None = None

    def show(self, snapshot: Snapshot) -> None:
        raise NotImplementedError

    def clear(self) -> None:
        self.widget.clear()  # type: ignore[attr-defined]

    def select_pair(self, pair: Pair, snapshot: Snapshot | None) -> None:
        """The user selected entry (i, j) (None: no selection)."""
        if self.panel is not None:
            self.panel.set_marker(*(pair or (None, None)))

    def show_cell_values(self, cell: CellValues) -> None:
        """The exact values of one entry of the snapshot on screen arrived (display-sized
        snapshots only)."""

    def readouts(self) -> dict:
        """What the widget shows, read back from it (plain values)."""
        return {}


def legend_counts(view: HealthMapView) -> dict[str, int]:
    """A health map's legend as {label: count}, as it reads."""
    return {HEALTH_LABELS[h]: n for h, n in view.counts().items()}


def full_extent(snapshot: Snapshot) -> tuple[int, int]:
    """The (N, N) of the full matrices behind a snapshot's (maybe display-sized) ones."""
    return snapshot.n_points, snapshot.n_points


class MatrixView(LabView):
    """An (N, N) matrix field of the snapshot as a heatmap (display-sized: its block)."""

    def __init__(self, field: str, label: str, diverging: bool = False) -> None:
        self.field = field
        self.widget = self.panel = HeatmapView(label, diverging=diverging)

    def show(self, snapshot: Snapshot) -> None:
        self.widget.set_matrix(
            getattr(snapshot, self.field), snapshot.display_block, full_extent(snapshot)
        )

    def show_cell_values(self, cell: CellValues) -> None:
        value = None if cell.values is None else cell.values.get(self.field)
        self.widget.show_exact(cell.i, cell.j, value)

    def readouts(self) -> dict:
        return {"extent": list(self.widget.extent), "nonfinite": self.widget.nonfinite_label.text()}


class TargetView(MatrixView):
    """The target matrix, redrawn only when the target changes (rarely)."""

    def __init__(self) -> None:
        super().__init__("target_distances", "d_target")
        self._target: np.ndarray | None = None

    def show(self, snapshot: Snapshot) -> None:
        target = snapshot.target_distances
        if self._target is not None and (
            target is self._target
            or (target.shape == self._target.shape and np.array_equal(target, self._target))
        ):
            return
        self._target = target
        self.widget.set_matrix(target, snapshot.display_block, full_extent(snapshot))

    def clear(self) -> None:
        self._target = None
        super().clear()


class HealthView(LabView):
    """The health code of every entry gradient, with the values in the readout."""

    def __init__(self) -> None:
        self.widget = self.panel = HealthMapView("dLoss/d entry", legend_columns=3)

    def show(self, snapshot: Snapshot) -> None:
        self.widget.set_codes(
            snapshot.entry_health,
            snapshot.entry_grads,
            snapshot.display_block,
            full_extent(snapshot),
            snapshot.entry_health_counts,
        )

    def show_cell_values(self, cell: CellValues) -> None:
        values = cell.values or {}
        self.widget.show_exact(
            cell.i, cell.j, values.get("entry_health"), values.get("entry_grads")
        )

    def readouts(self) -> dict:
        return {"extent": list(self.widget.extent), "legend": legend_counts(self.widget)}


class CoordGradientsView(LabView):
    def __init__(self) -> None:
        self.widget = CoordGradsView()

    def show(self, snapshot: Snapshot) -> None:
        self.widget.set_grads(snapshot.coord_grads, snapshot.coord_health)

    def readouts(self) -> dict:
        recorded = self.widget.recorded
        legend = legend_counts(self.widget.health) if recorded else None
        return {"recorded": recorded, "legend": legend, "note": self.widget.note_text()}


class LossCurveView(LabView):
    def __init__(self) -> None:
        self.widget = LossView()

    def show(self, snapshot: Snapshot) -> None:
        self.widget.set_history(
            snapshot.loss_history, snapshot.reference_loss, snapshot.history_steps
        )

    def readouts(self) -> dict:
        history = self.widget.history
        last = float(history[-1]) if len(history) else None
        steps = self.widget.steps
        return {
            "losses": len(history),  # one per step kept: every step, or a long run's kept ones
            "last_step": int(steps[-1]) if len(steps) else None,
            "last_loss": last,
            "nonfinite_steps": [int(k) for k in self.widget.nonfinite_steps()[:20]],
            "earlier_runs": self.widget.earlier.readouts(),  # faint, newest first
        }


class PointsLabView(LabView):
    def __init__(self) -> None:
        self.widget = PointsView()

    def show(self, snapshot: Snapshot) -> None:
        self.widget.set_points(snapshot.coords, snapshot.target_coords)

    def select_pair(self, pair: Pair, snapshot: Snapshot | None) -> None:
        self.widget.set_pair(*(pair or (None, None)))

    def readouts(self) -> dict:
        points = self.widget.aligned_points()
        return {"points": 0 if points is None else int(points.shape[0])}


class SelectedPairView(LabView):
    """The numbers of the selected entry (i, j)."""

    def __init__(self) -> None:
        self.widget = PairView()
        self._pair: Pair = None

    def show(self, snapshot: Snapshot) -> None:
        if self._pair is not None:
            self.widget.show_pair(snapshot, *self._pair)

    def select_pair(self, pair: Pair, snapshot: Snapshot | None) -> None:
        self._pair = pair
        if pair is None or snapshot is None:
            self.widget.clear()
        else:
            self.widget.show_pair(snapshot, *pair)

    def show_cell_values(self, cell: CellValues) -> None:
        if cell.values is not None:
            self.widget.show_exact(cell.i, cell.j, cell.values)

    def readouts(self) -> dict:
        pair = self.widget.pair
        text = self.widget.field_text("pair")
        return {"pair": None if pair is None else list(pair), "text": text}


class LazyView(LabView):
    """A view made when its dock is first painted, or asked for ``view`` (``LazyWidget``):
    for views whose docks are tabbed away at start-up and most sessions never open (the
    per-point Jacobians' two plots were a tenth of building the window). The newest
    snapshot and the pair given meanwhile are drawn when it is made, so it never shows
    less than a view made at once would."""

    def __init__(self, factory: Callable[[], LabView]) -> None:
        self._factory = factory
        self._view: LabView | None = None
        self._pending: Snapshot | None = None
        self._pair: Pair = None
        self._pair_snapshot: Snapshot | None = None
        self.widget = LazyWidget(self._make)

    def _make(self) -> QWidget:
        view = self._view = self._factory()
        if self._pending is not None:
            view.show(self._pending)
        if self._pair is not None:
            view.select_pair(self._pair, self._pair_snapshot)
        self._pending = None
        return view.widget

    @property
    def built(self) -> bool:
        return self.widget.is_built

    @property
    def view(self) -> LabView:
        self.widget.content  # noqa: B018 - makes the view on first use
        return self._view

    def show(self, snapshot: Snapshot) -> None:
        if self._view is None:
            self._pending = snapshot  # drawn when made
        else:
            self._view.show(snapshot)

    def clear(self) -> None:
        self._pending = self._pair = self._pair_snapshot = None
        if self._view is not None:
            self._view.clear()

    def select_pair(self, pair: Pair, snapshot: Snapshot | None) -> None:
        self._pair, self._pair_snapshot = pair, snapshot
        if self._view is not None:
            self._view.select_pair(pair, snapshot)

    def show_cell_values(self, cell: CellValues) -> None:
        if self._view is not None:
            self._view.show_cell_values(cell)

    def readouts(self) -> dict:
        return self.view.readouts()


class JacobiansView(LabView):
    def __init__(self) -> None:
        self.widget = JacobianView()

    def show(self, snapshot: Snapshot) -> None:
        self.widget.set_jacobians(snapshot.jacobians)

    def select_pair(self, pair: Pair, snapshot: Snapshot | None) -> None:
        if pair is not None:
            self.widget.select_point(pair[0])

    def readouts(self) -> dict:
        jacobians = self.widget.jacobians
        return {"shape": None if jacobians is None else list(jacobians.shape)}


class DockArea(enum.Enum):
    """Where a view's dock goes: the top or bottom row beside the setup, or the left column."""

    TOP = "top"
    BOTTOM = "bottom"
    LEFT = "left"


@dataclasses.dataclass(frozen=True)
class ViewEntry:
    """One line of the registry. ``tab_with``: the key whose dock this one is tabbed behind.
    ``share``: the view's share of its row's width."""

    key: str
    title: str
    factory: Callable[[], LabView]
    area: DockArea
    tab_with: str | None = None
    share: float = 1.0


#: Every lab view, in dock order within each area.
VIEWS: tuple[ViewEntry, ...] = (
    ViewEntry(
        "distances",
        "Predicted distances",
        lambda: MatrixView("distances", "d_pred"),
        DockArea.TOP,
    ),  # fmt: skip
    ViewEntry("target", "Target distances", TargetView, DockArea.TOP, tab_with="distances"),
    ViewEntry(
        "error",
        "Error (predicted - target)",
        lambda: MatrixView("error", "d_pred - d_target", diverging=True),
        DockArea.TOP,
    ),  # fmt: skip
    ViewEntry("mask", "Gradient health", HealthView, DockArea.TOP),
    ViewEntry("loss", "Loss", LossCurveView, DockArea.BOTTOM, share=0.9),
    ViewEntry("points", "Points: predicted vs target", PointsLabView, DockArea.BOTTOM),
    ViewEntry(
        "coord_grads", "Coordinate gradients", CoordGradientsView, DockArea.BOTTOM, share=1.1
    ),
    ViewEntry(
        "jacobians",
        "Per-point Jacobians",
        lambda: LazyView(JacobiansView),
        DockArea.BOTTOM,
        tab_with="loss",
    ),  # fmt: skip
    ViewEntry("pair", "Selected pair", SelectedPairView, DockArea.LEFT),
)

TITLES: dict[str, str] = {entry.key: entry.title for entry in VIEWS}


class LabViews(QObject):
    """Every view of ``VIEWS``, fed one snapshot at a time, and the pair they share.

    Clicking a cell of any matrix selects the pair (i, j): every view hears of it
    (``LabView.select_pair``) and ``pairSelected(i, j)`` is emitted. Zoom and pan are shared
    by the N x N matrices.
    """

    pairSelected = Signal(int, int)
    #: Exact values of full-resolution entry (i, j) of the snapshot on screen are wanted
    #: (hovered or selected in a display-sized snapshot); answered by show_cell_values.
    cellWanted = Signal(int, int)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.views: dict[str, LabView] = {entry.key: entry.factory() for entry in VIEWS}
        self.widgets: dict[str, QWidget] = {k: v.widget for k, v in self.views.items()}
        self.titles = dict(TITLES)
        self._range_link = RangeLink(self.matrix_panels(), self)
        for panel in self.matrix_panels():
            panel.cellClicked.connect(self._on_cell_clicked)
            panel.cellHovered.connect(self._on_cell_hovered)
        self._snapshot: Snapshot | None = None
        self._generation: int | None = None
        self._pair: Pair = None
        self._stale: set[str] = set()  # views that skipped snapshots while hidden
        self._drawn: dict[str, Snapshot] = {}  # the snapshot each view last drew
        for widget in self.widgets.values():
            widget.installEventFilter(self)

    def matrix_panels(self) -> list[MatrixPanel]:
        """The N x N panels, which share zoom, pan and the selected cell."""
        return [v.panel for v in self.views.values() if v.panel is not None]

    @property
    def snapshot(self) -> Snapshot | None:
        """The snapshot on screen."""
        return self._snapshot

    @property
    def selected_pair(self) -> Pair:
        return self._pair

    @Slot(object)
    def show(self, snapshot: Snapshot) -> None:
        """Draw ``snapshot`` in every visible view (cheap: unchanged parts are not redrawn).

        A snapshot of another run starts every view over; hidden views (a closed or
        tabbed-away dock) are brought up to date when shown.
        """
        if snapshot.generation != self._generation:
            if self._generation is not None:
                self.clear()
            self._generation = snapshot.generation
        self._snapshot = snapshot
        if self._pair is not None and max(self._pair) >= snapshot.n_points:
            self._set_pair(None)  # a smaller point set: the pair is gone
        for key, view in self.views.items():
            if view.widget.isVisible():
                self._stale.discard(key)
                view.show(snapshot)
                self._drawn[key] = snapshot
            else:
                self._stale.add(key)
        if self._pair is not None and snapshot.display_block > 1:
            self.cellWanted.emit(*self._pair)  # the selected pair's exact values of this step

    @Slot(object)
    def show_cell_values(self, cell: CellValues) -> None:
        """Exact values of one entry arrived; shown if they belong to the snapshot on
        screen (same run, same step)."""
        snapshot = self._snapshot
        if snapshot is None or (cell.generation, cell.step) != (snapshot.generation, snapshot.step):
            return
        for view in self.views.values():
            view.show_cell_values(cell)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.Show and self._snapshot is not None:
            for key, view in self.views.items():
                if view.widget is watched and key in self._stale:
                    self._stale.discard(key)
                    view.show(self._snapshot)
                    self._drawn[key] = self._snapshot
        return False

    @Slot()
    def clear(self) -> None:
        """Forget the snapshot on screen and empty every view."""
        self._snapshot = None
        self._generation = None
        self._stale.clear()
        self._drawn.clear()
        self._set_pair(None)
        for view in self.views.values():
            view.clear()

    def readouts(self) -> dict[str, dict]:
        """Each visible view's readouts, with the step and run (generation) of the snapshot
        it last drew: ``{"loss": {"step": 12, "generation": 3, "losses": 12, ...}, ...}``."""
        out = {}
        for key, view in self.views.items():
            if not view.widget.isVisible():
                continue
            drawn = self._drawn.get(key)
            where = {"step": None, "generation": None}
            if drawn is not None:
                where = {"step": drawn.step, "generation": drawn.generation}
            out[key] = {**where, **view.readouts()}
        return out

    def select_pair(self, i: int, j: int) -> None:
        """Select entry (i, j), as a click on that cell does, and emit ``pairSelected``."""
        self._set_pair((i, j))
        self.pairSelected.emit(i, j)

    @Slot(int, int)
    def _on_cell_clicked(self, i: int, j: int) -> None:
        self.select_pair(i, j)

    @Slot(int, int)
    def _on_cell_hovered(self, i: int, j: int) -> None:
        if self._snapshot is not None and self._snapshot.display_block > 1:
            self.cellWanted.emit(i, j)

    def _set_pair(self, pair: Pair) -> None:
        self._pair = pair
        for view in self.views.values():
            view.select_pair(pair, self._snapshot)
        if pair is not None and self._snapshot is not None and self._snapshot.display_block > 1:
            self.cellWanted.emit(*pair)
