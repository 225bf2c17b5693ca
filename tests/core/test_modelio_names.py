"""What a name in a pickle is, is decided by how the pickle uses it, never by its spelling:
a whole module of any class (``net_x`` as the tutorials spell it) opens as a tree of inert
stand-ins, a TorchScript program of any class reaches the trust question, and a call of a
name outside the allow-list is refused whatever its spelling."""

import copyreg
import importlib.util
import io
import json
import pickle
import sys
import textwrap

import numpy as np
import pytest
import torch

from gradviz.cli import main
from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio import inspect_model, load_model
from gradviz.core.modelio.pickle_scan import scan_pickle

jit_deprecated = pytest.mark.filterwarnings(
    r"ignore:`torch\.jit\.(script|trace|trace_method|save)` is deprecated"
)

NET_X_PY = textwrap.dedent(
    """
    import torch

    class net_x(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(2, 20)
            self.fc2 = torch.nn.Linear(20, 20)
            self.out = torch.nn.Linear(20, 4)

        def forward(self, x):
            return self.out(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))
    """
)


@pytest.fixture(scope="module")
def net_x(tmp_path_factory):
    """(the class's file, the live module, its whole pickle), the pickle written while the
    class's module was importable and read after it is gone, as in another process."""
    folder = tmp_path_factory.mktemp("net_x")
    source = folder / "net_x_module.py"
    source.write_text(NET_X_PY)
    spec = importlib.util.spec_from_file_location("net_x_private_module", source)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    net = module.net_x().double().eval()
    path = folder / "whole.pt"
    torch.save(net, path)
    del sys.modules[spec.name]
    return source, net, path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def live_jacobian(model, x):
    one = lambda v: model(v[None])[0]  # noqa: E731
    return torch.func.vmap(torch.func.jacrev(one))(x).detach()


def x_batch(tmp_path):
    x = torch.randn(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    np.save(tmp_path / "x.npy", x.numpy())
    return x, f"file:{tmp_path / 'x.npy'}"


def test_a_whole_module_of_a_lower_case_class_is_listed_and_asks_for_its_order(capsys, net_x):
    _, _, path = net_x
    info = inspect_model(path)
    assert info.format == "pickled_module" and "net_x_private_module.net_x" in info.classes
    assert [(layer.name, layer.kind) for layer in info.layers] == [
        ("fc1", "Linear"),
        ("fc2", "Linear"),
        ("out", "Linear"),
    ]
    assert info.order_to_confirm == ("fc1 (Linear)", "fc2 (Linear)", "out (Linear)")
    assert "net_x_private_module" not in sys.modules  # nothing was imported
    code, _, err = run(capsys, "jacobian", "--model", path, "--batch", "2")
    assert code == 2 and "--assume-sequential" in err and "code the file would run" not in err


def test_a_whole_lower_case_module_runs_in_the_confirmed_order_with_the_activation(
    capsys, tmp_path, net_x
):
    _, net, path = net_x
    x, given = x_batch(tmp_path)
    code, out, err = run(
        capsys, "jacobian", "--model", path, "--inputs", given, "--assume-sequential",
        "--activation", "tanh", "--dtype", "float64", "--out", tmp_path / "j.npy", "--json",
    )  # fmt: skip
    assert code == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert any("forward order was assumed" in s for s in summary["assumptions"])
    np.testing.assert_allclose(np.load(tmp_path / "j.npy"), live_jacobian(net, x), atol=1e-6)


def test_a_whole_lower_case_module_runs_exactly_in_its_own_class(capsys, tmp_path, net_x):
    source, net, path = net_x
    x, given = x_batch(tmp_path)
    code, out, err = run(
        capsys, "jacobian", "--model", path, "--inputs", given, "--trust",
        "--model-class", f"{source}:net_x", "--dtype", "float64", "--out", tmp_path / "j.npy",
        "--json",
    )  # fmt: skip
    assert code == 0, err
    np.testing.assert_allclose(np.load(tmp_path / "j.npy"), live_jacobian(net, x), atol=1e-12)


@jit_deprecated
@pytest.mark.parametrize("class_name", ["net_x", "netx", "NetX"])
def test_torchscript_of_any_class_name_reaches_the_trust_question(
    tmp_path, monkeypatch, class_name
):
    source = tmp_path / f"scripted_{class_name}.py"  # TorchScript reads a class's source
    source.write_text(NET_X_PY.replace("class net_x(", f"class {class_name}("))
    # Defined in a script (``__main__``), as in the tutorials: TorchScript names the class
    # ``__torch__.net_x``, at the top of its own namespace.
    spec = importlib.util.spec_from_file_location("__main__", source)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "__main__", module)
    spec.loader.exec_module(module)
    path = tmp_path / f"{class_name}.pt"
    torch.jit.save(torch.jit.script(getattr(module, class_name)()), path)
    info = inspect_model(path)
    assert info.format == "torchscript" and info.needs_trust
    assert f"__torch__.{class_name}" in info.classes
    with pytest.raises(GradvizError, match="--trust"):
        load_model(path)
    loaded = load_model(path, trust=True, in_dim=2)
    assert (loaded.info.in_dim, loaded.info.out_dim) == (2, 4)


class _Hostile:
    def __reduce__(self):
        return (net_x_call, ())


def net_x_call():  # a lower-case function: called by the pickle, so refused
    raise AssertionError("ran")


def test_a_call_of_a_name_outside_the_allow_list_is_refused_whatever_its_spelling():
    data = pickle.dumps({"w": _Hostile()}, protocol=2)
    with pytest.raises(GradvizError, match="net_x_call.*code the file would run"):
        scan_pickle(data, "f.pt")


class _Reconstructed:
    """Pickled as protocol 0 and 1 pickle an object: copyreg._reconstructor, then BUILD."""

    def __init__(self, base=object):
        self.base = base

    def __reduce_ex__(self, protocol):
        return (copyreg._reconstructor, (net_x_module_class, self.base, None), {"a": 1})


class net_x_module_class:  # noqa: N801 - the spelling under test
    pass


def test_a_class_made_by_copyregs_reconstructor_is_an_instance_not_a_call():
    scan = scan_pickle(pickle.dumps(_Reconstructed(), protocol=2), "f.pt")
    assert f"{__name__}.net_x_module_class" in scan.instantiated
    with pytest.raises(GradvizError, match="arguments other than a class and object"):
        scan_pickle(pickle.dumps(_Reconstructed(base=io.BytesIO), protocol=2), "f.pt")
