"""``gradviz inspect MODEL --graph [--json]``: the graph as one JSON object on the last line,
refusals and failures as one sentence with exit 2."""

import json
import textwrap

import pytest
import torch

from gradviz.cli import main

NET_PY = textwrap.dedent(
    """
    import torch


    class Block(torch.nn.Module):
        def __init__(self, channels=3):
            super().__init__()
            self.conv = torch.nn.Conv2d(channels, channels, 3, padding=1)
            self.relu = torch.nn.ReLU()

        def forward(self, x):
            return self.relu(self.conv(x)) + x


    class Net(torch.nn.Module):
        def __init__(self, channels=3):
            super().__init__()
            self.block = Block(channels)
            self.fc = torch.nn.Linear(channels * 4 * 4, 2)

        def forward(self, x):
            return self.fc(self.block(x).flatten(1))


    class Broken(Net):
        def forward(self, x):
            raise RuntimeError("this model cannot run")
    """
)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """net.py (the classes), sd.pt (Net's state_dict), net.pt2 (Net exported)."""
    folder = tmp_path_factory.mktemp("graph")
    (folder / "net.py").write_text(NET_PY)
    namespace = {}
    exec(compile(NET_PY, str(folder / "net.py"), "exec"), namespace)
    torch.manual_seed(0)
    net = namespace["Net"]().eval()
    torch.save(net.state_dict(), folder / "sd.pt")
    program = torch.export.export(net, (torch.zeros(2, 3, 4, 4),))
    torch.export.save(program, folder / "net.pt2")
    return folder


