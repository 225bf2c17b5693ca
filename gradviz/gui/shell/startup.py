"""Start-up as a user sees it: the window painted, step 0's frame drawn, Start enabled.

``StartupWatch`` starts the torch import only once the window has painted (an import in
the background holds the GIL for long stretches, which would leave the window black), and
with ``GRADVIZ_STARTUP_REPORT`` set prints each moment as it happens (``window-painted``,
``frame-drawn``, ``start-enabled``) and quits after the last: ``gradviz bench --suite gui``
times the lines as they arrive.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QWidget

from gradviz.gui.run.session import RunSession

#: Start the import this long after showing the window even if no paint was seen (ms). Long
#: enough for a busy machine's first paint: torch's import holds the GIL for whole seconds
#: (its extension's initialisation), and a window that has not painted by then stays black
#: until it ends (seen at a load average of 6: shown, import started 0.5 s later, painted
#: only as the import let go).
_LOAD_ANYWAY_MS = 3000


class StartupWatch(QObject):
    """Watches ``window``'s first paint, ``session``'s first frame and ``start``'s enabling;
    calls ``start_loading`` after the first paint."""

    def __init__(
        self,
        window: QWidget,
        session: RunSession,
        start: QAction,
        start_loading: Callable[[], None],
    ) -> None:
        super().__init__(window)
        self.window = window
        self.start = start
        self.start_loading = start_loading
        self.report = bool(os.environ.get("GRADVIZ_STARTUP_REPORT"))
        self.seen: list[str] = []
        self._loading = False
        QApplication.instance().installEventFilter(self)
        # Only the first frame is of interest: not a slot call per frame for the app's life.
        session.snapshotShown.connect(self._on_first_frame, Qt.ConnectionType.SingleShotConnection)
        start.changed.connect(self._on_start_changed)
        QTimer.singleShot(_LOAD_ANYWAY_MS, self._load)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if (
            event.type() == QEvent.Type.Paint
            and isinstance(watched, QWidget)
            and watched.window() is self.window
        ):
            QApplication.instance().removeEventFilter(self)
            QTimer.singleShot(0, self._on_painted)  # after this paint has finished
        return False

    @Slot()
    def _on_painted(self) -> None:
        self._mark("window-painted")
        QTimer.singleShot(20, self._load)  # let the rest of the first paints through

    @Slot()
    def _load(self) -> None:
        if not self._loading:
            self._loading = True
            self.start_loading()

    @Slot(object)
    def _on_first_frame(self, _snapshot: object) -> None:
        QTimer.singleShot(0, lambda: self._mark("frame-drawn"))  # once the views painted

    @Slot()
    def _on_start_changed(self) -> None:
        if self.start.isEnabled():
            self._mark("start-enabled")

    def _mark(self, moment: str) -> None:
        if moment in self.seen:
            return
        self.seen.append(moment)
        if self.report:
            print(moment, flush=True)
            if len(self.seen) == 3:
                QApplication.instance().quit()
