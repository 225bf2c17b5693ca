"""Undo and redo of the lab's setup: the settings each restart left behind.

Every change that restarts the run (network, point set, method, N, D, seed, optimiser, an
opened experiment) records the settings of the run it replaced; Undo brings the last of
them back and Redo the one undone. Only settings are kept (a FitConfig is a few hundred
bytes), never a run's data; the history lives in memory and ends with the app.
"""

from __future__ import annotations

from gradviz.core.settings.config import FitConfig
from gradviz.core.settings.table import settings_of

#: Setups kept to undo (the oldest is dropped beyond this).
MAX_UNDO = 100


class SetupHistory:
    """Two stacks of FitConfigs: the setups to undo to and the ones to redo."""

    def __init__(self, limit: int = MAX_UNDO) -> None:
        self.limit = limit
        self._undo: list[FitConfig] = []
        self._redo: list[FitConfig] = []

    def record(self, left: FitConfig) -> None:
        """A change left setup ``left``: Undo returns to it; what was undone is gone."""
        if self._undo and self._undo[-1] == left:
            return
        self._undo.append(left)
        del self._undo[: -self.limit]
        self._redo.clear()

    def undo(self, current: FitConfig) -> FitConfig | None:
        """The setup before ``current`` (which Redo then returns to), or None."""
        if not self._undo:
            return None
        self._redo.append(current)
        return self._undo.pop()

    def redo(self, current: FitConfig) -> FitConfig | None:
        """The setup last undone (``current`` becomes undoable again), or None."""
        if not self._redo:
            return None
        self._undo.append(current)
        return self._redo.pop()

    @property
    def next_undo(self) -> FitConfig | None:
        return self._undo[-1] if self._undo else None

    @property
    def next_redo(self) -> FitConfig | None:
        return self._redo[-1] if self._redo else None


def changed_titles(before: FitConfig, after: FitConfig) -> list[str]:
    """The titles of the settings that differ between two setups, in the form's order."""
    return [
        row.title
        for row in settings_of(type(after))
        if getattr(before, row.name, None) != getattr(after, row.name)
    ]
