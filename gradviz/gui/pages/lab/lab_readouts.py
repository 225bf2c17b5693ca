"""The readouts of the lab's page: its views, the status bar, the timeline, the setup panel.

The lab is the window's docks rather than one widget, so the lab's page object answers
``readouts()`` with this: ``window_readouts`` asks it as it asks any other page.
"""

from __future__ import annotations

from PySide6.QtWidgets import QDockWidget

from gradviz.gui.run.status import RunStatus
from gradviz.gui.run.views import LabViews
from gradviz.gui.widgets.settings_form import SetupForm
from gradviz.gui.widgets.timeline import Timeline


class LabPageReadouts:
    """``readouts()``: ``{"views": {...}, "status": {...}, "timeline": {...} or None,
    "setup": {...}}``, each read from its widget (the timeline only while its dock shows;
    ``timeline`` and ``timeline_dock`` are set where the lab has one)."""

    def __init__(self, views: LabViews, status: RunStatus, form: SetupForm) -> None:
        self.views, self.status, self.form = views, status, form
        self.timeline: Timeline | None = None
        self.timeline_dock: QDockWidget | None = None

    def readouts(self) -> dict:
        dock = self.timeline_dock
        shows_timeline = self.timeline is not None and dock is not None and dock.isVisible()
        return {
            "views": self.views.readouts(),
            "status": self.status.readouts(),
            "timeline": self.timeline.readouts() if shows_timeline else None,
            "setup": self.form.readouts(),
        }
