"""Trusted programs run in a process of their own, within a time and a memory limit: one
that loops forever or allocates far too much is stopped with one sentence, and one that
behaves gives the same Jacobians as the program run in this process."""

from __future__ import annotations

import warnings

import pytest
import torch

from gradviz.core.common.errors import GradvizError
from gradviz.core.explorer.histograms import parameter_gradient_histograms
from gradviz.core.explorer.input_gradients import input_gradients
from gradviz.core.modelio import inspect_model, load_model
from gradviz.core.nets.jacobians import compute_jacobians, full_batch_jacobian
from gradviz.core.settings.program_limits import ProgramLimits


class Forever(torch.nn.Module):
    """A program whose forward never returns."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        steps = 1
        while steps > 0:  # 2**63 steps: never ends (a loop whose result is unused is dropped)
            steps = steps + 1
        return self.fc(x) * steps


class Greedy(torch.nn.Module):
    """A program whose forward asks for 1.5 GiB (402,653,184 float32 numbers)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) + torch.ones([402653184]).sum()


class Mixer(torch.nn.Module):
    """A program that mixes samples (a batch mean), so that gradviz's probe falls back to
    the diagonal blocks (batched backward passes)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(3, 5)
        self.fc2 = torch.nn.Linear(5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.fc1(x))
        return self.fc2(h - 0.5 * h.mean(dim=0, keepdim=True))


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("programs")
    torch.manual_seed(0)
    with warnings.catch_warnings():  # torch.jit.script says it is deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)  # newer torch says FutureWarning
        for name, module in (("forever", Forever()), ("greedy", Greedy()), ("mixer", Mixer())):
            torch.jit.script(module).save(str(folder / f"{name}.pt"))
    return folder


def test_a_program_that_loops_forever_is_stopped_at_the_time_limit(programs):
    with pytest.raises(GradvizError) as caught:
        load_model(programs / "forever.pt", trust=True, in_dim=2, limits=ProgramLimits(2.0))
    assert str(caught.value) == (
        "The program in forever.pt ran past the 2 s limit and was stopped (--time-limit)."
    )


def test_a_program_that_asks_for_too_much_memory_is_stopped_at_the_memory_limit(programs):
    # 1.5 GiB is far below this machine's memory: only the 1 GiB limit stops it.
    limits = ProgramLimits(time_limit=60.0, memory_limit=1.0)
    with pytest.raises(GradvizError) as caught:
        load_model(programs / "greedy.pt", trust=True, in_dim=2, limits=limits)
    assert str(caught.value) == (
        "The program in greedy.pt asked for more than 1 GiB and was stopped (--memory-limit)."
    )


@pytest.mark.filterwarnings(
    r"ignore:`torch\.jit\.load` is deprecated:DeprecationWarning",
    r"ignore:`torch\.jit\.load` is deprecated:FutureWarning",
)
def test_a_program_in_its_process_gives_the_jacobians_of_the_program_run_here(programs):
    """Per-sample Jacobians (the blocks fallback included), the full batch Jacobian, the
    saliency's backward pass and the parameter-gradient histograms, against the same program
    loaded here, in float64."""
    path = programs / "mixer.pt"
    loaded = load_model(path, trust=True, in_dim=3)
    assert (loaded.info.in_dim, loaded.info.out_dim) == (3, 2)
    remote = loaded.module.to(torch.float64)
    here = torch.jit.load(str(path)).double().eval()
    x = torch.randn(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))

    got, want = compute_jacobians(remote, x), compute_jacobians(here, x, "loop")
    assert got.method == "blocks" and got.jacobians.dtype == torch.float64
    torch.testing.assert_close(got.jacobians, want.jacobians, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got.outputs, want.outputs, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(
        full_batch_jacobian(remote, x), full_batch_jacobian(here, x), rtol=1e-12, atol=1e-12
    )
    saliency = input_gradients(remote, x, output=1)
    reference = input_gradients(here, x, output=1)
    torch.testing.assert_close(saliency.values, reference.values, rtol=1e-12, atol=1e-12)
    # The explorer's parameter-gradient histograms: the parameters live in that process.
    got_hists = parameter_gradient_histograms(remote, x, "sum")
    want_hists = parameter_gradient_histograms(here, x, "sum")
    assert [h.name for h in got_hists] == ["inner." + h.name for h in want_hists]
    for got_hist, want_hist in zip(got_hists, want_hists, strict=True):
        assert (got_hist.counts == want_hist.counts).all()


def test_describing_a_trusted_program_also_runs_it_within_the_limits(programs):
    info = inspect_model(programs / "mixer.pt", trust=True, limits=ProgramLimits(30.0))
    assert [layer.name for layer in info.layers] == ["fc1", "fc2"]


def test_a_failed_allocation_within_the_limit_is_not_blamed_on_the_limit():
    from gradviz.core.modelio.program_process import memory_sentence

    limits = ProgramLimits(memory_limit=8.0)
    gib = 1 << 30
    assert memory_sentence("a.pt", limits, 64 * gib, gib) == (
        "The program in a.pt asked for more than 8 GiB and was stopped (--memory-limit)."
    )
    assert memory_sentence("a.pt", limits, None, gib).startswith("The program in a.pt asked")
    assert memory_sentence("a.pt", limits, 2 * gib, gib) == (
        "The program in a.pt ran out of memory asking for 2 GiB with 1 GiB held, below the "
        "8 GiB limit (--memory-limit): this machine had no more to give, and the process was "
        "stopped."
    )


def test_limits_out_of_range_are_refused_in_one_sentence():
    from gradviz.core.settings.table import check_settings

    with pytest.raises(GradvizError, match="between 0.5 and 4096"):
        check_settings(ProgramLimits(memory_limit=0.1))
