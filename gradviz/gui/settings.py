"""Where the app keeps its preferences (QSettings), kept apart from the user's during tests.

With ``GRADVIZ_SETTINGS_FILE`` set, settings live in that INI file; with
``GRADVIZ_SETTINGS_SCOPE`` set (tests set ``test``), in an INI file of that scope in the
temporary directory, never in the user's real preferences.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from PySide6.QtCore import QSettings

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


def recent_files(settings: QSettings) -> list[str]:
    raw = settings.value("recent_files") or "[]"
    try:
        items = json.loads(str(raw))
    except json.JSONDecodeError:
        return []
    return [str(p) for p in items if isinstance(p, str)][:MAX_RECENT]


def add_recent_file(settings: QSettings, path: str) -> list[str]:
    items = [path] + [p for p in recent_files(settings) if p != path]
    settings.setValue("recent_files", json.dumps(items[:MAX_RECENT]))
    return items[:MAX_RECENT]
