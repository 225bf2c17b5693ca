"""The setup panel's network diagram follows the picture on screen: each layer's gradient of
the snapshot shown (a live step, the pinned first NaN, an older step chosen on the timeline,
a recorded step), drawn where that run's network is the one in the editor. A click on a
layer opens its weights and gradients as heatmaps (LayerMatrixView), which follow the same
picture by the same rule: drawn where the diagram draws that picture's gradients."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Slot
from PySide6.QtGui import QGuiApplication

from gradviz.core.lab.snapshot import Snapshot
from gradviz.core.nets.layer_matrix import layer_matrix
from gradviz.core.settings.config import FitConfig
from gradviz.gui.run.session import RunSession
from gradviz.gui.widgets.form_network import gradient_step_words
from gradviz.gui.widgets.layer_matrix_view import LayerMatrixView
from gradviz.gui.widgets.settings_form import SetupForm


class NetworkGradients(QObject):
    """Feeds ``form``'s network editors the gradients of ``session``'s snapshot on screen.

    ``config_of(snapshot)`` names the settings of a snapshot of an earlier run of the lab
    (the last good frame put back after a new run failed), None where not known.
    """

    def __init__(
        self,
        session: RunSession,
        form: SetupForm,
        parent: QObject | None = None,
        config_of: Callable[[Snapshot], FitConfig | None] = lambda _snapshot: None,
    ):
        super().__init__(parent)
        self.session, self.form, self.config_of = session, form, config_of
        self.layer_view: LayerMatrixView | None = None  # made at the first click on a layer
        session.snapshotShown.connect(self._on_shown)
        session.cleared.connect(self._on_cleared)
        form.changed.connect(self._on_form_changed)
        form.network_editor().layerClicked.connect(self.open_layer)

    @Slot(object)
    def _on_shown(self, snapshot) -> None:
        session = self.session
        own = snapshot.generation == session.generation and session.config is not None
        # A snapshot of another source (a recording) names no run of the lab's.
        config = session.config if own else self.config_of(snapshot)
        run_net = config.net if config is not None else None
        self.form.show_network_gradients(snapshot, run_net)
        self._show_layer(snapshot)

    @Slot()
    def _on_cleared(self) -> None:
        self.form.show_network_gradients(None, None)
        self._show_layer(None)

    @Slot(int)
    def open_layer(self, layer: int) -> None:
        """Show Linear layer ``layer``'s matrices in their window (made at the first call)."""
        if self.layer_view is None:
            self.layer_view = LayerMatrixView(self.form.window())
        self.layer_view.layer = layer
        self.layer_view.show()
        if QGuiApplication.platformName() != "offscreen":  # it warns that it cannot raise
            self.layer_view.raise_()
        self._show_layer(self.session.shown)

    def _show_layer(self, snapshot: Snapshot | None) -> None:
        """The open layer window follows the picture on screen, as the diagram does."""
        view = self.layer_view
        if view is None or view.layer is None or not view.isVisible():
            return
        editor = self.form.network_editor()
        if snapshot is None or editor.gradients is None or editor.spec is None:
            view.show_layer(view.layer, None, editor.gradient_note)
            return
        if view.layer >= len(editor.gradients):
            view.show_layer(view.layer, None, "the network in the editor has no such layer now.")
            return
        matrix = layer_matrix(editor.spec, snapshot.param_values, view.layer)
        if matrix is None:
            words = "this picture holds no parameter values (a recording, or another network)"
            view.show_layer(view.layer, None, words)
            return
        view.show_layer(view.layer, matrix, gradient_step_words(snapshot))

    @Slot(str)
    def _on_form_changed(self, _name: str) -> None:
        """The editor may show another network now: redraw against the picture shown."""
        shown = self.session.shown
        if shown is None:
            self._on_cleared()
        else:
            self._on_shown(shown)
