"""Where the app keeps its preferences (QSettings), kept apart from the user's during tests.

With ``GRADVIZ_SETTINGS_FILE`` set, settings live in that INI file; with
``GRADVIZ_SETTINGS_SCOPE`` set (tests set ``test``), in an INI file of that scope in the
temporary directory, never in the user's real preferences.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMenu

ORGANISATION = "gradviz"
APPLICATION = "gradviz"
MAX_RECENT = 8


def open_settings() -> QSettings:
    """The app's QSettings."""
    path = os.environ.get("GRADVIZ_SETTINGS_FILE")
    scope = os.environ.get("GRADVIZ_SETTINGS_SCOPE")
    if not path and scope:
        path = str(Path(tempfile.gettempdir()) / f"gradviz-settings-{scope}.ini")
    if path:
        return QSettings(path, QSettings.Format.IniFormat)
    return QSettings(ORGANISATION, APPLICATION)


def read_json(settings: QSettings, key: str) -> dict | None:
    """A JSON object stored under ``key``, or None when absent or unreadable."""
    raw = settings.value(key)
    if not raw:
        return None
    try:
        value = json.loads(str(raw))
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def fill_recent_menu(menu: QMenu, paths: list[str], open_path: Callable[[str], None]) -> None:
    """List ``paths`` in ``menu`` (disabled when empty); choosing one calls ``open_path``."""
    menu.clear()
    for path in paths:
        action = menu.addAction(path)
        action.triggered.connect(lambda _checked=False, chosen=path: open_path(chosen))
    menu.setEnabled(bool(paths))


class RecentFiles:
    """A list of recently used paths under one settings key, newest first, at most
    ``MAX_RECENT``. Whatever the key holds (a stray number, broken JSON) reads as a list."""

    def __init__(self, settings: QSettings, key: str) -> None:
        self.settings = settings
        self.key = key

    def read(self) -> list[str]:
        try:
            items = json.loads(str(self.settings.value(self.key) or "[]"))
        except json.JSONDecodeError:
            return []
        if not isinstance(items, list):
            return []
        return [str(p) for p in items if isinstance(p, str)][:MAX_RECENT]

    def add(self, path: str) -> list[str]:
        """Put ``path`` first (once) and return the list."""
        items = ([path] + [p for p in self.read() if p != path])[:MAX_RECENT]
        self.settings.setValue(self.key, json.dumps(items))
        return items
