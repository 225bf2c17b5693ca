"""The Jacobian suite's fair baselines: they compute what gradviz computes, and the table and
its notes are derived from the measured times."""

from __future__ import annotations

import pytest
import torch

from gradviz.bench import jacobian_baselines as fair
from gradviz.core.nets.networks import NetworkSpec
from gradviz.core.ops import per_input_jacobians


def _reference(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """J (B, m, *in_shape) sample by sample with torch.autograd.functional.jacobian."""
    rows = [
        torch.autograd.functional.jacobian(lambda s: model(s.unsqueeze(0)).reshape(-1), sample)
        for sample in x
    ]
    return torch.stack(rows)


@pytest.mark.parametrize(
    "build, in_shape",
    [
        (lambda: NetworkSpec.parse("2-20-20-4:tanh").build(seed=0), (2,)),
        (fair.small_cnn, (1, 28, 28)),
    ],
    ids=["tiny MLP", "small CNN"],
)
def test_the_baselines_compute_the_jacobian_gradviz_computes(build, in_shape):
    model = build().double()
    x = torch.randn(5, *in_shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    ours = per_input_jacobians(model, x)
    m = model(x[:1]).numel()
    assert ours.shape == (5, m, *in_shape)
    reference = _reference(model, x)
    assert reference.abs().max() > 0  # a Jacobian worth comparing
    for baseline in (fair.per_sample_loop, fair.vmap_jacrev):
        theirs = baseline(model, x)
        assert theirs.shape == ours.shape
        torch.testing.assert_close(theirs, ours, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(theirs, reference, rtol=1e-10, atol=1e-12)


def test_the_notes_name_where_the_lead_is_largest_and_smallest_and_where_a_baseline_wins():
    ratios = {
        ("MLP", 64, "per-sample loop"): 80.0,
        ("CNN", 64, "per-sample loop"): 1.8,
        ("MLP", 64, "vmap(jacrev)"): 1.3,
        ("CNN", 64, "vmap(jacrev)"): 0.8,
        ("MLP", 64, "whole-batch loop"): 500.0,
        ("CNN", 64, "whole-batch loop"): 1.02,
    }
    assert fair.lead_notes(ratios) == [
        "against the per-sample loop, gradviz's lead is largest on MLP at B=64 (80.00x) and "
        "smallest on CNN at B=64 (1.80x)",
        "against vmap(jacrev), gradviz's lead is largest on MLP at B=64 (1.30x) and smallest "
        "on CNN at B=64 (0.80x: the baseline is faster there)",
        "against the whole-batch loop, gradviz's lead is largest on MLP at B=64 (500x) and "
        "smallest on CNN at B=64 (1.02x: even, within 5%)",
    ]
    # Where the control strayed by 30% on that net and batch, a 0.8x is within its noise.
    assert fair.lead_notes(ratios, {("CNN", 64): 1.3})[1].endswith("(0.80x: even, within 30%)")


def test_the_table_holds_each_measured_time_and_its_ratio_to_gradviz(monkeypatch):
    tiny = fair.Net("tiny", lambda: NetworkSpec.parse("2-3-2:tanh").build(seed=0), (2,), (), (8,))
    monkeypatch.setattr(fair, "NETS", (tiny,))
    lines = []
    figures, table = fair.measure(repeats=1, quick=True, emit=lines.append)
    (row,) = table["rows"]
    (result,) = figures["results"]
    assert row[:2] == ["tiny", 8] and result["batch"] == 8
    assert row[2:6] == [result["ms"][m] for m in fair.METHODS]
    assert all(ms > 0 for ms in row[2:6])
    assert row[6:9] == [row[3] / row[2], row[4] / row[2], row[5] / row[2]]
    assert row[6:9] == [result["ratio_to_gradviz"][m] for m in fair.METHODS[1:]]
    assert row[9] == result["control_ratio"] > 0  # gradviz timed twice
    assert table["notes"][0] == (
        f"control: gradviz timed a second time; its ratio to the first, {row[9]:.2f}x to "
        f"{row[9]:.2f}x, is this run's noise"
    )
    assert "  " + table["notes"][0] in lines
