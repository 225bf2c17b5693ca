"""The window's pages, in tab order: a page is one folder under ``gradviz/gui/pages/`` and
one line of ``PAGES``.

Each line names the page (``key``: its name for ``gradviz gui --page`` and in
``App.pages``), the title of its tab, its factory and what the factory needs. A need is the
name of one of the app's shared parts (``window``, ``session``, ``settings``,
``show_error``, ``confirm``, ``exports``, ``models``, ``compare_window``, ``log_path``,
``config``, ``live``; see ``shell.compose``) or the key of a page listed above it; the
composition root calls the factory with each need as a keyword argument.

What a factory returns is the page: ``widget`` is what the pages' stack shows (None only for
the first page, which is the window's docks), and where the page has them, ``readouts()``
(what it says, as data), ``arrays()`` (File > Export view data), ``going`` (closing would
end its work), ``thread_count`` and ``shutdown(timeout_s)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from gradviz.gui.pages.explorer.page import ExplorerPage
from gradviz.gui.pages.graph.page import PAGE_TITLE as GRAPH_TITLE
from gradviz.gui.pages.graph.wiring import GraphWiring
from gradviz.gui.pages.lab.controller import LabController
from gradviz.gui.pages.recordings.health_page import PAGE_TITLE as HEALTH_TITLE
from gradviz.gui.pages.recordings.opening import Recordings
from gradviz.gui.pages.runs.overlay import PAGE_TITLE as RUNS_TITLE
from gradviz.gui.pages.runs.page import RunsPage


@dataclasses.dataclass(frozen=True)
class PageEntry:
    """One page: ``factory(**{need: part for need in needs})`` makes it."""

    key: str
    title: str
    factory: Callable[..., Any]
    needs: tuple[str, ...]


#: Every page, in tab order (Ctrl+1, Ctrl+2, ... in this order too).
PAGES: tuple[PageEntry, ...] = (
    PageEntry(
        "lab",
        "Distance-fit lab",
        LabController,
        (
            "window",
            "session",
            "settings",
            "show_error",
            "confirm",
            "compare_window",
            "exports",
            "log_path",
            "config",
            "live",
        ),
    ),
    PageEntry("explorer", "Jacobian explorer", ExplorerPage, ("models", "show_error")),
    PageEntry(
        "health",
        HEALTH_TITLE,
        Recordings,
        ("window", "session", "settings", "show_error", "confirm", "exports"),
    ),
    PageEntry("runs", RUNS_TITLE, RunsPage, ("health", "session", "exports", "show_error")),
    PageEntry("graph", GRAPH_TITLE, GraphWiring, ("window", "health", "models", "show_error")),
)

#: The pages' keys, in tab order (``gradviz gui --page``).
PAGE_KEYS = tuple(entry.key for entry in PAGES)
