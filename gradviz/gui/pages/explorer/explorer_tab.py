"""The Jacobian explorer tab: settings on the left, the views on the right.

Public API (kept stable for the main window and the model loader)::

    tab = ExplorerTab()
    tab.failed.connect(window_error_dialog_slot)     # (sentence, details)
    tab.set_network(module, "net_x from run.safetensors", spec_or_None, in_dim, out_dim)
    tab.set_spec_text("2-20-20-4:sigmoid")          # as if typed
    tab.compute()                                    # recompute now (otherwise automatic)
    tab.shutdown()                                   # stop and join the worker (idempotent)

Every edit schedules a recompute (debounced; while the tab is hidden, deferred until it
is shown, so the worker thread starts only once the explorer is used). Each request gets a
new generation and the worker drops older ones, so the newest settings always win. While
computing, the views keep the last result and a busy bar runs; the tab stays responsive.
"""

from __future__ import annotations

import copy
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from gradviz.core.common.errors import GradvizError
from gradviz.core.explorer.jobs import ExplorerJob, ExplorerResult, SaliencyResult, parse_indices
from gradviz.core.nets.networks import NetworkSpec
from gradviz.gui.pages.explorer.explorer_jobs import (
    ExploredNetwork,
    network_job,
    read_inputs,
    spec_job,
)
from gradviz.gui.pages.explorer.explorer_worker import ExplorerThread
from gradviz.gui.pages.explorer.result_views import ResultViews, summary
from gradviz.gui.pages.explorer.settings import ExplorerSettings, show_message
from gradviz.gui.widgets.wheel import wheel_scrolls_past

#: Quiet time after an edit before recomputing (ms): typing a spec computes once at the end.
DEBOUNCE_MS = 300
SETTINGS_WIDTH = 365
FIX_SPEC_STATUS = "Fix the network spec to compute (see the message under it)."


