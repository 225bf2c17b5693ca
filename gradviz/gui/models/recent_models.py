"""The list of recently opened model files, kept in the app's settings (newest first)."""

from __future__ import annotations

import json

from PySide6.QtCore import QSettings

KEY = "recent_models"
MAX_RECENT = 8


def read(settings: QSettings) -> list[str]:
    raw = settings.value(KEY) or "[]"
    try:
        items = json.loads(str(raw))
    except json.JSONDecodeError:
        return []
    if not isinstance(items, list):
        return []
    return [str(p) for p in items if isinstance(p, str)][:MAX_RECENT]


def add(settings: QSettings, path: str) -> list[str]:
    """Put ``path`` first (once) and return the list."""
    items = ([path] + [p for p in read(settings) if p != path])[:MAX_RECENT]
    settings.setValue(KEY, json.dumps(items))
    return items
