"""The Setup panel describes the source in focus: the run or recording whose step the lab's
views show, or says how it differs.

When the views change source (a new live run, another recording, the pinned first NaN of a
run stopped for a recording, the live run again after a recording), the form is set to that
source's settings: a live run's as it runs them (``RunSession.settings_now``, learning-rate
changes included), a lab recording's as it was made with. A change the user makes applies
at once where it can (the lab resets to it), so the form again describes what is shown;
where it cannot (torch is still loading, a value is not valid yet, the run would not fit
in memory) the form keeps the user's values and says, under them, which ones differ from the run
shown: they are the next run's. The form is never beside data it silently contradicts, and
no second path has to remember to fill it: every source reaches the views through
``RunSession.show``, and this listens there.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Slot

from gradviz.core.lab.snapshot import Snapshot
from gradviz.core.settings.config import FitConfig
from gradviz.gui.run.recorded_run import RecordedRun, recorded_config
from gradviz.gui.run.session import RunSession
from gradviz.gui.widgets.settings_form import SetupForm


class SetupFollowsFocus(QObject):
    """Keeps ``form`` describing the snapshot ``session`` shows (live or ``recorded``).

    Connect it after the controller's own ``form.changed`` slot, so that a change is
    compared with the run it produced (a reset), not with the run it replaced.
    """

    def __init__(
        self,
        form: SetupForm,
        session: RunSession,
        recorded: RecordedRun,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.form, self.session, self.recorded = form, session, recorded
        self._source: int | None = None  # generation of the source the form was set to
        self._filled_by: object | None = None  # the opened recording that filled the form
        session.snapshotShown.connect(self._on_snapshot_shown)
        session.cleared.connect(self._on_changed)  # a reset: nothing shown to differ from
        session.stateChanged.connect(self._on_changed)  # which button applies them
        form.changed.connect(self._on_changed)

    def source_config(self, snapshot: Snapshot | None) -> FitConfig | None:
        """The settings of the run ``snapshot`` belongs to: the current live run's, the
        shown recording's; None when unknown (an older run, a recording without them)."""
        if snapshot is None:
            return None
        if snapshot.generation == self.session.generation:
            return self.session.settings_now
        data = self.recorded.data
        if data is not None and snapshot.generation == self.recorded.generation:
            return recorded_config(data, self.form.config_class)
        return None

    def refill(self) -> None:
        """Set the form to the shown source's settings even if it is the source already in
        focus (a recording opened again asks for its settings again)."""
        self._source = None
        if self.session.shown is not None:
            self._on_snapshot_shown(self.session.shown)

    def recording_shown(self, data, opened: object) -> None:
        """A lab recording ``data`` read from ``opened`` (one object per time a recording is
        opened, the same for re-reads) went into the lab's views: the setup panel shows the
        settings it was made with, even where it was the source in focus already (opened
        again after the form changed); Start then repeats that run live. Once each time a
        recording is opened, not on every re-read of a growing one (the user's edits
        stay)."""
        if data.source != "fit" or "distances" not in data.images:
            return
        if opened is not None and opened is not self._filled_by:
            self._filled_by = opened
            self.refill()

    @Slot(object)
    def _on_snapshot_shown(self, snapshot: Snapshot) -> None:
        if snapshot.generation == self._source:
            return  # another step of the same source: the user's edits stay
        config = self.source_config(snapshot)
        if config is None:
            self._say_differences(None)
            return
        self._source = snapshot.generation
        if self.form.differences(config):
            self.form.set_config(config)
        self._say_differences(config)

    def _on_changed(self, *_why) -> None:
        """A setting, the run's state or the run itself changed (whatever the signal says)."""
        self._say_differences(self.source_config(self.session.shown))

    def _say_differences(self, config: FitConfig | None) -> None:
        names = [] if config is None else self.form.differences(config)
        # A going run resumes with its own settings on Start: only Reset applies the form's.
        applied_by = "Reset" if self.session.state.going else "Start or Reset"
        self.form.show_differences(names, applied_by, config)
