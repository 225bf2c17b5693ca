"""torch's TorchScript deprecation notices go to the log, never to the user; gradviz's own
handling of TorchScript modules raises no torch warnings on any supported torch."""

from __future__ import annotations

import logging
import warnings

import pytest
import torch

from gradviz.core.common.torch_notices import torch_deprecations_logged
from gradviz.core.explorer.histograms import parameter_gradients
from gradviz.core.nets.networks import module_copy

jit_deprecated = pytest.mark.filterwarnings(
    r"ignore:`torch\.jit\.script` is deprecated:DeprecationWarning",
    r"ignore:`torch\.jit\.script` is deprecated:FutureWarning",
)


@pytest.mark.parametrize("category", [DeprecationWarning, FutureWarning])
def test_torch_deprecation_notice_is_logged_not_shown(caplog, category):
    with caplog.at_level(logging.INFO, logger="gradviz.torch"), torch_deprecations_logged():
        warnings.warn(
            "`torch.jit.load` is deprecated. Please switch to torch.export.", category, stacklevel=1
        )
    assert "torch.jit.load" in caplog.text and category.__name__ in caplog.text


def test_other_warnings_raised_in_the_block_still_reach_the_caller():
    with pytest.warns(UserWarning, match="something else"), torch_deprecations_logged():
        warnings.warn("something else", UserWarning, stacklevel=1)


def test_notices_raised_before_an_error_are_still_logged(caplog):
    with (
        caplog.at_level(logging.INFO, logger="gradviz.torch"),
        pytest.raises(RuntimeError),
        torch_deprecations_logged(),
    ):
        warnings.warn("`torch.jit.script` is deprecated.", FutureWarning, stacklevel=1)
        raise RuntimeError("the load failed")
    assert "torch.jit.script" in caplog.text


@jit_deprecated
def test_copy_of_a_torchscript_module_has_leaf_parameters_and_the_same_gradients():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    scripted = torch.jit.script(net)
    # filterwarnings=error: the non-leaf .grad warning torch gives for a plain deepcopy fails.
    copied = module_copy(scripted, torch.float64)
    assert all(p.is_leaf and p.requires_grad for p in copied.parameters())
    assert all(p.dtype == torch.float32 for p in scripted.parameters())  # original untouched
    x = torch.randn(4, 2, dtype=torch.float64)
    got = parameter_gradients(copied, x)
    reference = parameter_gradients(net.to(torch.float64), x)
    for name, grad in reference.items():
        torch.testing.assert_close(got[name], grad)
