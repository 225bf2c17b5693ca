"""What the window says, as data: every view, panel and page can report its ``readouts()``.

A readout is what a widget shows, read back from the widget (the step it drew, the counts in
its legend, the text of its label), not recomputed from the source it was fed. Tests compare
readouts with the source in focus (a live snapshot, a recorded step, the pinned first NaN, a
recording) and with the CLI's numbers for it; scripts can print them.

The protocol is one method, ``readouts() -> dict`` of plain values (str, int, float, bool,
None, lists and dicts of them). A page joins ``window_readouts`` by having the method (its
page object, else its widget); the lab's page, made of docks rather than one widget, has it
on its page object.
"""

from __future__ import annotations

import re
from typing import Any, Protocol, runtime_checkable

Readouts = dict[str, Any]


@runtime_checkable
class HasReadouts(Protocol):
    def readouts(self) -> Readouts: ...


def readouts_of(thing: object) -> Readouts | None:
    """``thing.readouts()`` where it has the method, else None."""
    return thing.readouts() if isinstance(thing, HasReadouts) else None


def window_readouts(window) -> Readouts:
    """The readouts of the page in focus of ``window`` (a MainWindow), with its title under
    ``"page"``: ``{"page": "Model health", ...the page's readouts...}``. A page without
    readouts reports its title only."""
    pages = window.pages
    said = readouts_of(pages.pages[pages.current()])  # the page's own, else its widget's
    if said is None:
        said = readouts_of(pages.page())
    return {"page": pages.bar.tabText(pages.current()), **(said or {})}


_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


def number_in(text: str) -> float | None:
    """The first number written in ``text`` ("1,234 steps done" -> 1234.0); None if none."""
    found = _NUMBER.search(text or "")
    return float(found.group().replace(",", "")) if found else None


def step_in(text: str, word: str = "step") -> int | None:
    """The number after ``word`` in ``text`` ("NaN at step 12" -> 12); None if none."""
    found = re.search(rf"\b{word}\s+(-?\d[\d,]*)", text or "")
    return int(found.group(1).replace(",", "")) if found else None
