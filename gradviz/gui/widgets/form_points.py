"""The setup form's point set: its gallery, the N and D a point file sets, points drawn by
hand, and saving the points shown.

A point file (CSV or NPY) decides N and D of the run, so the form shows the file's: the
N and D boxes take its shape and are read-only while a file is the target (or, fitting free
coordinates, the initial coordinates); the network's output width follows D (form_network).
A file that cannot be read is named in the form's problem line, in one sentence. Drawn
points (the gallery's "drawn" canvas) are the target ``drawn:x,y x,y ...`` and decide
N and D alike (2-D, or 3-D drawn through a view); each finished edit on the canvas changes
the target, so the run follows it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QFileDialog, QWidget

from gradviz.core.common.errors import GradvizError
from gradviz.core.lab.pointsets import generate, load_points, save_points
from gradviz.core.settings.config import POINT_GENERATORS
from gradviz.core.settings.drawn import format_drawn, is_drawn, parse_drawn
from gradviz.core.settings.table import FILE_PREFIX
from gradviz.gui.widgets.point_drawing import DECIMALS, DRAWN_DIMS
from gradviz.gui.widgets.point_gallery import PointSetGallery, project, thumbnail_points

POINT_FILES = "Point sets (*.csv *.npy)"
SAVE_FILES = "CSV (*.csv);;NumPy (*.npy)"
SET_BY_FILE = "Set by the point file ({path}); choose a generator to change it."
SET_BY_DRAWING = "Set by the drawn points; draw, or choose a generator, to change it."
#: A drawing starts from the set shown where it has at most this many points (else a ring).
MAX_START_POINTS = 200
START_RING = 12  # points of the ring a drawing starts from otherwise


def read_point_file(path: str) -> np.ndarray:
    """The points of a CSV or NPY file, read once per version of the file (GradvizError
    naming the file and the problem where it cannot be used)."""
    try:
        stat = os.stat(path)
    except OSError:
        raise GradvizError(f"The point file {path!r} does not exist; check the path.") from None
    return _read(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=2)
def _read(path: str, _mtime_ns: int, _size: int) -> np.ndarray:
    points = load_points(path)
    points.flags.writeable = False  # shared by every caller of the cache
    return points


def file_of(value: str) -> str | None:
    """The path of a ``file:PATH`` point spec, else None."""
    return value[len(FILE_PREFIX) :] if value.startswith(FILE_PREFIX) else None


class FormPoints:
    """The gallery of setting ``target`` of a SetupForm.

    ``value(name)`` reads a form parameter, ``spec()`` is the target as the run takes it
    (a generator name, ``file:PATH`` or ``drawn:...``; GradvizError where not valid yet);
    ``pick(name)``, ``use_file(path)`` and ``use_drawn(spec)`` set it as the user would.
    """

    def __init__(
        self,
        value: Callable[[str], object],
        spec: Callable[[], str],
        pick: Callable[[str], None],
        use_file: Callable[[str], None],
        use_drawn: Callable[[str], None],
        parent: QWidget | None = None,
    ) -> None:
        self._value, self._spec, self._pick, self._use_file = value, spec, pick, use_file
        self._use_drawn = use_drawn
        self.gallery = PointSetGallery(POINT_GENERATORS, parent)
        self.gallery.picked.connect(self._pick)
        self.gallery.fileWanted.connect(self.ask_file)
        self.gallery.drawnWanted.connect(self.start_drawing)
        self.gallery.drawing.edited.connect(lambda points: self._use_drawn(format_drawn(points)))
        self.gallery.saveWanted.connect(self.ask_save)
        self._drawn: tuple | None = None  # the (N, D, seed) the thumbnails show
        self._timer = QTimer(self.gallery)
        self._timer.setSingleShot(True)
        self._timer.setInterval(120)  # typing N draws once, at the end
        self._timer.timeout.connect(self.refresh)

    def schedule(self) -> None:
        self._timer.start()

    def refresh(self) -> None:
        """Redraw the thumbnails (where N, D or seed changed) and the preview."""
        self._timer.stop()
        n, dim, seed = (int(self._value(name)) for name in ("n", "dim", "seed"))
        if self._drawn != (n, dim, seed):
            self._drawn = (n, dim, seed)
            self.gallery.draw_generators(n, dim, seed)
        points, caption = self.points(preview=True)
        self.gallery.show_set(str(self._value("target")), points, caption)  # a name or FILE

    def points(self, preview: bool = False) -> tuple[np.ndarray | None, str]:
        """The target points the form describes and one line about them, or None and why.
        A ``preview`` of a very large generated set holds as many points as a thumbnail."""
        try:
            spec = self._spec()
            if is_drawn(spec):
                points = np.array(parse_drawn(spec), dtype=np.float64)
                return points, f"drawn: {len(points):,} points in {points.shape[1]}-D"
            path = file_of(spec)
            if path is not None:
                points = read_point_file(path)
                name = os.path.basename(path)
                return points, f"{name}: {len(points):,} points in {points.shape[1]}-D"
            n, dim, seed = (int(self._value(k)) for k in ("n", "dim", "seed"))
            if preview:
                points, note = thumbnail_points(spec, n, dim, seed)
            else:
                points, note = generate(spec, n, dim, seed), f"{n:,} points in {dim}-D, seed {seed}"
        except GradvizError as exc:
            return None, str(exc)
        return points, f"{spec}: {POINT_GENERATORS.get(spec, '')}; {note}"

    def start_drawing(self) -> None:
        """Draw: from the set shown where it is small enough to edit by hand (else from a
        ring of START_RING points), in its own D where the canvas draws that D (2 or 3),
        else in 2-D as the thumbnails draw it."""
        points, _ = self.points()
        if points is None or len(points) > MAX_START_POINTS:
            points = generate("circle", START_RING, 2)
        if points.shape[1] not in DRAWN_DIMS:
            points = project(points)
        self._use_drawn(format_drawn(np.round(points, DECIMALS)))

    def ask_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self.gallery, "Open a point set", "", f"{POINT_FILES};;All files (*)"
        )
        if path:
            self._use_file(path)
        else:
            self.refresh()  # the button stays on what is picked

    def ask_save(self) -> None:
        path, chosen = QFileDialog.getSaveFileName(
            self.gallery, "Save the points", "points.csv", SAVE_FILES
        )
        if not path:
            return
        if not os.path.splitext(path)[1]:
            path += ".npy" if "npy" in chosen else ".csv"
        try:
            self.save(path)
        except (GradvizError, OSError) as exc:
            self.gallery.caption.setText(f"Could not save {path!r}: {exc}")

    def save(self, path: str) -> None:
        """Write the target points as CSV, or NPY where ``path`` ends in .npy."""
        points, why = self.points()
        if points is None:
            raise GradvizError(why)
        save_points(path, points)
        self.gallery.caption.setText(f"Saved {len(points):,} points to {path}.")
