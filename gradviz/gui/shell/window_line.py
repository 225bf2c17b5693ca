"""The one line ``gradviz gui ... --screenshot F`` prints after saving: what the window said.

``saved F (WxH); run <state> at step K; page <title>; status: <status bar text>``, or
``run failed: <why>`` in place of the run's state where the experiment did not run (no
dialog waits for a person in a scripted run). Scripts and tests read it to check what the
window showed, so it is built from the widgets themselves: the title of the tab shown, the
status bar's labels as they read.
"""

from __future__ import annotations

from PySide6.QtWidgets import QMainWindow

#: Between two of the status bar's labels in the line (they sit side by side on screen).
STATUS_SEPARATOR = " | "


def status_text(window: QMainWindow) -> str:
    """The status bar's labels that say something, left to right (whole, not elided)."""
    labels = getattr(window, "status_labels", {})
    texts = [label.text().strip() for label in labels.values() if label.isVisible()]
    return STATUS_SEPARATOR.join(t for t in texts if t)


def page_title(window: QMainWindow) -> str:
    """The title of the page shown, as on its tab (e.g. "Model health")."""
    pages = window.pages
    return pages.bar.tabText(pages.current())


def run_part(session) -> str | None:
    """``run <state> at step K`` of the run on screen; None when there is no run."""
    from gradviz.gui.run.session import RunState

    shown = session.shown
    if shown is None and session.state in (RunState.IDLE, RunState.LOADING, RunState.UNAVAILABLE):
        return None
    return f"run {session.state.label} at step {shown.step if shown is not None else 0}"


def screenshot_line(
    path: str, width: int, height: int, window: QMainWindow, session, failure: str = ""
) -> str:
    parts = [f"saved {path} ({width}x{height})"]
    run = f"run failed: {failure}" if failure else run_part(session)
    if run is not None:
        parts.append(run)
    parts += [f"page {page_title(window)}", f"status: {status_text(window)}"]
    return "; ".join(parts)
