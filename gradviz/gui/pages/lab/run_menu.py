"""The lab's Run menu and its toolbar: the run commands (Start ... Reset), Show first NaN, Back
to live view, Why NaN here?, Compare side by side and Explore the run's network.

They act on the lab's run, so they are the lab's: shown (menu, toolbar, and the shortcuts
Space, S, R, Ctrl+W, ...) only while the lab's page is, never beside another page's data
that they are not about. The window gives them their place (``add_action``, the menu bar,
the toolbar area under the pages' tabs).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QToolBar, QToolButton

from gradviz.gui.run.status import name_run_action

#: The run commands: (name, text, shortcut, tip).
RUN_COMMANDS = (
    ("start", "Start", None, "Start the run, or resume it (Space)"),
    ("pause", "Pause", None, "Pause the run; Resume continues it (Space)"),
    ("step", "Step once", "S", "Take one optimiser step and show it (S)"),
    ("stop", "Stop", None, "End the run; its last state stays on screen"),
    ("reset", "Reset", "R", "Start over at step 0 with the current settings (R)"),
)
#: What else the Run menu holds, after a separator each group.
RUN_TOOLS = (
    (
        ("first_nan", "Show &first NaN", "Ctrl+N",
         "Show the pinned snapshot of the first step with a non-finite gradient"),
        ("live", "Back to &live view", "Ctrl+L", "Follow the run again"),
        ("why_nan", "&Why NaN here?", "Ctrl+W",
         "Explain the lab run's first NaN from the data, and diagnose its step under the NaN "
         "tracer"),
    ),
    (
        ("compare", "&Compare side by side…", "Ctrl+K",
         "Run the lab's setup beside the same data with another method"),
        ("explore_network", "&Explore the run's network", "Ctrl+J",
         "Show a copy of the run's coordinate network in the Jacobian explorer"),
    ),
)  # fmt: skip
#: On the toolbar too (the rest is in the menu only).
ON_THE_TOOLBAR = ("first_nan", "live", "why_nan", "compare")


class RunMenu:
    """Makes the lab's run actions in ``window`` (``window.actions[name]``), its Run menu
    (``menu``, before View) and its toolbar (``toolbar``); ``set_shown`` shows or hides
    them all with the lab."""

    def __init__(self, window) -> None:
        self.window = window
        add = window.add_action
        self.actions: list[QAction] = [add(*command) for command in RUN_COMMANDS]
        for name in ("start", "pause"):  # Space starts, pauses and resumes (toggle_run)
            name_run_action(window.actions[name], window.actions[name].text())
        # Space toggles run/pause; a separate action so it works whichever button is enabled.
        self.actions.append(
            add("toggle_run", "Start or pause", "Space", "Start, pause or resume (Space)")
        )
        self.menu = QMenu("&Run", window)
        self.menu.setObjectName("run-menu")
        window.menuBar().insertMenu(window.view_menu.menuAction(), self.menu)
        for name, *_ in RUN_COMMANDS:
            self.menu.addAction(window.actions[name])
        for group in RUN_TOOLS:
            self.menu.addSeparator()
            for tool in group:
                self.actions.append(add(*tool))
                self.menu.addAction(self.actions[-1])
        self.toolbar = self._make_toolbar()

    def _make_toolbar(self) -> QToolBar:
        window = self.window
        bar = QToolBar("Run controls")
        bar.setObjectName("run-toolbar")
        bar.setMovable(False)
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        for name, *_ in RUN_COMMANDS:
            bar.addAction(window.actions[name])
        bar.addSeparator()
        for name in ON_THE_TOOLBAR[:3]:
            bar.addAction(window.actions[name])
        bar.addSeparator()
        for name in ON_THE_TOOLBAR[3:]:
            bar.addAction(window.actions[name])
        for button in bar.findChildren(QToolButton):
            button.setMinimumWidth(64)
        # Under the pages' tabs: the tabs stay put when another page hides it.
        window.addToolBarBreak(Qt.ToolBarArea.TopToolBarArea)
        window.addToolBar(Qt.ToolBarArea.TopToolBarArea, bar)
        return bar

    def add_to_menu(self, action: QAction) -> None:
        """Another of the lab's run actions, at the end of the Run menu (shown with it)."""
        self.menu.addSeparator()
        self.menu.addAction(action)
        self.actions.append(action)

    def set_shown(self, shown: bool) -> None:
        """Show (the lab's page is on screen) or hide the menu, the toolbar and every action
        (a hidden action's shortcut does nothing)."""
        self.toolbar.setVisible(shown)
        self.menu.menuAction().setVisible(shown)
        for action in self.actions:
            action.setVisible(shown)
