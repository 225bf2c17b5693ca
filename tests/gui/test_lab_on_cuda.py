"""The lab's worker on a GPU: the default experiment and N = 3000 run on CUDA through the
real window, with the numbers of the same run headless (skipped without a CUDA device)."""
# The shared fixtures are imported by name, which pyflakes reads as a redefinition:
# ruff: noqa: F811

from __future__ import annotations

import numpy as np
import pytest
import torch
from fixtures_app import RUN_TIMEOUT_MS, isolated_settings, make_lab  # noqa: F401 - fixtures

from gradviz.core.lab.fit import DistanceFitRun
from gradviz.core.settings.config import FitConfig
from gradviz.gui.run.session import RunState

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def test_the_default_experiment_runs_on_cuda_in_the_lab_as_it_does_headless(qtbot, make_lab):
    config = FitConfig(steps=100, device="cuda", dtype="float64")  # else the default one
    lab = make_lab(config)
    lab.start()
    qtbot.waitUntil(lambda: lab.session.state is RunState.FINISHED, timeout=RUN_TIMEOUT_MS)
    shown = lab.session.latest
    assert shown.step == 100 and shown.device.startswith("cuda")
    assert shown.threads == "1 thread (auto: the step runs on cuda)"
    headless = DistanceFitRun(config)
    headless.run()
    np.testing.assert_allclose(shown.loss_history, headless.loss_history, rtol=1e-9)


def test_three_thousand_points_run_on_cuda_in_the_lab_and_reach_the_views(qtbot, make_lab):
    lab = make_lab(FitConfig(n=3000, steps=5, device="cuda"))
    lab.start()
    qtbot.waitUntil(lambda: lab.session.state is RunState.FINISHED, timeout=RUN_TIMEOUT_MS)
    shown = lab.session.latest
    assert shown.step == 5 and shown.device.startswith("cuda")
    assert isinstance(shown.distances, np.ndarray) and np.isfinite(shown.loss_history).all()
    assert lab.views.snapshot is shown
