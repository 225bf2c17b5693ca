"""The window's exports: File > Export view data… (the arrays of the page on screen), File >
Save window image…, and each plot's right-click Export PNG / SVG / CSV.

A page joins Export view data by having ``arrays() -> {name: array}`` (its object or its
widget); a page's plots join the right-click exports through ``add_plot(name, plot)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QObject, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QWidget

from gradviz.gui.widgets.plot_export import add_export_menu, ask_path

#: The title of the dialog when there is nothing to export or a file could not be written.
EXPORT_FAILED_TITLE = "gradviz: export"


class ViewExports(QObject):
    """File > Export view data… and Save window image… of ``window``, and the plots' export
    menus. ``choose_path(parent, suffix)`` asks for a file name ('' cancels; tests replace
    it); ``plot_actions`` holds each plot's export actions by name."""

    def __init__(self, window, show_error: Callable[..., object]) -> None:
        super().__init__(window)
        self.window = window
        self.show_error = show_error
        self.choose_path: Callable[[QWidget, str], str] = ask_path
        self.plot_actions: dict[str, list[QAction]] = {}
        self.export_data_action = QAction("E&xport view data…", window)
        self.export_data_action.setToolTip("Write the arrays of the page on screen as NPY files")
        self.export_data_action.triggered.connect(self.export_data)
        self.save_image_action = QAction("Save window &image…", window)
        self.save_image_action.triggered.connect(self._on_save_image)
        quit_action = window.actions["quit"]
        window.file_menu.insertAction(quit_action, self.export_data_action)
        window.file_menu.insertAction(quit_action, self.save_image_action)
        window.file_menu.insertSeparator(quit_action)

    def add_plot(self, name: str, plot) -> list[QAction]:
        """Export PNG / SVG / CSV in ``plot``'s right-click menu, asking ``choose_path``."""
        self.plot_actions[name] = add_export_menu(plot, self.window, self._choose)
        return self.plot_actions[name]

    def _choose(self, parent: QWidget, suffix: str) -> str:
        return self.choose_path(parent, suffix)  # looked up now: tests replace it

    def view_arrays(self) -> dict[str, np.ndarray]:
        """The arrays of the page on screen (empty where it has none)."""
        pages = self.window.pages
        for holder in (pages.pages[pages.current()], pages.page()):
            arrays = getattr(holder, "arrays", None)
            if arrays is not None:
                return arrays()
        return {}

    @Slot()
    def export_data(self) -> list[str]:
        """Ask for a name and write the page's arrays; returns the paths written."""
        arrays = self.view_arrays()
        if not arrays:
            self._failed("There is no view data to export yet: open or run something.")
            return []
        stem = self.choose_path(self.window, ".npy")
        return save_arrays(stem, arrays) if stem else []

    @Slot()
    def _on_save_image(self) -> None:
        path = self.choose_path(self.window, ".png")
        if path and not save_window_image(self.window, path):
            self._failed(f"Could not write {path!r}.")

    def _failed(self, sentence: str) -> None:
        dialog = self.show_error(sentence, "")
        if hasattr(dialog, "setWindowTitle"):
            dialog.setWindowTitle(EXPORT_FAILED_TITLE)


def save_arrays(stem: str, arrays: dict[str, np.ndarray]) -> list[str]:
    """Write each array as ``<stem>.<name>.npy``; returns the paths written."""
    base = stem[:-4] if stem.lower().endswith(".npy") else stem
    written = []
    for name, array in arrays.items():
        path = f"{base}.{name}.npy"
        np.save(path, np.asarray(array), allow_pickle=False)
        written.append(path)
    return written


def save_window_image(window: QWidget, path: str) -> bool:
    """The whole window as an image (PNG, or what the suffix says)."""
    return window.grab().save(path)
