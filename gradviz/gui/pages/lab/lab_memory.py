"""What the lab remembers between sessions in its settings file: the window's geometry and
dock layout, and the experiment in the setup form.

(The views' display choices are kept apart, by ``display_memory``.)
"""

from __future__ import annotations

import json
import logging

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMainWindow

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.config import FitConfig
from gradviz.core.settings.experiment import experiment_from_dict, experiment_to_dict
from gradviz.gui.common import settings as settings_store
from gradviz.gui.widgets.settings_form import LiveSettings, SetupForm

log = logging.getLogger(__name__)

EXPERIMENT_KEY = "experiment"


def restore_lab(
    settings: QSettings,
    window: QMainWindow,
    form: SetupForm,
    config: FitConfig | None = None,
    live: LiveSettings | None = None,
) -> None:
    """Put back the saved geometry and docks of ``window``, and fill ``form`` with
    ``config`` (when given) or else the saved experiment (an unreadable one is ignored)."""
    geometry = settings.value("window/geometry")
    state = settings.value("window/state")
    if geometry is not None:
        window.restoreGeometry(geometry)
    if state is not None:
        window.restoreState(state)
    if config is None:
        saved = settings_store.read_json(settings, EXPERIMENT_KEY)
        if saved is not None:
            try:
                config, live = experiment_from_dict(saved, source="the saved settings")
            except GradvizError:
                log.warning("ignoring unreadable saved settings")
    if config is not None:
        form.set_config(config, live or LiveSettings())


def remember_lab(settings: QSettings, window: QMainWindow, form: SetupForm) -> None:
    """Write the geometry and docks of ``window`` and the experiment in ``form`` (unless
    the form is unfinished) to ``settings``, and flush them to disk."""
    settings.setValue("window/geometry", window.saveGeometry())
    settings.setValue("window/state", window.saveState())
    try:
        data = experiment_to_dict(form.config(), form.live_settings())
        settings.setValue(EXPERIMENT_KEY, json.dumps(data))
    except GradvizError:
        pass  # an unfinished form is not remembered
    settings.sync()