def run(capsys, *args):
    code = main(["inspect", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def graph_json(out: str) -> dict:
    """``--json`` writes the graph alone: one compact JSON document on one line."""
    assert out.count("\n") == 1 and out.endswith("\n"), out[:200]
    assert out.startswith("{") and " " not in out.split('"notes"')[0][:40]  # compact
    return json.loads(out)


def skip_edge_into_add(data: dict) -> bool:
    nodes = {n["id"]: n for n in data["nodes"]}
    (add,) = [n for n in data["nodes"] if n["kind"] == "op" and n["name"] == "add"]
    into = [nodes[a] for a, b in data["edges"] if b == add["id"]]
    return add["module"] == "block" and sorted(n["name"] for n in into) == ["relu", "x"]


def test_a_pt2_files_graph_comes_from_its_program_after_trust(files, capsys):
    code, out, err = run(capsys, files / "net.pt2", "--graph", "--json")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "--trust" in err

    code, out, err = run(capsys, files / "net.pt2", "--graph", "--trust", "--json")
    assert code == 0, err
    data = graph_json(out)
    assert "graph from export" in run(capsys, files / "net.pt2", "--graph", "--trust")[1]
    assert set(data) >= {"nodes", "edges", "source"} and data["source"] == "export"
    assert skip_edge_into_add(data)
    assert {n["kind"] for n in data["nodes"]} == {"module", "op", "input", "output", "parameter"}
    assert all(n["health"] is None for n in data["nodes"])


def test_a_state_dicts_graph_is_names_only_and_says_so(files, capsys):
    code, out, err = run(capsys, files / "sd.pt", "--graph", "--json")
    assert code == 0, err
    data = graph_json(out)
    assert data["source"] == "names" and data["edges"] == []
    assert data["notes"][0].startswith("structure from names: the order and the connections")
    assert "structure from names" in out  # the summary says it too
    parents = {n["id"]: n["parent"] for n in data["nodes"]}
    assert parents["p:block.conv.weight"] == "m:block.conv" and parents["m:fc"] is None


def test_model_class_traces_the_users_class_on_the_input_shape(files, capsys):
    net = f"{files / 'net.py'}:Net"
    code, out, err = run(capsys, files / "sd.pt", "--graph", "--model-class", net)
    assert code == 2 and "--trust" in err

    code, out, err = run(capsys, files / "sd.pt", "--graph", "--trust", "--model-class", net)
    assert code == 2 and "--input-shape" in err and len(err.strip().splitlines()) == 1

    args = ("--graph", "--trust", "--model-class", net, "--input-shape", "3,4,4", "--json")
    code, out, err = run(capsys, files / "sd.pt", *args)
    assert code == 0, err
    data = graph_json(out)
    assert data["source"] == "export" and skip_edge_into_add(data)


def test_model_args_reach_the_class_and_wrong_ones_are_one_sentence(files, capsys):
    net = f"{files / 'net.py'}:Net"
    base = ("--graph", "--trust", "--model-class", net, "--input-shape", "3,4,4")
    code, out, err = run(capsys, files / "sd.pt", *base, "--model-args", '{"channels": 3}')
    assert code == 0, err
    code, out, err = run(capsys, files / "sd.pt", *base, "--model-args", '{"channels": 5}')
    assert code == 2 and len(err.strip().splitlines()) == 1 and "do not fit Net" in err


def test_a_model_that_cannot_be_traced_is_one_sentence(files, capsys):
    args = ("--graph", "--trust", "--model-class", f"{files / 'net.py'}:Broken")
    code, out, err = run(capsys, files / "sd.pt", *args, "--input-shape", "3,4,4")
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "torch.export failed" in err and "torch.fx" in err


def test_a_huge_state_dict_is_collapsed_and_the_json_says_so(tmp_path, capsys):
    path = tmp_path / "huge.pt"
    # 1 + 3 x 500 modules and 500 names (of one stored tensor): past the 2,000-node limit.
    torch.save({f"blocks.{i}.conv.inner.weight": torch.zeros(1) for i in range(500)}, path)
    code, out, err = run(capsys, path, "--graph", "--json")
    assert code == 0, err
    data = graph_json(out)
    collapsed = data["collapsed"]
    assert (collapsed["nodes"], collapsed["limit"], collapsed["depth"]) == (2001, 2000, 3)
    assert "more than the limit of 2,000" in collapsed["sentence"]
    assert "collapsed:" in run(capsys, path, "--graph")[1]  # the words, without --json
    assert len(data["nodes"]) + sum(n["hidden"] for n in data["nodes"]) == 2001
    assert not any(n["module"].endswith(".inner") for n in data["nodes"] if n["kind"] == "module")


def test_model_options_without_graph_and_recordings_are_one_sentence(files, tmp_path, capsys):
    code, _, err = run(capsys, files / "sd.pt", "--input-shape", "3,4,4")
    assert code == 2 and "apply to inspect --graph only" in err
    code, _, err = run(capsys, files / "sd.pt", "--graph", "--step", "3")
    assert code == 2 and "a model file has none" in err


def test_the_installed_command_prints_the_graph_as_its_last_line(files):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-m", "gradviz", "inspect", str(files / "sd.pt"), "--graph", "--json"],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert result.returncode == 0, result.stderr
    data = graph_json(result.stdout)
    assert data["source"] == "names" and data["edges"] == []
    assert {n["name"] for n in data["nodes"] if n["kind"] == "module"} == {"block", "conv", "fc"}


def watched_residual_mlp(path, nan_step: int, steps: int = 4) -> None:
    """A residual MLP watched every step; its block's first weight gets a NaN gradient at
    ``nan_step`` (after backward, before the optimizer step, as a bad batch would)."""
    import gradviz

    class Residual(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = torch.nn.Linear(2, 4)
            self.block = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
            self.out = torch.nn.Linear(4, 1)

        def forward(self, x):
            h = self.inp(x)
            return self.out(h + self.block(h))

    torch.manual_seed(0)
    model = Residual()
    with gradviz.watch(model, path, every=1) as rec:
        for step in range(steps):
            loss = model(torch.randn(8, 2)).pow(2).mean()
            model.zero_grad()
            loss.backward()
            if step == nan_step:
                model.block[0].weight.grad[0, 0] = float("nan")
            rec.log(loss=loss)


def test_a_recordings_graph_carries_its_health_at_the_step(tmp_path, capsys):
    path = tmp_path / "run"
    watched_residual_mlp(path, nan_step=2)
    code, out, err = run(capsys, path, "--graph", "--step", "2", "--json")
    assert code == 0, err
    data = graph_json(out)
    assert data["source"] == "recording"
    # The data flow of the first recorded step: the skip connection from inp straight to out.
    assert ["m:inp", "m:block.0"] in data["edges"] and ["m:inp", "m:out"] in data["edges"]
    assert ["m:block.1", "m:out"] in data["edges"]
    worst = {n["id"]: n["health"]["worst"] for n in data["nodes"] if n["health"]}
    assert worst["p:block.0.weight"] == worst["m:block.0"] == worst["m:block"] == "NaN"
    assert worst["p:block.0.bias"] == worst["m:inp"] == worst["m:out"] == "finite"
    counts = {n["id"]: n["health"]["counts"] for n in data["nodes"] if n["health"]}
    assert counts["m:block"] == {"finite": 19, "zero": 0, "NaN": 1, "+Inf": 0, "-Inf": 0}
    words = run(capsys, path, "--graph", "--step", "2")[1]
    assert "gradients not finite or zero: block.0.weight" in words

    code, out, err = run(capsys, path, "--graph", "--step", "1", "--json")
    before = [n for n in graph_json(out)["nodes"] if n["health"] is not None]
    assert all(n["health"]["worst"] == "finite" for n in before)
    norms = {n["id"]: n["health"]["grad_norm"] for n in before}
    # A module's norm is the norm of all its gradients together.
    expected = (norms["p:inp.weight"] ** 2 + norms["p:inp.bias"] ** 2) ** 0.5
    assert norms["m:inp"] == pytest.approx(expected, rel=1e-12)
    code, out, err = run(capsys, path, "--graph", "--step", "7")
    assert code == 2 and "Step 7 is not recorded" in err and "from 0 to 3" in err


def _hostile():
    import pathlib
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "core"))
    import hostile_files

    return hostile_files


@pytest.mark.parametrize(
    "build", ["stride_zero", "storage_too_small", "deep_nesting", "many_tensors_pt"]
)
def test_a_hostile_file_graph_is_one_sentence(build, tmp_path, capsys):
    path = getattr(_hostile(), build)(tmp_path)
    code, out, err = run(capsys, path, "--graph", "--json", "--trust")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and len(err) < 500


@pytest.mark.parametrize("kind", ["popen", "exec", "import"])
def test_a_payload_in_a_checkpoint_never_runs_for_its_graph(kind, tmp_path, capsys):
    marker = tmp_path / "ran"
    path = _hostile().payload_in_unused_key(tmp_path, kind, marker)
    code, out, err = run(capsys, path, "--graph", "--json", "--trust")
    assert not marker.exists()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "hostile" in err
