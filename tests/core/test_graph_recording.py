"""A watch recording stores its model's graph once: the module tree, the order the modules
ran in and the data flow between them in the first recorded step."""

import pytest
import torch
from torch import nn

import gradviz
from gradviz.core.graph import layout_graph
from gradviz.core.graph.model import OP, PARAMETER, RECORDING
from gradviz.core.graph.recording import RECORDING_LABEL, graph_of_recording, recorded_graph
from gradviz.core.record.reader import Reader


class Block(nn.Module):
    """x + fc2(relu(fc1(x))): the skip connection meets the block's own add."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(x)))


class ResidualMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp, self.b1, self.b2, self.out = nn.Linear(4, 8), Block(8), Block(8), nn.Linear(8, 1)

    def forward(self, x):
        return self.out(self.b2(self.b1(self.inp(x))))


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    torch.manual_seed(0)
    model, x, y = ResidualMLP(), torch.randn(8, 4), torch.randn(8, 1)
    path = tmp_path_factory.mktemp("graph") / "run"
    calls = []
    handle = model.b1.fc1.register_forward_hook(lambda *_: calls.append(1))
    with gradviz.watch(model, path, every=1) as rec:
        for _ in range(3):
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            rec.log(loss=loss)
    handle.remove()
    return path, len(calls)


def test_a_recording_stores_the_data_flow_of_its_first_step(recording):
    path, _ = recording
    graph = graph_of_recording(path)
    assert graph.source == RECORDING
    edges = set(graph.edges)
    # The skip connection: the block's input reaches its own add beside fc2's output.
    assert ("m:inp", "o:b1") in edges and ("m:b1.fc2", "o:b1") in edges
    assert ("o:b1", "m:b2.fc1") in edges and ("o:b1", "o:b2") in edges
    assert ("i:input", "m:inp") in edges and ("m:out", "x:loss") in edges
    assert graph.node("o:b1").kind == OP and graph.node("o:b1").name == "add"
    assert graph.node("o:b1").parent == "m:b1"
    assert graph.node("m:b1.act").type == "ReLU"  # a module without tensors is a node too
    # Its health is still there: each parameter's, and each module's of all inside it.
    assert graph.node("p:b1.fc1.weight").health["counts"]["NaN"] == 0
    assert sum(graph.node("m:b1").health["counts"].values()) == 2 * (8 * 8 + 8)


def test_the_run_order_is_stored_and_the_hooks_go_after_the_first_step(recording):
    path, calls = recording
    stored = Reader(path).rank(0).meta["graph"]
    assert stored["order"][:3] == ["", "inp", "b1"]
    assert calls == 3  # the user's own hook saw every forward


def test_a_recording_without_a_stored_graph_keeps_its_names_tree():
    names = ["fc.weight", "fc.bias", "head.weight"]
    for stored in (None, {"version": 1, "modules": 3}, {"version": 99}):
        graph = recorded_graph(names, stored)
        assert graph.edges == () and graph.notes == (RECORDING_LABEL,)
        assert [n.id for n in graph.nodes if n.kind == PARAMETER] == [
            "p:fc.weight", "p:fc.bias", "p:head.weight"
        ]  # fmt: skip


def test_a_recordings_layout_draws_modules_not_their_tensors(recording):
    pytest.importorskip("grandalf")
    path, _ = recording
    layout = layout_graph(graph_of_recording(path))
    assert "p:b1.fc1.weight" not in layout.positions
    assert "m:b1.fc1" in layout.positions and "m:b1" in layout.boxes
    # Data flows downward: every edge's source sits above its target.
    graph = graph_of_recording(path)
    for a, b in graph.edges:
        assert layout.positions[a][1] < layout.positions[b][1]
