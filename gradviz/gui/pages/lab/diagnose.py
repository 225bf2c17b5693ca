""" "Why NaN here?" and Diagnose: the pinned first-NaN snapshot explained, and its step
re-run under gradviz's non-finite tracer to name the operation, module, source line,
entries and cause of the first NaN or Inf.

The explanation is built from the snapshot's own arrays (``core.explain``), instantly, on
the GUI thread. Diagnose replays the seeded run to its first non-finite step and re-runs
that step under the tracer (``core.anomaly.diagnose_first_nonfinite``) off the GUI thread
(``diagnose_when_others_idle`` through ``gui.background``). The tracer follows its own
thread only, but its module hooks are global and the replay competes for the CPU, so the
app still pauses every other run first and the task waits until each one sits idle
(``FitWorker.idle``) before it starts; the runs that were going resume after.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np
from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from gradviz.core.common.health import Health
from gradviz.core.lab.explain import Explanation, explain_first_nan
from gradviz.core.lab.snapshot import Snapshot
from gradviz.core.settings.config import FitConfig

log = logging.getLogger(__name__)

#: How long Diagnose waits for the other runs to finish the step in flight (seconds).
IDLE_TIMEOUT_S = 60.0


def diagnose_when_others_idle(
    config: FitConfig, others: Sequence[object], should_stop: Callable[[], bool]
) -> object:
    """Replay ``config`` to its first non-finite step and diagnose that step (run it off
    the GUI thread, through ``gui.background``).

    ``others`` are the run workers paused for the diagnosis; the work starts only when each
    one's ``idle`` event is set. Returns the AnomalyReport, or None when stopped meanwhile.
    """
    if not _wait_for_others(others, should_stop):
        return None
    from gradviz.core.lab.anomaly import diagnose_first_nonfinite

    return diagnose_first_nonfinite(config, should_stop=should_stop)


def _wait_for_others(others: Sequence[object], should_stop: Callable[[], bool]) -> bool:
    """True once every paused run is idle; False when stopped meanwhile."""
    for worker in others:
        waited = 0.0
        while not worker.idle.wait(0.05):
            waited += 0.05
            if should_stop():
                return False
            if waited > IDLE_TIMEOUT_S:
                raise TimeoutError("another run did not pause within a minute")
    return not should_stop()


def report_text(report) -> str:
    """The AnomalyReport's origin as readable text: where, which entries, why, and how it
    spread."""
    # Here, not at the top: the origin package imports torch, and this module loads before
    # the window does.
    from gradviz.core.origin.result import place_words

    o = report.origin
    if o is None:
        return "No operation made a NaN or Inf in this step.\n"
    lines = []
    if report.backward is not None:
        lines.append(f"Backward: {report.backward.operation} made {o.kind} in {o.op}")
        lines.append("  its forward call:")
        lines += [f"    {frame}" for frame in report.backward.frames] or ["    (not seen)"]
    if report.forward is not None:
        lines.append(f"{o.phase.capitalize()}: {o.op} made the first non-finite value")
        lines.append("  called from:")
        lines += [f"    {frame}" for frame in report.forward.frames] or ["    (not seen)"]
    lines.append(f"  module: {o.module or '(none) ' + place_words('', o.in_model)}")
    shown = ", ".join(str(i) for i in o.indices)
    lines.append(f"  entries: {o.count:,} of {o.numel:,} ({o.dtype}); first {shown}")
    lines += ["", "Cause: " + o.cause]
    if o.events:
        lines += ["", "Then:"]
        for e in o.events:
            node = f" ({e.node})" if e.node else ""
            lines.append(f"  {e.phase} {e.op}{node}: {e.count:,} {e.kind}")
    return "\n".join(lines).rstrip() + "\n"


class WhyNanPanel(QDialog):
    """Explains the pinned first-NaN snapshot; Diagnose names the failing operation.

    Non-modal (``show()``): the lab stays usable beside it. ``select_pair(i, j)`` is called
    when the user picks an example; ``diagnose_requested`` asks the app to start Diagnose
    (the app owns the worker, because it must pause the other runs).
    """

    diagnoseRequested = Signal()

    def __init__(
        self, select_pair: Callable[[int, int], None], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Why NaN here?")
        self.setObjectName("gradviz-why-nan")
        self.resize(760, 640)
        self.select_pair = select_pair
        self.explanation: Explanation | None = None
        self.report = None
        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)

        self.heading = QLabel("")
        self.heading.setStyleSheet("font-size: 14px; font-weight: bold;")
        self.text = QLabel("")
        self.text.setObjectName("why-nan-text")
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.counts = QLabel("")
        self.counts.setStyleSheet("color: #444;")
        self.counts.setWordWrap(True)
        self.examples = QListWidget()
        self.examples.setMaximumHeight(96)
        self.examples.setToolTip("Click to select the entry in the lab's matrices")
        self.diagnose_button = QPushButton("Diagnose (re-run the step under the NaN tracer)")
        self.diagnose_status = QLabel("")
        self.diagnose_status.setWordWrap(True)
        self.diagnose_summary = QLabel("")
        self.diagnose_summary.setObjectName("why-nan-diagnosis")
        self.diagnose_summary.setWordWrap(True)
        self.diagnose_summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.trace = QPlainTextEdit()
        self.trace.setObjectName("why-nan-trace")
        self.trace.setReadOnly(True)
        self.trace.setFont(mono)
        self.trace.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.trace.setPlaceholderText(
            "Diagnose replays the run to its first non-finite step and re-runs that step "
            "under gradviz's NaN tracer: the operation that made the first NaN or Inf, its "
            "forward call, module, entries and cause appear here. Other runs pause meanwhile."
        )
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)

        layout = QVBoxLayout(self)
        layout.addWidget(self.heading)
        layout.addWidget(self.text)
        layout.addWidget(self.counts)
        layout.addWidget(QLabel("Where (click to highlight):"))
        layout.addWidget(self.examples)
        row = QHBoxLayout()
        row.addWidget(self.diagnose_button)
        row.addWidget(self.diagnose_status, stretch=1)
        layout.addLayout(row)
        layout.addWidget(self.diagnose_summary)
        layout.addWidget(self.trace, stretch=1)
        layout.addWidget(buttons)
        self.examples.itemClicked.connect(self._on_example_clicked)
        self.diagnose_button.clicked.connect(self.diagnoseRequested)

    def show_snapshot(self, snapshot: Snapshot) -> Explanation:
        """Explain ``snapshot`` (the pinned first-NaN one) and list where it happened."""
        e = explain_first_nan(snapshot)
        self.explanation = e
        self.heading.setText(f"Why NaN here?  step {e.step} · method {e.method}")
        self.text.setText(e.text)
        shown = ", ".join(f"{n:,} {label}" for label, n in e.entry_counts.items() if n)
        self.counts.setText(
            f"Gradient health of the {snapshot.n_points} x {snapshot.n_points} entries: {shown}. "
            f"Non-finite coordinate gradients: {e.nonfinite_coord_grads:,}."
        )
        self.examples.clear()
        under = snapshot.squared if snapshot.squared is not None else snapshot.distances
        if e.diagonal_zero:
            bad = np.flatnonzero(np.diag(snapshot.entry_health) >= Health.NEG_INF)
            first = int(bad[0]) if len(bad) else 0
            self._add_example(
                f"the diagonal: {e.diagonal_zero} entries (i, i) with squared distance 0",
                first,
                first,
            )
        for i, j in e.example_pairs:
            self._add_example(f"pair ({i}, {j}): squared distance {under[i, j]:.3g}", i, j)
        if self.examples.count():
            item = self.examples.item(0)
            self.examples.setCurrentItem(item)
            self._on_example_clicked(item)
        self.diagnose_button.setEnabled(e.has_nonfinite)
        return e

    def _add_example(self, text: str, i: int, j: int) -> None:
        item = QListWidgetItem(text)
        item.setData(Qt.ItemDataRole.UserRole, (i, j))
        self.examples.addItem(item)

    @Slot(QListWidgetItem)
    def _on_example_clicked(self, item: QListWidgetItem) -> None:
        i, j = item.data(Qt.ItemDataRole.UserRole)
        self.select_pair(int(i), int(j))

    # ---- diagnose ----------------------------------------------------------------------------
    def set_diagnosing(self, paused: int) -> None:
        self.diagnose_button.setEnabled(False)
        self.report = None
        self.trace.setPlainText("")
        self.diagnose_summary.setText("")
        others = f"; {paused} other run(s) paused" if paused else ""
        self.diagnose_status.setText(f"Diagnosing… (replaying the run{others})")

    def show_report(self, report) -> None:
        self.report = report
        self.diagnose_button.setEnabled(True)
        if report is None:
            self.diagnose_status.setText("Diagnose was cancelled.")
            return
        trace = report.backward or report.forward
        name = trace.operation if trace is not None else None
        self.diagnose_status.setText(
            f"Failing operation: <b>{name}</b>" if name else "No operation made a NaN or Inf."
        )
        self.diagnose_summary.setText(report.summary)
        self.trace.setPlainText(report_text(report))

    def show_failure(self, sentence: str) -> None:
        self.diagnose_button.setEnabled(True)
        self.diagnose_status.setText(f"Diagnose failed: {sentence}")
