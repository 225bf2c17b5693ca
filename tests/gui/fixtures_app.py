"""Fixtures for the app tests: a real window, real views and real runs, isolated settings.

Import in a test module with ``from fixtures_app import isolated_settings, lab, make_lab, small``
(pytest puts this folder on ``sys.path``; the package ``tests`` is not importable).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gradviz.core.settings.config import FitConfig

LOAD_TIMEOUT_MS = 120_000  # torch imports in ~2-10 s on a shared machine: be generous
RUN_TIMEOUT_MS = 60_000


@pytest.fixture
def isolated_settings(tmp_path, monkeypatch) -> Any:
    """Settings and log in this test's temp dir (never the user's, never another test's)."""
    monkeypatch.setenv("GRADVIZ_SETTINGS_FILE", str(tmp_path / "settings.ini"))
    monkeypatch.setenv("GRADVIZ_LOG_FILE", str(tmp_path / "gradviz.log"))
    return tmp_path


@pytest.fixture
def lab(qtbot, isolated_settings) -> Iterator[Any]:
    """The real window and controller, shown, without loading torch (recordings need none);
    shut down afterwards."""
    from gradviz.gui.shell.app import build_controller

    controller = build_controller(log_path=str(isolated_settings / "gradviz.log"))
    controller.window.show()
    qtbot.waitExposed(controller.window)
    yield controller
    controller.shutdown()
    controller.window.close()
    controller.window.deleteLater()


@pytest.fixture
def make_lab(qtbot, isolated_settings) -> Iterator[Callable[..., Any]]:
    """Build the real app (window, views, controller), show it and wait for torch.

    ``make_lab(config, run_factory=None, wait_ready=True)``; questions are answered yes
    (``controller.confirm`` replaced) so no modal box ever blocks a test.
    """
    from gradviz.gui.shell.app import build_controller

    made = []

    def make(config: FitConfig | None = None, run_factory: Any = None, wait_ready: bool = True):
        controller = build_controller(
            config, run_factory=run_factory, log_path=str(isolated_settings / "gradviz.log")
        )
        controller.questions = []

        def confirm(title: str, question: str) -> bool:
            controller.questions.append(title)
            return controller.answer

        controller.answer = True
        controller.confirm = confirm
        made.append(controller)
        controller.window.show()
        controller.start_loading()
        if wait_ready:
            qtbot.waitUntil(lambda: controller.torch_ready, timeout=LOAD_TIMEOUT_MS)
            # Reset after loading shows step 0 of a paused run.
            qtbot.waitUntil(lambda: controller.session.latest is not None, timeout=RUN_TIMEOUT_MS)
        return controller

    yield make
    for controller in made:
        controller.shutdown()
        assert controller.thread_count == 0
        controller.window.close()
        controller.window.deleteLater()


def small(method: str = "safe", **changes: Any) -> FitConfig:
    """A quick experiment: 24 points of a 3-D helix."""
    base = dict(target="helix", n=24, dim=3, method=method, lr=0.01, steps=100_000, seed=1)
    base.update(changes)
    return FitConfig(**base)
