"""Run > Explore the run's network: the lab's coordinate network in the Jacobian explorer.

The network lives on the run's worker thread. The action asks the worker for a copy
(``FitWorker.request_network``, answered between two steps, running or paused) or, once the
run has ended, takes the copy the worker sent as it finished. The copy is plain numpy data;
the module is rebuilt here from its spec and weights (building runs no autograd) and handed
to ``ExplorerTab.set_network``, which computes on the explorer's own thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QMainWindow

from gradviz.core.nets.networks import NetworkSpec, module_from_state
from gradviz.gui.run.session import RunSession, RunState
from gradviz.gui.run.worker import NetworkCopy

log = logging.getLogger(__name__)


class RunNetworkExplorer(QObject):
    """Connects the ``explore_network`` action of the lab's window to its session.

    ``show_network(module, label, spec, in_dim, out_dim)`` shows the copy where Jacobians
    are explored (the app sets it: the Jacobian explorer's page)."""

    def __init__(self, session: RunSession, window: QMainWindow) -> None:
        super().__init__(session)
        self.session = session
        self.window = window
        self.show_network: Callable[..., None] | None = None
        self.latest: NetworkCopy | None = None  # the newest copy of the current run
        self.pending = False  # the user asked; the worker has not answered yet
        self.action = window.actions["explore_network"]
        self.action.triggered.connect(self.explore)
        session.networkReady.connect(self._on_network_ready)
        session.stateChanged.connect(self._on_state_changed)
        self._on_state_changed(session.state)

    @property
    def available(self) -> bool:
        """Whether the current run's coordinates come from a network it can hand over."""
        config = self.session.config
        if config is None or not config.net or self.session.state is RunState.LOADING:
            return False
        return self.session.worker is not None or self._current(self.latest)

    @Slot()
    def explore(self) -> None:
        """Show the run's network in the explorer: now if an up-to-date copy is here,
        otherwise when the worker sends one."""
        if not self.available:
            return
        running = self.session.state is RunState.RUNNING
        if self.session.worker is None or (not running and self._up_to_date()):
            self._show(self.latest)
            return
        self.pending = True
        self.window.statusBar().showMessage("Copying the run's network…", 3000)
        self.session.request_network()

    @Slot(object)
    def _on_network_ready(self, network: NetworkCopy) -> None:
        self.latest = network
        self.action.setEnabled(self.available)
        if self.pending:
            self._show(network)

    @Slot(object)
    def _on_state_changed(self, _state: RunState) -> None:
        if self.latest is not None and not self._current(self.latest):
            self.latest = None  # a new run (Reset): the old copy is not its network
        self.action.setEnabled(self.available)
        # A request that met the end of its run is answered by the run's final copy.
        if self.pending and self.session.worker is None and self._current(self.latest):
            self._show(self.latest)

    def _current(self, network: NetworkCopy | None) -> bool:
        return network is not None and network.generation == self.session.generation

    def _up_to_date(self) -> bool:
        snap = self.session.latest
        return (
            self._current(self.latest) and snap is not None and self.latest.step == snap.step  # type: ignore[union-attr]
        )

    def _show(self, network: NetworkCopy | None) -> None:
        self.pending = False
        if network is None or self.show_network is None:
            return
        spec = NetworkSpec.from_json(network.spec_json)
        module = module_from_state(spec, network.state)
        label = f"coordinate network of the run at step {network.step:,}"
        self.show_network(module, label, spec, spec.in_dim, spec.out_dim)