class ExplorerTab(QWidget):
    """Per-input Jacobians of a network on a batch, in seven views.

    Signals: ``failed(sentence, details)`` when a computation fails (connect it to the
    app's error dialog); ``resultShown()`` after a new result is on screen; ``busyChanged``.
    """

    failed = Signal(str, str)
    resultShown = Signal()
    #: What is explored changed: the label of ``set_network``, or "typed spec".
    networkChanged = Signal(str)
    busyChanged = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.generation = 0
        self.result: ExplorerResult | SaliencyResult | None = None
        self.last_error: str = ""
        self._busy = False
        self._network: ExploredNetwork | None = None  # None: the typed spec is explored
        self._closed = False
        self._stale = False  # settings changed while hidden: recompute when shown

        self.settings = ExplorerSettings()
        self.view_tabs = ResultViews()
        self.views = self.view_tabs.views
        _build_layout(self)

        self._worker = ExplorerThread(self)
        self._worker.resultReady.connect(self._on_result)
        self._worker.failed.connect(self._on_failed)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self.compute)
        self.settings.changed.connect(self._on_settings_changed)
        self.settings.specEdited.connect(self._on_spec_edited)
        self.settings.spec_edit.textChanged.connect(self._on_spec_text_changed)
        self.settings.spec_edit.returnPressed.connect(self._on_spec_entered)
        self.settings.selectionChanged.connect(self._on_selection_changed)
        self.compute_button.clicked.connect(self.compute)
        app = QApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)
        self.settings.set_source("typed spec")
        self._schedule()

    # ---- public API --------------------------------------------------------------------
    def set_network(
        self,
        module: Any,
        label: str,
        spec: NetworkSpec | None,
        in_dim: int,
        out_dim: int,
        in_shape: tuple[int, ...] | None = None,
    ) -> None:
        """Explore ``module`` (a torch.nn.Module mapping (B, in_dim) to (B, out_dim), or
        (B, *in_shape) to (B, ...) where ``in_shape`` is given; in_dim = prod(in_shape)).

        The tab keeps its own deep copy, so the caller may go on training its module; call
        again to show newer weights. ``label`` names it (e.g. "coordinate network of the
        run", a file name); ``spec``, when known, is shown in the spec field. Typing a new
        spec afterwards switches the tab back to typed networks. Recomputes at once, or
        when the tab is next shown.
        """
        if in_dim < 1 or out_dim < 1:
            raise GradvizError(
                f"A network needs at least one input and output, not {in_dim}, {out_dim}."
            )
        in_shape = tuple(int(s) for s in in_shape) if in_shape else None
        # The previous network's result (and any job of it still in flight, whose failure
        # would name its inputs) no longer describes what is explored: drop it.
        self.generation += 1
        self.result = None
        self.last_error = ""
        self.view_tabs.setEnabled(False)
        self._show_status(f"Computing the Jacobians of {label}…")
        self._network = ExploredNetwork(
            copy.deepcopy(module), label, int(in_dim), int(out_dim), spec, in_shape
        )
        self.settings.set_sample_shape(in_shape)
        text = spec.to_text() or spec.to_json() if spec is not None else ""
        self.settings.spec_edit.blockSignals(True)
        self.settings.spec_edit.setText(text)
        self.settings.spec_edit.blockSignals(False)
        self.settings.show_outside_network(spec, label)
        show_message(
            self.settings.spec_message,
            f"{in_dim} inputs → {out_dim} outputs (from {label})",
            ok=True,
        )
        self.settings.set_source(label)
        self.networkChanged.emit(label)
        if self.isVisible():
            self.compute()
        else:
            self._schedule()

    def set_spec_text(self, text: str) -> None:
        """Type ``text`` into the spec field: the tab explores that spec (if it parses)."""
        self.settings.spec_edit.setText(text)
        self._on_spec_edited()

    def network_label(self) -> str:
        """What is being explored: the label given to set_network, or the typed spec."""
        if self._network is not None:
            return self._network.label
        spec = self.settings.spec
        return str(spec) if spec is not None else ""

    @property
    def busy(self) -> bool:
        return self._busy

    @property
    def pending(self) -> bool:
        """Whether a computation is on its way (scheduled, or in the worker's hands)."""
        return self._busy or self._timer.isActive() or (self._stale and not self.isVisible())

    def worker_running(self) -> bool:
        """Whether the worker thread is alive (False after shutdown)."""
        return self._worker.is_running()

    def hold_computations(self) -> Any:
        """Compute nothing until ``release_computations`` (Diagnose holds anomaly mode,
        which is process-wide). Returns the worker, whose ``idle`` event is set once no
        job is in flight; a job abandoned by the hold runs again on release."""
        return self._worker.hold()

    def release_computations(self) -> None:
        self._worker.release()

    @Slot()
    def compute(self) -> None:
        """Send the current settings to the worker now (a newer request wins)."""
        self._timer.stop()
        self._stale = False
        if self._closed:
            return
        job = self._make_job()
        if job is None:
            return
        self.generation += 1
        self._set_busy(True)
        self._worker.submit(self.generation, job)

    @Slot()
    def shutdown(self) -> None:
        """Stop the worker and wait for its thread; results still queued are dropped."""
        self._closed = True
        self._timer.stop()
        self._worker.shutdown()
        self._set_busy(False)

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt override
        self.shutdown()
        super().closeEvent(event)

    # ---- jobs --------------------------------------------------------------------------
    def _make_job(self) -> ExplorerJob | None:
        """The job for the current settings, or None (with the reason shown inline)."""
        network = self._network
        inputs = read_inputs(self.settings, network.in_shape if network else None)
        if inputs is None:
            return None
        if network is not None:
            return network_job(network, self.settings, inputs)
        spec = self.settings.spec
        if spec is None:
            self._show_status(FIX_SPEC_STATUS)
            return None
        return spec_job(spec, self.settings, inputs)

    def _schedule(self) -> None:
        """Recompute after the debounce; while the tab is hidden, once it is shown (so an
        app whose user never opens the explorer starts no thread for it)."""
        if self._closed:
            return
        if self.isVisible():
            self._timer.start()
        else:
            self._stale = True

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if self._stale and not self._closed:
            self._timer.start()

    def _set_busy(self, busy: bool) -> None:
        if busy != self._busy:
            self._busy = busy
            self.busy_bar.setVisible(busy)
            self.busyChanged.emit(busy)
        if busy:
            self._show_status(f"Computing the Jacobians of {self.network_label()}…", keep=True)

    # ---- results (GUI thread) ------------------------------------------------------------
    @Slot(int, object)
    def _on_result(self, generation: int, result: ExplorerResult | SaliencyResult) -> None:
        if generation != self.generation or self._closed:
            return  # stale: a newer request is on its way
        self.result = result
        self.last_error = ""
        self._set_busy(False)
        self._show_result()
        self.resultShown.emit()

    @Slot(int, str, str)
    def _on_failed(self, generation: int, sentence: str, details: str) -> None:
        if generation != self.generation or self._closed:
            return
        self.last_error = sentence
        self._set_busy(False)
        self._show_status(f'<span style="color:#E69F00">{sentence}</span>')
        self.failed.emit(sentence, details)

    def _show_result(self) -> None:
        result = self.result
        if result is None:
            return
        self.view_tabs.setEnabled(True)
        if isinstance(result, SaliencyResult):
            self.view_tabs.show_saliency(result)
            self._show_status(summary(result))
            return
        m, n = result.shape
        try:
            rows = parse_indices(self.settings.outputs_edit.text(), m, "output")
            cols = parse_indices(self.settings.inputs_edit.text(), n, "input")
            self.settings.show_selection_problem("")
        except GradvizError as exc:
            self.settings.show_selection_problem(f"{exc} Showing all.")
            rows, cols = list(range(m)), list(range(n))
        self.view_tabs.show_result(result, rows, cols, self.settings.loss())
        self._show_status(summary(result))

    def _show_status(self, text: str, keep: bool = False) -> None:
        if keep and self.result is not None:
            text = f"{summary(self.result)}<br><i>{text}</i>"
        self.status.setText(text)

    # ---- edits ---------------------------------------------------------------------------
    @Slot()
    def _on_settings_changed(self) -> None:
        self._schedule()

    @Slot()
    def _on_spec_edited(self) -> None:
        # The user typed a spec: explore it instead of a network set from outside.
        if self._network is not None:
            self._network = None
            self.settings.set_sample_shape(None)
            self.settings.set_source("typed spec")
            self.networkChanged.emit("typed spec")
        if self.settings.spec is not None:
            self._schedule()

    @Slot(str)
    def _on_spec_text_changed(self, _text: str) -> None:
        if self.settings.spec is None:
            self._timer.stop()  # nothing to compute until the spec parses
            self._show_status(FIX_SPEC_STATUS)
        elif self._network is None:
            self._schedule()  # the text parses now (the keystroke before may not have)

    @Slot()
    def _on_spec_entered(self) -> None:
        """Enter in the spec field: compute now, without waiting for the quiet time."""
        if self._network is None and self.settings.spec is not None:
            self.compute()

    @Slot()
    def _on_selection_changed(self) -> None:
        self._show_result()


