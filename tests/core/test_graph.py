"""The model as a graph (gradviz.core.graph): export, fx and names graphs, the node limit,
the layered layout."""

import pytest
import torch

from gradviz.core.common.errors import GradvizError
from gradviz.core.graph import (
    NAMES_LABEL,
    collapse_to_depth,
    graph_from_names,
    graph_of_module,
    layout_graph,
    limit_nodes,
)
from gradviz.core.graph import trace as graph_trace
from gradviz.core.graph.model import MODULE, OP, ModelGraph


class Block(torch.nn.Module):
    """A residual block: relu(conv(x)) + x."""

    def __init__(self, channels: int = 3) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(channels, channels, 3, padding=1)
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        return self.relu(self.conv(x)) + x


class ResidualNet(torch.nn.Module):
    def __init__(self, blocks: int = 1) -> None:
        super().__init__()
        self.blocks = torch.nn.Sequential(*[Block() for _ in range(blocks)])
        self.fc = torch.nn.Linear(3 * 4 * 4, 2)

    def forward(self, x):
        return self.fc(self.blocks(x).flatten(1))


class NumpyOutput(torch.nn.Module):
    """torch.export cannot read a forward that leaves torch; torch.fx records the call."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x).relu().numpy()


class Broken(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("this model cannot run")


SAMPLE = torch.zeros(2, 3, 4, 4)


@pytest.fixture(scope="module")
def residual_graph() -> ModelGraph:
    torch.manual_seed(0)
    return graph_of_module(ResidualNet().eval(), SAMPLE)


def test_a_residual_blocks_skip_connection_is_an_edge_into_the_add(residual_graph):
    graph = residual_graph
    assert graph.source == "export"
    (add,) = graph.by_name(OP)["add"]
    assert add.module == "blocks.0" and add.parent == "m:blocks.0"
    sources = [graph.node(i) for i in graph.inputs_of(add.id)]
    # One input is the block's own output path (relu), the other the block's input: the skip.
    assert sorted(n.name for n in sources) == ["relu", "x"]
    (x,) = [n for n in sources if n.name == "x"]
    assert x.kind == "input"
    (conv,) = graph.by_name(OP)["conv2d"]
    assert x.id in graph.inputs_of(conv.id)  # the same input feeds the convolution
    assert conv.shape == add.shape == (2, 3, 4, 4)  # what the page's hover shows


def test_export_nodes_are_grouped_by_the_module_that_owns_them(residual_graph):
    graph = residual_graph
    (conv,) = graph.by_name(OP)["conv2d"]
    assert (conv.module, conv.parent, conv.type) == (
        "blocks.0.conv",
        "m:blocks.0.conv",
        "aten.conv2d.default",
    )
    modules = {n.module: n for n in graph.nodes if n.kind == MODULE}
    assert modules["blocks.0.conv"].type == "Conv2d"
    assert modules["blocks.0.conv"].parent == "m:blocks.0"
    assert modules["blocks.0"].parent == "m:blocks"
    weights = [n for n in graph.nodes if n.kind == "parameter" and n.module == "blocks.0.conv"]
    assert sorted(n.name for n in weights) == ["bias", "weight"]
    assert all(w.id in graph.inputs_of(conv.id) for w in weights)
    (linear,) = graph.by_name(OP)["linear"]
    (out,) = [n for n in graph.nodes if n.kind == "output"]
    assert graph.inputs_of(out.id) == [linear.id]
    # Every edge joins two nodes of the graph; nesting is never an edge.
    ids = {n.id for n in graph.nodes}
    assert all(a in ids and b in ids for a, b in graph.edges)
    assert not any(graph.node(a).kind == MODULE for a, _ in graph.edges)


def test_where_export_fails_the_graph_is_fxs_and_says_why():
    graph = graph_of_module(NumpyOutput(), torch.zeros(2, 4))
    assert graph.source == "fx"
    assert any("torch.export failed" in note for note in graph.notes)
    (linear,) = graph.by_name(OP)["linear"]  # the Linear module's call, named after it
    assert (linear.module, linear.type) == ("fc", "Linear")
    (relu,) = graph.by_name(OP)["relu"]
    assert graph.inputs_of(relu.id) == [linear.id]


def test_a_model_neither_can_read_gives_one_sentence():
    with pytest.raises(GradvizError) as caught:
        graph_of_module(Broken(), torch.zeros(2, 4))
    message = str(caught.value)
    assert "\n" not in message and "torch.export failed" in message and "torch.fx" in message


def test_a_model_too_large_to_trace_is_its_module_tree(monkeypatch):
    monkeypatch.setattr(graph_trace, "MAX_TRACED_MODULES", 5)

    def no_export(*args, **kwargs):
        raise AssertionError("a model over the limit must not be traced")

    monkeypatch.setattr(torch.export, "export", no_export)
    model = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(8)])
    graph = graph_of_module(model, torch.zeros(2, 2))
    assert graph.source == "names" and graph.edges == ()
    assert "more than the 5 gradviz traces" in graph.notes[1]
    assert len([n for n in graph.nodes if n.kind == MODULE]) == 8


def test_a_state_dicts_graph_is_its_module_tree_without_edges():
    names = list(ResidualNet(blocks=2).state_dict())
    graph = graph_from_names(names)
    assert graph.source == "names" and graph.edges == ()
    assert graph.notes[0] == NAMES_LABEL
    parents = {n.id: n.parent for n in graph.nodes}
    assert parents["m:blocks.1.conv"] == "m:blocks.1"
    assert parents["m:blocks.0"] == parents["m:blocks.1"] == "m:blocks"
    assert parents["p:blocks.1.conv.weight"] == "m:blocks.1.conv"
    assert parents["m:fc"] is None
    assert len([n for n in graph.nodes if n.kind == "parameter"]) == len(names)


def test_a_name_of_a_million_dots_is_a_bounded_number_of_nodes():
    graph = graph_from_names(["a" + ".a" * 1_000_000, "b.weight"])
    assert len(graph.nodes) <= 40  # 32 levels at most, the rest stays in the last name


def _chain_of_blocks(blocks: int) -> ModelGraph:
    """An fx-like graph without tracing: blocks.i.conv -> blocks.i.relu, chained."""
    from gradviz.core.graph.model import INPUT, OUTPUT, GraphNode, module_id

    nodes = [GraphNode("in:x", "x", INPUT, "", None)]
    edges = []
    previous = "in:x"
    nodes.append(GraphNode(module_id("blocks"), "blocks", MODULE, "blocks", None))
    for i in range(blocks):
        block = f"blocks.{i}"
        nodes.append(GraphNode(module_id(block), str(i), MODULE, block, "m:blocks"))
        for leaf in ("conv", "relu"):
            path = f"{block}.{leaf}"
            nodes.append(GraphNode(module_id(path), leaf, MODULE, path, module_id(block)))
            nodes.append(GraphNode(f"op:{path}", leaf, OP, path, module_id(path)))
            edges.append((previous, f"op:{path}"))
            previous = f"op:{path}"
    nodes.append(GraphNode("out:output", "output", OUTPUT, "", None))
    edges.append((previous, "out:output"))
    return ModelGraph(tuple(nodes), tuple(edges), "fx")


def _reaches(graph: ModelGraph, start: str, goal: str) -> bool:
    frontier, seen = [start], {start}
    while frontier:
        node = frontier.pop()
        for a, b in graph.edges:
            if a == node and b not in seen:
                seen.add(b)
                frontier.append(b)
    return goal in seen


def test_a_graph_over_the_node_limit_collapses_to_modules_and_says_so():
    graph = _chain_of_blocks(50)  # 2 + 50 * 5 + 1 = 253 nodes
    limited = limit_nodes(graph, limit=100)
    assert limited.collapsed is not None
    assert (limited.collapsed.nodes, limited.collapsed.limit) == (253, 100)
    assert "253 nodes, more than the limit of 100" in limited.collapsed.sentence
    assert len(limited.nodes) <= 100
    # Nothing is dropped silently: every node is shown or counted in the module shown for it.
    assert len(limited.nodes) + sum(n.hidden for n in limited.nodes) == len(graph.nodes)
    # The blocks stand for their layers and still carry the data flow, in order.
    assert {n.id for n in limited.nodes if n.hidden} == {f"m:blocks.{i}" for i in range(50)}
    assert ("m:blocks.0", "m:blocks.1") in limited.edges
    assert _reaches(limited, "in:x", "out:output")
    assert limit_nodes(graph, limit=253) is graph


def test_collapsing_to_depth_zero_keeps_only_top_level_modules():
    collapsed = collapse_to_depth(_chain_of_blocks(3), 0)
    assert [n.id for n in collapsed.nodes] == ["in:x", "m:blocks", "out:output"]
    assert collapsed.node("m:blocks").hidden == 3 * 5
    assert collapsed.edges == (("in:x", "m:blocks"), ("m:blocks", "out:output"))


def test_a_graph_too_wide_even_collapsed_is_refused_in_one_sentence():
    graph = graph_from_names([f"layer{i}.weight" for i in range(300)])
    with pytest.raises(GradvizError, match="does not show part of a graph"):
        limit_nodes(graph, limit=100)


def test_layout_puts_every_source_above_its_targets(residual_graph):
    layout = layout_graph(residual_graph)
    for a, b in residual_graph.edges:
        assert layout.positions[a][1] < layout.positions[b][1], (a, b)
    # Modules that hold nodes are boxes around them, not laid-out nodes.
    assert "m:blocks.0" not in layout.positions
    x0, y0, x1, y1 = layout.boxes["m:blocks.0"]
    for node in residual_graph.nodes:
        if node.parent == "m:blocks.0.conv" or node.id == "op:add":
            x, y = layout.positions[node.id]
            assert x0 < x < x1 and y0 < y < y1
    assert layout.width > 0 and layout.height > 0


def test_layout_of_names_is_a_tree_and_pieces_do_not_overlap():
    graph = graph_from_names(["a.b.weight", "a.c.weight", "d.weight"])
    layout = layout_graph(graph)
    for node in graph.nodes:
        if node.parent is not None:
            assert layout.positions[node.parent][1] < layout.positions[node.id][1]

    def span(ids):
        xs = [(layout.positions[i][0], layout.sizes[i][0]) for i in ids]
        return min(x - w / 2 for x, w in xs), max(x + w / 2 for x, w in xs)

    left = span(["m:a", "m:a.b", "m:a.c", "p:a.b.weight", "p:a.c.weight"])
    right = span(["m:d", "p:d.weight"])
    assert left[1] < right[0] or right[1] < left[0]


jit_deprecated = pytest.mark.filterwarnings(
    r"ignore:`torch\.jit\.(script|trace|trace_method|save)` is deprecated:DeprecationWarning",
    r"ignore:`torch\.jit\.(script|trace|trace_method|save)` is deprecated:FutureWarning",
)


@jit_deprecated
@pytest.mark.parametrize("make", ["script", "trace"])
def test_a_torchscript_files_graph_has_the_skip_connection_and_places_weighted_ops(make, tmp_path):
    from gradviz.core.graph import graph_of_file

    net = ResidualNet().eval()
    program = torch.jit.script(net) if make == "script" else torch.jit.trace(net, SAMPLE)
    path = tmp_path / "net.ts"
    torch.jit.save(program, path)
    with pytest.raises(GradvizError, match="--trust"):
        graph_of_file(path)
    graph = graph_of_file(path, trust=True)
    assert graph.source == "torchscript" and "no module scopes" in graph.notes[0]
    (add,) = graph.by_name(OP)["add"]
    assert sorted(graph.node(i).name for i in graph.inputs_of(add.id)) == ["relu", "x"]
    (linear,) = graph.by_name(OP)["linear"]  # placed by the weights it reads
    assert (linear.module, linear.parent) == ("fc", "m:fc")
    weights = {graph.node(i).module for i in graph.inputs_of(linear.id)} - {""}
    assert weights == {"fc"}


def test_a_wide_names_tree_folds_below_the_deepest_depth_whose_levels_fit():
    from gradviz.core.graph.collapse import fold_modules, folded_to_width
    from gradviz.core.graph.names import graph_from_names

    # 6 blocks of 5 layers of 2 tensors: 60 parameters side by side on the deepest level.
    names = [f"b{b}.l{k}.{t}" for b in range(6) for k in range(5) for t in ("weight", "bias")]
    tree = graph_from_names(names)
    folded, depth = folded_to_width(tree, width=12)
    # Depth 2 (30 layers on one level) is too wide; depth 1 draws the 6 blocks only.
    assert depth == 1 and folded == {f"m:b{b}" for b in range(6)}
    shown = fold_modules(tree, folded)
    assert [n.id for n in shown.nodes] == [f"m:b{b}" for b in range(6)]
    assert {n.hidden for n in shown.nodes} == {5 + 10}  # nothing dropped, only folded
    # Three levels: the layers of each block fold into it, the blocks stay open.
    deeper = graph_from_names([f"top.{name}" for name in names])
    folded, depth = folded_to_width(deeper, width=12)
    assert depth == 2 and folded == {f"m:top.b{b}" for b in range(6)}
    # A tree that fits, and a graph with edges (its layers are not the tree's), stay whole.
    assert folded_to_width(tree, width=60) == (frozenset(), None)
    assert folded_to_width(_chain_of_blocks(3), width=1) == (frozenset(), None)
