"""Per-input Jacobians: every method against the loop reference, batch structure, fallback."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gradviz.core.common.errors import GradvizError
from gradviz.core.nets import jacobians as jm
from gradviz.core.nets.networks import NetworkSpec
from gradviz.core.settings.config import ACTIVATIONS, JACOBIAN_METHODS

ROOT = Path(__file__).resolve().parents[2]
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _net(text: str, seed: int = 0, dtype=torch.float64) -> torch.nn.Sequential:
    return NetworkSpec.parse(text).build(seed=seed, dtype=dtype)


def _inputs(batch: int, n: int, dtype=torch.float64, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, n, dtype=dtype, generator=torch.Generator().manual_seed(seed))


class MixesSamples(torch.nn.Module):
    """Linear -> BatchNorm (training mode: batch statistics) -> tanh -> Linear."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Sequential(
            torch.nn.Linear(2, 8), torch.nn.BatchNorm1d(8), torch.nn.Tanh(), torch.nn.Linear(8, 3)
        )

    def forward(self, x):
        return self.body(x)


class PerSampleCustom(torch.nn.Module):
    """Not a plain Sequential, but acts on each sample alone: auto must probe, then batchsum."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x):
        return torch.tanh(self.lin(x)) * x[:, :1]


def test_registry_agrees_with_config_names():
    assert jm.METHODS == JACOBIAN_METHODS


@settings(max_examples=8, deadline=None)
@given(
    hidden=st.lists(st.integers(1, 20), min_size=0, max_size=2),
    activation=st.sampled_from(ACTIVATIONS),
    batch=st.integers(1, 12),
    method=st.sampled_from(JACOBIAN_METHODS),
    seed=st.integers(0, 2**16),
)
def test_every_method_matches_the_loop_reference_in_float64(
    hidden, activation, batch, method, seed
):
    widths = [2, *hidden, 4]
    model = NetworkSpec.from_widths(widths, activation).build(seed=seed, dtype=torch.float64)
    x = _inputs(batch, 2, seed=seed)
    reference = jm.compute_jacobians(model, x, "loop").jacobians
    result = jm.compute_jacobians(model, x, method)
    assert result.jacobians.shape == (batch, 4, 2)
    torch.testing.assert_close(result.jacobians, reference, rtol=0, atol=1e-6)


@pytest.mark.parametrize("method", JACOBIAN_METHODS)
@pytest.mark.parametrize("text", ["2-20-20-4", "2-20-20-4:sigmoid", "2-20-20-4:relu"])
def test_each_method_matches_loop_on_the_issue_nets(text, method):
    model, x = _net(text, seed=5), _inputs(17, 2, seed=5)
    reference = jm.compute_jacobians(model, x, "loop")
    result = jm.compute_jacobians(model, x, method)
    torch.testing.assert_close(result.jacobians, reference.jacobians, rtol=0, atol=1e-6)
    torch.testing.assert_close(result.outputs, model(x).detach(), rtol=0, atol=1e-12)


def test_loop_reference_agrees_with_torch_autograd_functional_jacobian():
    model, x = _net("2-20-20-4:tanh", seed=2), _inputs(6, 2, seed=2)
    independent = torch.stack(
        [torch.autograd.functional.jacobian(lambda v: model(v[None])[0], row) for row in x]
    )
    loop = jm.compute_jacobians(model, x, "loop").jacobians
    torch.testing.assert_close(loop, independent, rtol=0, atol=1e-12)


def test_linear_net_is_constant_across_batch_and_sigmoid_net_is_not():
    x = _inputs(64, 2, dtype=torch.float32)
    linear = jm.compute_jacobians(_net("2-20-20-4", dtype=torch.float32), x)
    sigmoid = jm.compute_jacobians(_net("2-20-20-4:sigmoid", dtype=torch.float32), x)
    assert jm.constant_across_batch(linear.jacobians)
    assert not jm.constant_across_batch(sigmoid.jacobians)
    # The linear net's J is the product of its weight matrices.
    model = _net("2-20-20-4")
    product = model[2].weight @ model[1].weight @ model[0].weight
    stats = jm.batch_statistics(jm.compute_jacobians(model, _inputs(9, 2)).jacobians)
    assert stats.constant_across_batch
    torch.testing.assert_close(stats.mean, product.detach(), rtol=0, atol=1e-12)
    assert float(stats.std.max()) < 1e-14


def test_batch_statistics_mean_std_and_spread_per_entry():
    jac = torch.tensor([[[1.0, 4.0]], [[3.0, 4.0]]], dtype=torch.float64)  # (2, 1, 2)
    stats = jm.batch_statistics(jac)
    torch.testing.assert_close(stats.mean, torch.tensor([[2.0, 4.0]], dtype=torch.float64))
    torch.testing.assert_close(stats.std, torch.tensor([[1.0, 0.0]], dtype=torch.float64))
    torch.testing.assert_close(stats.spread, torch.tensor([[2.0, 0.0]], dtype=torch.float64))
    assert stats.tolerance == 8 * torch.finfo(torch.float64).eps * 4.0
    assert not stats.constant_across_batch
    assert not jm.constant_across_batch(torch.full((3, 1, 1), float("nan")))


@pytest.mark.parametrize("text", ["2-20-20-4", "2-20-20-4:sigmoid"])
def test_full_batch_jacobian_is_exactly_block_diagonal_for_per_sample_nets(text):
    model, x = _net(text), _inputs(7, 2)
    full = jm.full_batch_jacobian(model, x)
    assert full.shape == (7 * 4, 7 * 2)
    assert jm.max_off_block(full, 7, 4, 2) == 0.0
    blocks = full.reshape(7, 4, 7, 2)
    diagonal = torch.stack([blocks[b, :, b] for b in range(7)])
    torch.testing.assert_close(diagonal, jm.compute_jacobians(model, x, "loop").jacobians)


def test_full_batch_jacobian_refuses_batches_over_256():
    with pytest.raises(GradvizError, match="limited to 256 samples"):
        jm.full_batch_jacobian(_net("2-3-1"), _inputs(257, 2))


def test_batchnorm_in_training_mixes_samples_and_auto_falls_back_to_the_exact_blocks():
    model = MixesSamples().double().train()
    x = _inputs(10, 2)
    full = jm.full_batch_jacobian(model, x)
    assert jm.max_off_block(full, 10, 3, 2) > 1e-3

    result = jm.compute_jacobians(model, x)  # auto
    assert result.method == "blocks"
    assert "fell back" in result.reason and "mixes samples" in result.reason
    reference = jm.compute_jacobians(model, x, "loop").jacobians
    torch.testing.assert_close(result.jacobians, reference, rtol=0, atol=1e-12)
    # batchsum, asked for explicitly, is wrong here: that is why auto checks.
    wrong = jm.compute_jacobians(model, x, "batchsum").jacobians
    assert float((wrong - reference).abs().max()) > 1e-3


def test_batchnorm_fallback_handles_batches_spanning_several_chunks(monkeypatch):
    monkeypatch.setattr(jm, "_VJP_CHUNK_ELEMENTS", 3 * 10 * 5 * 4)  # 4 samples per chunk
    model, x = MixesSamples().double().train(), _inputs(10, 2)
    result = jm.compute_jacobians(model, x)
    torch.testing.assert_close(
        result.jacobians, jm.compute_jacobians(model, x, "loop").jacobians, rtol=0, atol=1e-12
    )


def test_vmapped_methods_explain_that_they_cannot_run_a_model_that_mixes_samples():
    model = MixesSamples().double().train()
    with pytest.raises(GradvizError, match="one sample at a time .* auto or loop"):
        jm.compute_jacobians(model, _inputs(5, 2), "jacrev")


def test_batchnorm_in_eval_mode_is_per_sample_and_auto_uses_batchsum_after_a_probe():
    model = MixesSamples().double().eval()
    x = _inputs(10, 2)
    result = jm.compute_jacobians(model, x)
    assert result.method == "batchsum" and "probe" in result.reason
    torch.testing.assert_close(
        result.jacobians, jm.compute_jacobians(model, x, "loop").jacobians, rtol=0, atol=1e-12
    )


def test_auto_probes_custom_modules_and_trusts_plain_sequentials_without_probing():
    custom, x = PerSampleCustom().double(), _inputs(6, 3)
    result = jm.compute_jacobians(custom, x)
    assert result.method == "batchsum" and "probe of 4 samples" in result.reason
    plain = jm.compute_jacobians(_net("2-20-4:tanh"), _inputs(6, 2))
    assert plain.method == "batchsum" and "every layer acts on each sample alone" in plain.reason


def test_auto_notices_mixing_in_one_direction_only():
    class RunningSum(torch.nn.Module):  # output b depends on inputs 0..b
        def forward(self, x):
            return torch.cumsum(x, dim=0)

    x = _inputs(6, 2)
    result = jm.compute_jacobians(RunningSum(), x)
    assert result.method == "blocks"
    torch.testing.assert_close(
        result.jacobians, jm.compute_jacobians(RunningSum(), x, "loop").jacobians
    )


def test_model_is_left_as_found_and_inputs_need_no_grad():
    model = MixesSamples().double().train()
    model.body[0].weight.requires_grad_(False)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = _inputs(8, 2)
    for method in ("auto", "loop", "batchsum"):
        jm.compute_jacobians(model, x, method)
    jm.full_batch_jacobian(model, x)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # BatchNorm stats too
    assert model.training and model.body[1].training
    assert not model.body[0].weight.requires_grad and model.body[3].weight.requires_grad
    assert all(p.grad is None for p in model.parameters())
    assert not x.requires_grad


def test_inputs_are_converted_to_the_model_dtype_and_work_under_no_grad():
    model = _net("2-5-3:gelu", dtype=torch.float64)
    with torch.no_grad():
        result = jm.compute_jacobians(model, _inputs(4, 2, dtype=torch.float32))
    assert result.jacobians.dtype == torch.float64 and result.jacobians.shape == (4, 3, 2)


@pytest.mark.parametrize("method", ["auto", "batchsum", "jacrev", "jacfwd"])
def test_float32_methods_agree_with_float64_loop(method):
    model32, model64 = _net("2-20-20-4:tanh", dtype=torch.float32), _net("2-20-20-4:tanh")
    x = _inputs(33, 2)
    reference = jm.compute_jacobians(model64, x, "loop").jacobians
    result = jm.compute_jacobians(model32, x.float(), method).jacobians
    assert result.dtype == torch.float32
    torch.testing.assert_close(result.double(), reference, rtol=1e-5, atol=1e-5)


def test_bad_inputs_and_methods_are_clear_errors():
    model = _net("2-3-1")
    with pytest.raises(GradvizError, match="B >= 1"):
        jm.compute_jacobians(model, torch.zeros(0, 2, dtype=torch.float64))
    with pytest.raises(GradvizError, match=r"inputs of shape \(4, 3\).*input width"):
        jm.compute_jacobians(model, torch.zeros(4, 3, dtype=torch.float64))
    with pytest.raises(GradvizError, match="Unknown Jacobian method 'fast'"):
        jm.compute_jacobians(model, _inputs(2, 2), "fast")
    with pytest.raises(GradvizError, match="floating point"):
        jm.compute_jacobians(model, torch.zeros(2, 2, dtype=torch.int64))


def test_gradient_field_matches_pointwise_jacobians_on_the_grid():
    model = _net("3-16-2:tanh", seed=4)
    base = torch.tensor([0.0, 0.5, 0.0], dtype=torch.float64)
    field = jm.gradient_field(
        model, 3, dims=(2, 0), base=base, x_range=(-1, 1), y_range=(0, 2), shape=(4, 5)
    )
    assert field.jacobians.shape == (4, 5, 2, 3) and field.outputs.shape == (4, 5, 2)
    row, col = 3, 1
    point = base.clone()
    point[2], point[0] = field.xs[col], field.ys[row]
    expected = jm.compute_jacobians(model, point[None], "loop").jacobians[0]
    torch.testing.assert_close(field.jacobians[row, col], expected, rtol=0, atol=1e-12)
    image = field.heatmap(1, 2)
    assert image.shape == (4, 5) and image.dtype == np.float32 and image.flags.c_contiguous
    assert image[row, col] == np.float32(expected[1, 2])
    with pytest.raises(GradvizError, match="two different input dimensions"):
        jm.gradient_field(model, 3, dims=(1, 1))


def test_auto_default_path_imports_neither_dynamo_nor_sympy():
    # torch.func transforms and forward mode import torch._dynamo (and sympy) on first use,
    # 1-2 s a CLI user would pay on every call; autograd given a cotangent tensor imports sympy.
    script = textwrap.dedent(
        """
        import sys, torch
        from gradviz.core.nets.jacobians import compute_jacobians
        from gradviz.core.nets.networks import NetworkSpec
        model = NetworkSpec.parse("2-20-20-4:tanh").build()
        result = compute_jacobians(model, torch.randn(64, 2))
        assert result.method == "batchsum", result.method
        loaded = [m for m in ("torch._dynamo", "sympy") if m in sys.modules]
        print(",".join(loaded))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


@CUDA
@pytest.mark.gpu
@pytest.mark.parametrize("method", JACOBIAN_METHODS)
def test_methods_on_cuda_match_cpu_loop(method):
    model = _net("2-20-20-4:tanh")
    x = _inputs(50, 2)
    reference = jm.compute_jacobians(model, x, "loop").jacobians
    result = jm.compute_jacobians(model.to("cuda"), x.to("cuda"), method)
    assert result.jacobians.device.type == "cuda"
    torch.testing.assert_close(result.jacobians.cpu(), reference, rtol=0, atol=1e-10)


@pytest.mark.parametrize("method", ["jacrev", "jacfwd"])
def test_vmapped_methods_give_the_same_jacobians_in_memory_bounded_chunks(monkeypatch, method):
    model, x = _net("2-20-20-4:tanh"), _inputs(30, 2)
    whole = jm.compute_jacobians(model, x, method).jacobians
    monkeypatch.setattr(jm, "_CHUNK_ELEMENTS", 20 * 4 * 7)  # 7 samples per chunk
    assert jm._vmap_chunk(model, x) == 7
    chunked = jm.compute_jacobians(model, x, method).jacobians
    torch.testing.assert_close(chunked, whole, rtol=0, atol=1e-12)
