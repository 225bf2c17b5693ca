"""Explorer jobs on inputs with a shape of their own (B, *in_shape): the batches, the
flattened Jacobian views and the saliency above the Jacobian limit, and the sample shape of
a model loaded in the user's own class."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gradviz.core.common.errors import GradvizError
from gradviz.core.explorer.batches import InputSettings, make_inputs, parse_sample_shape
from gradviz.core.explorer.input_gradients import input_gradients
from gradviz.core.explorer.jobs import ExplorerJob, ExplorerResult, SaliencyResult, run_job
from gradviz.core.modelio import load_model
from gradviz.core.modelio.input_shape import with_input_shape


def cnn(classes: int, side: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Tanh(), torch.nn.Flatten(),
        torch.nn.Linear(4 * side * side, classes),
    ).double().eval()  # fmt: skip


def per_sample_jacobians(module, x: np.ndarray) -> np.ndarray:
    """Independent reference: torch.func on each sample as a batch of one, float64."""
    one = lambda sample: module(sample[None])[0]  # noqa: E731
    return torch.func.vmap(torch.func.jacrev(one))(torch.as_tensor(x)).detach().numpy()


def test_random_and_npy_batches_keep_the_models_sample_shape(tmp_path):
    random = make_inputs(InputSettings(kind="random", batch=3, seed=4), 48, (3, 4, 4))
    assert random.shape == (3, 3, 4, 4)
    batch = np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", batch)
    read = make_inputs(InputSettings(kind="file", path=str(tmp_path / "x.npy")), 48, (3, 4, 4))
    np.testing.assert_array_equal(read, batch.astype(np.float64))
    with pytest.raises(GradvizError, match=r"samples of shape \(3, 4, 4\) but the model takes"):
        make_inputs(InputSettings(kind="file", path=str(tmp_path / "x.npy")), 75, (3, 5, 5))
    with pytest.raises(GradvizError, match="The grid needs a model with inputs of shape"):
        make_inputs(InputSettings(kind="grid"), 48, (3, 4, 4))


def test_image_samples_read_by_the_app_are_checked_against_the_sample_shape():
    image = np.zeros((1, 3, 4, 4))
    assert make_inputs(InputSettings(kind="image", samples=image), 48, (3, 4, 4)).shape == (
        1, 3, 4, 4,
    )  # fmt: skip
    flat = make_inputs(InputSettings(kind="image", samples=image), 48)  # an MLP of width 48
    assert flat.shape == (1, 48)
    with pytest.raises(GradvizError, match="Choose an image file"):
        make_inputs(InputSettings(kind="image"), 48, (3, 4, 4))


def test_a_small_per_sample_jacobian_is_flattened_for_every_view():
    module = cnn(classes=5, side=4)
    job = ExplorerJob(
        "cnn", 48, 5, InputSettings(batch=3, seed=1), module=module, dtype="float64",
        in_shape=(3, 4, 4),
    )  # fmt: skip
    result = run_job(job)
    assert isinstance(result, ExplorerResult) and result.jacobians.shape == (3, 5, 48)
    x = result.inputs.reshape(3, 3, 4, 4)
    expected = per_sample_jacobians(module, x).reshape(3, 5, 48)
    np.testing.assert_allclose(result.jacobians, expected, rtol=1e-12, atol=1e-14)
    assert result.full is not None and result.max_off_block == 0.0
    assert "shape (B, n)" in result.field_note


def test_above_the_jacobian_limit_the_explorer_gets_the_saliency_core_computes():
    module = cnn(classes=300, side=34)  # 300 x 3468 entries per sample: over a million
    job = ExplorerJob(
        "cnn", 3468, 300, InputSettings(batch=2, seed=2), module=module, dtype="float64",
        in_shape=(3, 34, 34),
    )  # fmt: skip
    result = run_job(job)
    assert isinstance(result, SaliencyResult) and result.in_shape == (3, 34, 34)
    x = torch.as_tensor(result.inputs)
    expected = input_gradients(module, x)
    np.testing.assert_array_equal(result.explained, expected.explained.numpy())
    np.testing.assert_allclose(result.values, expected.values.numpy(), rtol=1e-12)
    np.testing.assert_allclose(result.grad_x_input, result.values * result.inputs, rtol=1e-12)
    # The largest output's gradient is row k of the per-sample Jacobian (independent check).
    full = per_sample_jacobians(module, result.inputs)
    for b, k in enumerate(result.explained):
        np.testing.assert_allclose(result.values[b], full[b, k], rtol=1e-10, atol=1e-14)


def test_sample_shapes_are_parsed_as_the_cli_does():
    assert parse_sample_shape("3, 32,32") == (3, 32, 32)
    assert parse_sample_shape("3x8") == (3, 8) and parse_sample_shape(" ") is None
    with pytest.raises(GradvizError, match="The input shape takes positive sizes"):
        parse_sample_shape("3,0")


def test_a_model_class_takes_the_first_layers_width_or_the_shape_given(tmp_path):
    code = tmp_path / "nets.py"
    code.write_text(
        "import torch\n"
        "class Mlp(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.a = torch.nn.Linear(6, 4)\n"
        "    def forward(self, x):\n"
        "        return self.a(x)\n"
    )
    torch.save({"a.weight": torch.ones(4, 6), "a.bias": torch.zeros(4)}, tmp_path / "w.pt")
    loaded = load_model(tmp_path / "w.pt", trust=True, model_class=f"{code}:Mlp")
    guessed = with_input_shape(loaded, None).info
    assert (guessed.in_shape, guessed.in_dim, guessed.out_dim) == ((6,), 6, 4)
    assert "taken from the first 2-D weight" in guessed.assumptions[-1]
    with pytest.raises(GradvizError, match=r"failed on inputs of shape \(2, 3\)"):
        with_input_shape(loaded, (3,))
