"""The setup panel's network diagram follows the picture on screen: each layer's gradient of
the snapshot shown (a live step, the pinned first NaN, an older step chosen on the timeline,
a recorded step), drawn where that run's network is the one in the editor."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Slot

from gradviz.core.lab.snapshot import Snapshot
from gradviz.core.settings.config import FitConfig
from gradviz.gui.run.session import RunSession
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
        session.snapshotShown.connect(self._on_shown)
        session.cleared.connect(self._on_cleared)
        form.changed.connect(self._on_form_changed)

    @Slot(object)
    def _on_shown(self, snapshot) -> None:
        session = self.session
        own = snapshot.generation == session.generation and session.config is not None
        # A snapshot of another source (a recording) names no run of the lab's.
        config = session.config if own else self.config_of(snapshot)
        run_net = config.net if config is not None else None
        self.form.show_network_gradients(snapshot, run_net)

    @Slot()
    def _on_cleared(self) -> None:
        self.form.show_network_gradients(None, None)

    @Slot(str)
    def _on_form_changed(self, _name: str) -> None:
        """The editor may show another network now: redraw against the picture shown."""
        shown = self.session.shown
        if shown is None:
            self._on_cleared()
        else:
            self._on_shown(shown)
