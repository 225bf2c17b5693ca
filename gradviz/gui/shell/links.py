"""What passes between pages, connected here once every page is made (pages never import
one another: each offers signals and small hooks, and the shell joins them).

- Lab and recordings: a lab recording plays in the lab's views with the recordings'
  timeline under them; the lab's setup panel describes the recording in focus (its
  settings), the lab's readouts include the timeline, and Back to live view follows the
  timeline's newest step.
- Lab and Jacobian explorer: Run > Explore the run's network shows a copy of the run's
  network in the explorer; Diagnose holds the explorer's computations while it replays.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QMainWindow

from gradviz.gui.pages.lab.setup_focus import SetupFollowsFocus


class LabAndRecordings(QObject):
    """The lab's setup, readouts and Back to live view follow the recordings' lab
    playback. ``setup_focus`` keeps the setup panel on the source in focus."""

    def __init__(self, lab: Any, recordings: Any) -> None:
        super().__init__(lab)
        self.lab, self.recordings = lab, recordings
        # After the lab's own form.changed slot: a change is compared with the run it reset
        # to, not the one before.
        self.setup_focus = SetupFollowsFocus(lab.form, lab.session, recordings.recorded, lab)
        lab.source_config = self.setup_focus.source_config  # an edit compares with the source
        recordings.shown.connect(self._on_recording_shown)
        lab.page_readouts.timeline = recordings.timeline
        lab.page_readouts.timeline_dock = recordings.dock
        lab.follow_newest = recordings.live.follow  # ticks Follow: shows the newest step

    @Slot(object)
    def _on_recording_shown(self, data) -> None:
        self.setup_focus.recording_shown(data, self.recordings.source)


class LabAndExplorer(QObject):
    """The lab's run network goes to the explorer's page; Diagnose holds the explorer."""

    def __init__(self, lab: Any, explorer: Any, pages: Any) -> None:
        super().__init__(lab)
        self.explorer, self.pages = explorer, pages
        lab.run_network.show_network = self.show_network
        lab.investigations.holds.append(explorer)

    def show_network(self, module, label: str, spec, in_dim: int, out_dim: int) -> None:
        self.explorer.explorer.set_network(module, label, spec, in_dim, out_dim)
        self.pages.show_page(self.pages.index_of(self.explorer))


def link_pages(pages: dict[str, Any], window: QMainWindow) -> list[QObject]:
    """Connect the pages of ``pages`` (by key) to one another; returns the links."""
    lab = pages["lab"]
    return [
        LabAndRecordings(lab, pages["health"]),
        LabAndExplorer(lab, pages["explorer"], window.pages),
    ]
