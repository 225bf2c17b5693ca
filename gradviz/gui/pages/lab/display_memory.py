"""The lab's display choices (colormaps, palettes, locked colour levels) outlive the app.

Each matrix view's choices live in the settings under ``display/<view key>/...`` and are
put back when the lab opens.
"""

from __future__ import annotations

import json

from PySide6.QtCore import QObject, QSettings, Slot
from PySide6.QtWidgets import QCheckBox, QComboBox

from gradviz.gui.run.views import LabViews
from gradviz.gui.widgets.healthmap import HealthMapView
from gradviz.gui.widgets.heatmap import HeatmapView


class DisplayMemory(QObject):
    """Restores and then keeps each view's colormap (or palette) and level lock."""

    def __init__(self, settings: QSettings, views: LabViews) -> None:
        super().__init__(views)
        self.settings = settings
        self._keys: dict[QObject, str] = {}
        self._heatmaps: dict[str, HeatmapView] = {}
        for key, view in views.views.items():
            widget = view.widget
            if isinstance(widget, HeatmapView):
                self._heatmaps[key] = widget
                self._combo(f"display/{key}/colormap", widget.colormap_box)
                self._restore_lock(key, widget)
            elif isinstance(widget, HealthMapView):
                self._combo(f"display/{key}/palette", widget.palette_box)

    def _combo(self, key: str, box: QComboBox) -> None:
        saved = self.settings.value(key)
        if isinstance(saved, str) and box.findText(saved) >= 0:
            box.setCurrentText(saved)
        self._keys[box] = key
        box.currentTextChanged.connect(self._on_combo_changed)

    def _restore_lock(self, key: str, view: HeatmapView) -> None:
        try:
            levels = json.loads(str(self.settings.value(f"display/{key}/locked") or "null"))
        except json.JSONDecodeError:
            levels = None
        if isinstance(levels, list) and len(levels) == 2 and levels[0] < levels[1]:
            view.lock_levels((float(levels[0]), float(levels[1])))
        self._keys[view.lock_box] = key
        view.lock_box.toggled.connect(self._on_lock_toggled)
        view.colorbar.sigLevelsChangeFinished.connect(self._on_levels_set)

    @Slot(str)
    def _on_combo_changed(self, text: str) -> None:
        self.settings.setValue(self._keys[self.sender()], text)

    @Slot(bool)
    def _on_lock_toggled(self, _locked: bool) -> None:
        box = self.sender()
        if isinstance(box, QCheckBox):
            self._save_lock(self._keys[box])

    @Slot(object)
    def _on_levels_set(self, _bar: object) -> None:
        for key in self._heatmaps:
            self._save_lock(key)

    def _save_lock(self, key: str) -> None:
        view = self._heatmaps[key]
        value = json.dumps(list(view.levels())) if view.locked() else "null"
        self.settings.setValue(f"display/{key}/locked", value)
