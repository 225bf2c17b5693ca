"""Shared GUI fixtures: hand-built Snapshots and the live views in a shown window."""

from __future__ import annotations

import pytest

from gradviz.gui.widgets.synthetic import synthetic_snapshot


@pytest.fixture
def make_snapshot():
    """Factory for Snapshots built with numpy: ``make_snapshot(n=64, nan_diagonal=True)``.

    Keywords as ``gradviz.gui.widgets.synthetic.synthetic_snapshot``; change single fields
    with ``dataclasses.replace(snapshot, distances=...)``.
    """
    return synthetic_snapshot


@pytest.fixture
def fit_views(qtbot):
    """LabViews with all its widgets shown in one window (offscreen), 1600 x 900."""
    from gradviz.bench.gui_views import views_window
    from gradviz.gui.run.views import LabViews

    views = LabViews()
    window = views_window(views)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    views.window = window  # keeps the window alive as long as the views
    return views


@pytest.fixture(autouse=True)
def garbage_collected_on_the_gui_thread(qapp):
    """As in the app: cyclic garbage is collected on the GUI thread only, never by a worker
    thread that happens to allocate (Qt objects destroyed there crash later). Each test's
    garbage is collected here, so it cannot be destroyed during another test.

    What survives the collection is then frozen (``gc.freeze``): with torch, dynamo and Qt
    loaded a full collection walks ~360,000 objects (0.5 s), and without the freeze every
    test's teardown (and every collection the timer makes) walked them all again. A test's
    own objects are made after the freeze, so they are still collected, and leak checks that
    count them still see them."""
    import gc

    from gradviz.gui.shell.app import collect_garbage_on_gui_thread

    collect_garbage_on_gui_thread()
    yield
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def no_thread_left_behind():
    """Fail a test that leaves a Python thread of its own running (e.g. the torch loader).

    QThreads are checked by the tests themselves (``thread_count == 0``, ``worker_running``)."""
    import threading
    import time

    before = {t.ident for t in threading.enumerate()}
    yield
    deadline = time.monotonic() + 10.0
    while True:
        left = [
            t
            for t in threading.enumerate()
            if t.ident not in before
            and t.is_alive()
            and not isinstance(t, threading._DummyThread)  # foreign threads never "end"
        ]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not left, f"threads left running: {[t.name for t in left]}"
