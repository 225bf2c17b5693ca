"""The distance methods are one table: the settings' choices and explanations, the torch
functions and the memory estimate's coefficients are all read from it, in its order, so a
method cannot be offered by one and missing from another."""

import subprocess
import sys

import pytest
import torch

from gradviz.core.lab import distances, memory
from gradviz.core.settings import config
from gradviz.core.settings.distance_methods import DISTANCE_METHOD_TABLE
from gradviz.core.settings.table import find_setting

NAMES = [m.name for m in DISTANCE_METHOD_TABLE]


def test_every_list_of_methods_is_the_table_in_its_order():
    assert len(set(NAMES)) == len(NAMES) >= 6
    assert list(config.DISTANCE_METHODS) == NAMES
    assert list(distances.METHODS) == NAMES
    assert list(memory.STEP_MATRICES) == NAMES
    assert list(memory.CAPTURE_MATRICES) == NAMES
    # The setup form, the CLI's --method and experiment files offer the settings' choices.
    method = find_setting("method", (config.FitConfig,))
    assert list(method.info.choices) == NAMES


@pytest.mark.parametrize("method", DISTANCE_METHOD_TABLE, ids=lambda m: m.name)
def test_each_method_of_the_table_is_explained_computed_and_estimated(method):
    assert config.DISTANCE_METHODS[method.name] == method.explanation
    assert method.explanation.endswith(".") and "\n" not in method.explanation
    build = distances.METHODS[method.name]
    assert build.__name__ == method.name  # the function of its name, not another's
    x = torch.tensor([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]], dtype=torch.float64)
    d = build(x).distances
    expected = torch.tensor([[0.0, 5.0, 10.0], [5.0, 0.0, 5.0], [10.0, 5.0, 0.0]])
    torch.testing.assert_close(d, expected.double(), rtol=0, atol=1e-6)
    assert memory.STEP_MATRICES[method.name] == method.step_matrices
    assert memory.CAPTURE_MATRICES[method.name] == method.capture_matrices
    # One step holds at least what is kept between steps (the target, d and its gradient).
    assert method.step_matrices >= method.capture_matrices >= 3
    estimate = memory.estimate(config.FitConfig(method=method.name, n=100))
    assert estimate.step == int(method.step_matrices * 100 * 100 * 4)  # float32 entries


def test_the_table_and_the_settings_import_no_torch():
    code = (
        "import sys; import gradviz.core.settings.distance_methods, gradviz.core.settings.config;"
        "print([m for m in ('torch', 'numpy', 'PySide6') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
