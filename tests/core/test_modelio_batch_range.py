"""A .pt2 exported with a dynamic batch (``Dim("batch", min=..., max=...)``) keeps its range:
a batch inside it runs as it is, any other in chunks within it (as a fixed batch runs in
chunks of its size), the assumptions say the range, and the Jacobians are the live
module's at every batch size."""

import json

import numpy as np
import pytest
import torch

from gradviz.cli import main
from gradviz.core.modelio import inspect_model
from gradviz.core.modelio.guard import InBatchRange

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")


def exported(tmp_path, lowest, highest):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))
    net = net.double().eval()
    batch = torch.export.Dim("batch", min=lowest, max=highest)
    example = torch.randn(3, 2, dtype=torch.float64)
    program = torch.export.export(net, (example,), dynamic_shapes=[{0: batch}])
    path = tmp_path / "dynamic.pt2"
    torch.export.save(program, path)
    return path, net


@pytest.mark.parametrize("batch", [1, 5, 20])
def test_a_dynamic_batch_gives_exact_jacobians_inside_and_outside_its_range(
    capsys, tmp_path, batch
):
    path, net = exported(tmp_path, 2, 8)
    x = torch.randn(batch, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    np.save(tmp_path / "x.npy", x.numpy())
    argv = ["jacobian", "--model", str(path), "--trust", "--inputs", f"file:{tmp_path / 'x.npy'}"]
    argv += ["--dtype", "float64", "--out", str(tmp_path / "j.npy"), "--json"]
    assert main(argv) == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["batch"] == batch
    assert any("exported for batches of 2 to 8 inputs" in s for s in summary["assumptions"])
    expected = torch.func.vmap(torch.func.jacrev(lambda v: net(v[None])[0]))(x).detach()
    np.testing.assert_allclose(np.load(tmp_path / "j.npy"), expected.numpy(), atol=1e-12)


def test_inspect_says_the_range_and_an_open_ended_range_says_its_lower_end(tmp_path, capsys):
    path, _ = exported(tmp_path, 2, 64)
    assert main(["inspect", str(path), "--trust"]) == 0
    out = capsys.readouterr().out
    assert "exported for batches of 2 to 64 inputs" in out
    path, _ = exported(tmp_path, 3, None)
    (note,) = inspect_model(path, trust=True).assumptions
    assert note.startswith("The program was exported for batches of 3 or more inputs")
    path, _ = exported(tmp_path, None, None)  # any batch: nothing to say
    assert inspect_model(path, trust=True).assumptions == ()


@pytest.mark.parametrize(("lowest", "highest"), [(2, 64), (3, None), (None, None), (3, 3)])
def test_an_untrusted_description_says_the_batches_the_trusted_program_says(
    tmp_path, capsys, lowest, highest
):
    """Read from the archive's JSON before trust (nothing runs): the same sentence as the
    loaded program's, for a range, an open end, any batch (nothing) and a fixed batch."""
    if (lowest, highest) == (3, 3):  # exported without dynamic_shapes: exactly its example's
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(2, 3)).double().eval()
        path = tmp_path / "fixed.pt2"
        example = (torch.randn(3, 2, dtype=torch.float64),)
        torch.export.save(torch.export.export(net, example), path)
    else:
        path, _ = exported(tmp_path, lowest, highest)
    untrusted = inspect_model(path).assumptions
    assert untrusted == inspect_model(path, trust=True).assumptions
    assert len(untrusted) == (0 if lowest is None else 1)
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert all(f"assumed: {note}" in out for note in untrusted)


class Recorder(torch.nn.Module):
    """Doubles its input and records the batch size of each call."""

    def __init__(self):
        super().__init__()
        self.sizes = []

    def forward(self, x):
        self.sizes.append(x.shape[0])
        return 2 * x


@pytest.mark.parametrize(
    ("batch", "calls"),
    [(5, [5]), (2, [2]), (8, [8]), (1, [2]), (20, [8, 8, 4]), (17, [8, 8, 2])],
)
def test_a_batch_inside_the_range_runs_as_it_is_and_any_other_in_chunks_within_it(batch, calls):
    inner = Recorder()
    x = torch.arange(float(batch * 2)).reshape(batch, 2)
    y = InBatchRange(inner, 2, 8)(x)
    assert inner.sizes == calls
    torch.testing.assert_close(y, 2 * x, rtol=0, atol=0)
