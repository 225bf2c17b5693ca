"""The readouts of the lab's page: its views, the status bar, the timeline, the setup panel.

The lab is the window's docks rather than one widget, so this small object stands for it
among the pages (``WorkspacePages.lab_page``): ``window_readouts`` asks it as it asks any
other page.
"""

from __future__ import annotations

from PySide6.QtWidgets import QDockWidget

from gradviz.gui.pages.lab.status import RunStatus
from gradviz.gui.pages.lab.views import LabViews
from gradviz.gui.pages.recordings.timeline import Timeline
from gradviz.gui.widgets.settings_form import SetupForm


class LabPageReadouts:
    """``readouts()``: ``{"views": {...}, "status": {...}, "timeline": {...} or None,
    "setup": {...}}``, each read from its widget (the timeline only while its dock shows)."""

    def __init__(
        self,
        views: LabViews,
        status: RunStatus,
        form: SetupForm,
        timeline: Timeline,
        timeline_dock: QDockWidget,
    ) -> None:
        self.views, self.status, self.form = views, status, form
        self.timeline, self.timeline_dock = timeline, timeline_dock

    def readouts(self) -> dict:
        shows_timeline = self.timeline_dock.isVisible()
        return {
            "views": self.views.readouts(),
            "status": self.status.readouts(),
            "timeline": self.timeline.readouts() if shows_timeline else None,
            "setup": self.form.readouts(),
        }
