"""Run > Explore the run's network: a copy of the lab's coordinate network, handed over by
the run's worker between steps, explored in the Jacobian explorer (offscreen, real runs)."""
# The shared fixtures are imported by name, which pyflakes reads as a redefinition:
# ruff: noqa: F811

from __future__ import annotations

import numpy as np
import pytest
from fixtures_app import (  # noqa: F401 - fixtures
    RUN_TIMEOUT_MS,
    isolated_settings,
    make_lab,
    small,
)

from gradviz.gui.run.session import RunState

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pyqtgraph")

EXPLORE_TIMEOUT_MS = 120_000


def _recording_factory(runs: list):
    from gradviz.gui.run.worker import default_run_factory

    def factory(config):
        run = default_run_factory(config)
        runs.append(run)
        return run

    return factory


def _explore_and_wait(qtbot, lab) -> None:
    explorer = lab.explorer
    lab.window.actions["explore_network"].trigger()
    qtbot.waitUntil(
        lambda: "coordinate network of the run" in explorer.network_label(),
        timeout=EXPLORE_TIMEOUT_MS,
    )
    assert lab.window.pages.current() == 1
    qtbot.waitUntil(
        lambda: explorer.result is not None and explorer.result.label == explorer.network_label(),
        timeout=EXPLORE_TIMEOUT_MS,
    )
    assert explorer.last_error == ""


def _weights(module) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def test_exploring_a_paused_runs_network_shows_a_copy_of_its_trained_weights(qtbot, make_lab):
    runs: list = []
    lab = make_lab(small("safe", net="8-16-3:tanh"), run_factory=_recording_factory(runs))
    assert lab.window.actions["explore_network"].isEnabled()
    lab.start()
    qtbot.waitUntil(lambda: lab.session.latest.step >= 5, timeout=RUN_TIMEOUT_MS)
    lab.pause()
    worker = lab.session.worker
    qtbot.waitUntil(worker.idle.is_set, timeout=RUN_TIMEOUT_MS)
    _explore_and_wait(qtbot, lab)
    explorer = lab.explorer
    step = lab.session.latest.step
    assert f"step {step:,}" in explorer.network_label()
    assert explorer.result.jacobians.shape[1:] == (3, 8)
    run = runs[-1]
    expected = _weights(run.model)  # the run is paused: its weights hold still
    shown = _weights(explorer._network.module)
    assert shown.keys() == expected.keys()
    for name in expected:
        np.testing.assert_array_equal(shown[name], expected[name])
    # A copy, not the run's own tensors: training on changes nothing in the explorer.
    assert all(
        p.data_ptr() != q.data_ptr()
        for p, q in zip(explorer._network.module.parameters(), run.model.parameters(), strict=True)
    )
    lab.start()
    qtbot.waitUntil(lambda: lab.session.latest.step >= step + 5, timeout=RUN_TIMEOUT_MS)
    for name, value in _weights(explorer._network.module).items():
        np.testing.assert_array_equal(value, shown[name])


def test_exploring_while_running_and_after_the_run_finished(qtbot, make_lab):
    lab = make_lab(small("safe", net="8-16-3:tanh", steps=400))
    lab.start()
    qtbot.waitUntil(lambda: lab.session.latest.step >= 3, timeout=RUN_TIMEOUT_MS)
    _explore_and_wait(qtbot, lab)  # answered between two steps of the running loop
    qtbot.waitUntil(lambda: lab.session.state is RunState.FINISHED, timeout=RUN_TIMEOUT_MS)
    lab.window.pages.show_page(0)
    assert lab.window.actions["explore_network"].isEnabled()
    _explore_and_wait(qtbot, lab)
    assert "step 400" in lab.explorer.network_label()


def test_explore_the_runs_network_is_off_for_free_coordinates(qtbot, make_lab):
    lab = make_lab(small("safe"))
    assert not lab.window.actions["explore_network"].isEnabled()
    lab.start()
    qtbot.waitUntil(lambda: lab.session.latest.step >= 2, timeout=RUN_TIMEOUT_MS)
    assert not lab.window.actions["explore_network"].isEnabled()
