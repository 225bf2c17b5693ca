"""A watch recording stores its model's graph once: the module tree, the order the modules
ran in and the data flow between them in the first recorded step."""

import math

import pytest
import torch
from torch import nn

import gradviz
from gradviz.core.graph import layout_graph
from gradviz.core.graph.model import OP, PARAMETER, RECORDING
from gradviz.core.record.reader import Reader
from gradviz.core.record.recorded_graph import RECORDING_LABEL, graph_of_recording, recorded_graph


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


@pytest.fixture
def damaged(tmp_path):
    """48 steps of two tensors of module ``m`` and one of ``n`` (a dict: the names tree);
    m.b's gradient is NaN from step 40; the stats of steps 16-31 are deleted."""
    from gradviz.core.record.writer import STEP_CHUNK

    path = tmp_path / "run"
    tensors = {name: torch.zeros(3, requires_grad=True) for name in ("m.w", "m.b", "n.w")}
    with gradviz.watch(tensors, path, every=1) as rec:
        for step in range(3 * STEP_CHUNK):
            for k, t in enumerate(tensors.values()):
                t.grad = torch.full((3,), float(step + k + 1))
            if step >= 40:
                tensors["m.b"].grad[0] = float("nan")
            rec.log(loss=float(step))
    (path / "rank0" / "stats" / "c" / "1" / "0" / "0").unlink()  # steps 16-31
    return path


def _healths(graph):
    return {n.id: n.health for n in graph.nodes if n.health is not None}


def test_a_node_whose_statistics_are_lost_at_the_step_is_lost_never_finite(damaged):
    lost = _healths(graph_of_recording(damaged, step=20))
    assert {h["worst"] for h in lost.values()} == {"lost"}
    assert all(h["lost_tensors"] >= 1 and h["grad_norm"] == 0.0 for h in lost.values())
    kept = _healths(graph_of_recording(damaged, step=5))
    assert {h["worst"] for h in kept.values()} == {"finite"}


def test_a_modules_norm_is_its_tensors_finite_entries_together(damaged):
    at5 = _healths(graph_of_recording(damaged, step=5))
    # float64 reference: the gradients of m.w (all 6.0) and m.b (all 7.0) as one vector
    assert at5["m:m"]["grad_norm"] == pytest.approx(math.sqrt(3 * 6.0**2 + 3 * 7.0**2))
    at41 = _healths(graph_of_recording(damaged, step=41))
    assert at41["m:m"]["worst"] == "NaN"
    # the norm of the finite entries: m.w's three 42.0 and m.b's two 43.0 (its first is NaN)
    assert at41["m:m"]["grad_norm"] == pytest.approx(math.sqrt(3 * 42.0**2 + 2 * 43.0**2))
    assert at41["m:m"]["counts"]["NaN"] == 1 and at41["m:m"]["counts"]["finite"] == 5
    assert at41["m:n"]["worst"] == "finite"  # the other module is not touched


def test_the_graph_page_rule_and_inspect_graph_agree_on_every_node_and_step(damaged):
    """The page's StepHealth and the file's graph give every node the same worst, counts
    and norm at every recorded step, lost steps included (one rule: core.health)."""
    from gradviz.core.common.health import HEALTH_LABELS, Health

    health_of_page = pytest.importorskip("gradviz.gui.pages.graph.health")
    from gradviz.core.record.recording_data import read_recording

    data = read_recording(Reader(damaged))
    base = graph_of_recording(damaged)
    page = health_of_page.StepHealth(base, data)
    for column, step in enumerate(data.steps):
        file = _healths(graph_of_recording(damaged, step=int(step)))
        shown = page.at(column)
        assert set(shown) == set(file)
        for node_id, h in shown.items():
            words = "lost" if h.worst is None else HEALTH_LABELS[Health(h.worst)]
            assert words == file[node_id]["worst"], (step, node_id)
            assert h.counts == tuple(file[node_id]["counts"].values()), (step, node_id)
            assert h.norm == pytest.approx(file[node_id]["grad_norm"]), (step, node_id)