def _build_layout(tab: ExplorerTab) -> None:
    """Settings in a scroll column on the left with Compute below; status, busy bar and
    views on the right."""
    scroll = QScrollArea()
    scroll.setWidgetResizable(True)
    scroll.setWidget(tab.settings)
    wheel_scrolls_past(
        *tab.settings.findChildren(QComboBox), *tab.settings.findChildren(QAbstractSpinBox)
    )
    scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    scroll.setFixedWidth(SETTINGS_WIDTH)
    tab.compute_button = QPushButton("Compute")
    tab.compute_button.setToolTip("Recompute now (edits recompute by themselves)")
    tab.busy_bar = QProgressBar()
    tab.busy_bar.setRange(0, 0)  # an indeterminate "working" bar
    tab.busy_bar.setMaximumHeight(10)
    tab.busy_bar.setTextVisible(False)
    tab.busy_bar.setVisible(False)
    tab.status = QLabel()
    tab.status.setObjectName("explorer-status")
    tab.status.setWordWrap(True)
    tab.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
    tab.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    left = QVBoxLayout()
    left.setContentsMargins(0, 0, 0, 0)
    left.addWidget(scroll, stretch=1)
    left.addWidget(tab.compute_button)
    right = QVBoxLayout()
    right.setContentsMargins(0, 0, 0, 0)
    right.setSpacing(2)
    right.addWidget(tab.status)
    right.addWidget(tab.busy_bar)
    right.addWidget(tab.view_tabs, stretch=1)
    layout = QHBoxLayout(tab)
    layout.setContentsMargins(4, 4, 4, 4)
    layout.addLayout(left)
    layout.addLayout(right, stretch=1)
