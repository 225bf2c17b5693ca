"""The window's exports: File > Export view data… (the arrays of the page on screen, to the
one file named), File > Save window image…, and each plot's right-click Export PNG / SVG /
CSV.

A page joins Export view data by having ``arrays() -> {name: array}`` (its object or its
widget); a page's plots join the right-click exports through ``add_plot(name, plot)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QObject, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QWidget

from gradviz.gui.widgets.plot_export import add_export_menu, ask_path

#: The title of the dialog when there is nothing to export or a file could not be written.
EXPORT_FAILED_TITLE = "gradviz: export"


class ViewExports(QObject):
    """File > Export view data… and Save window image… of ``window``, and the plots' export
    menus. ``choose_path(parent, suffix)`` asks for an image's or a plot's file name and
    ``choose_data_path(parent, suffix, count)`` for the view data's ('' cancels; tests
    replace them); ``plot_actions`` holds each plot's export actions by name."""

    def __init__(self, window, show_error: Callable[..., object]) -> None:
        super().__init__(window)
        self.window = window
        self.show_error = show_error
        self.choose_path: Callable[[QWidget, str], str] = ask_path
        self.choose_data_path: Callable[[QWidget, str, int], str] = ask_data_path
        self.plot_actions: dict[str, list[QAction]] = {}
        self.export_data_action = QAction("E&xport view data…", window)
        self.export_data_action.setToolTip(
            "Write the arrays of the page on screen to one file (NPY, or an NPZ archive of them)"
        )
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
    def export_data(self) -> str:
        """Ask for a file name and write the page's arrays to exactly that file (one array:
        NPY; several: one NPZ archive); returns the path written ('' when none)."""
        arrays = self.view_arrays()
        if not arrays:
            self._failed("There is no view data to export yet: open or run something.")
            return ""
        suffix = ".npy" if len(arrays) == 1 else ".npz"
        path = self.choose_data_path(self.window, suffix, len(arrays))
        if not path:
            return ""
        try:
            said = save_view_data(path, arrays)
        except (OSError, ValueError) as exc:
            self._failed(f"Could not write {path!r}: {exc}.")
            return ""
        self.window.statusBar().showMessage(said, 10_000)
        return path

    @Slot()
    def _on_save_image(self) -> None:
        path = self.choose_path(self.window, ".png")
        if path and not save_window_image(self.window, path):
            self._failed(f"Could not write {path!r}.")

    def _failed(self, sentence: str) -> None:
        dialog = self.show_error(sentence, "")
        if hasattr(dialog, "setWindowTitle"):
            dialog.setWindowTitle(EXPORT_FAILED_TITLE)


def save_view_data(path: str, arrays: dict[str, np.ndarray]) -> str:
    """Write ``arrays`` to exactly ``path``: one array as an NPY file, several as one NPZ
    archive (``numpy.load(path)[name]``). Returns the sentence that says what was written.
    Raises OSError when the file cannot be written."""
    values = {name: np.asarray(array) for name, array in arrays.items()}
    if any(v.dtype.hasobject for v in values.values()):  # would need pickle to read back
        raise ValueError("view data holds Python objects, not numbers")
    with open(path, "wb") as file:  # a file, not a name: numpy would add its own suffix
        if len(values) == 1:
            np.save(file, next(iter(values.values())), allow_pickle=False)
        else:
            np.savez(file, **values)
    if len(values) == 1:
        return f"Wrote {next(iter(values))} to {path} (NPY)."
    return (
        f"Wrote {len(values)} arrays to {path}, one NPZ archive (numpy.load gives each by "
        f"name: {', '.join(values)})."
    )


def ask_data_path(parent: QWidget, suffix: str, count: int = 1) -> str:
    """A file name for ``count`` arrays chosen in a save dialog ('' when cancelled): the
    dialog says which file it writes (one .npy, or one .npz archive of them all); a name
    typed without a suffix gets ``suffix``, any other name is kept as typed."""
    what = "NumPy array (*.npy)" if count == 1 else f"NumPy archive of the {count} arrays (*.npz)"
    path, _ = QFileDialog.getSaveFileName(parent, "Export view data", "", what)
    return path if not path or os.path.splitext(path)[1] else path + suffix


def save_window_image(window: QWidget, path: str) -> bool:
    """The whole window as an image (PNG, or what the suffix says)."""
    return window.grab().save(path)
