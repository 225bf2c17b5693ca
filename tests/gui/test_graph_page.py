"""The Graph page: a recording's graph coloured by its health at the timeline's step, the
first non-finite value's origin and spread, the selection shared with Model health, model
files, the node limit and a hostile file."""
# The shared fixtures are imported by name, which pyflakes reads as a redefinition:
# ruff: noqa: F811

from __future__ import annotations

import pytest
from fixtures_app import isolated_settings, lab  # noqa: F401 - fixtures
from graph_fixtures import resnet18_state_dict_names, write_residual_recording
from recording_fixtures import open_and_wait

from gradviz.core.common.health import Health
from gradviz.core.graph.model import MODULE, PARAMETER, GraphNode, ModelGraph
from gradviz.gui.pages.graph.page import PAGE_NODE_LIMIT, GraphPage
from gradviz.gui.widgets.palette import OKABE_ITO

WAIT_MS = 60_000
BEFORE = {"m:inp", "m:b1.fc1", "m:b1.act", "m:b1.fc2", "o:b1", "i:input"}
AFTER = {"m:b2.act", "m:b2.fc2", "o:b2", "m:out", "x:loss"}


@pytest.fixture(scope="module")
def nan_recording(tmp_path_factory):
    """5 steps; b2.fc1's forward makes the first NaN at step 3."""
    return write_residual_recording(tmp_path_factory.mktemp("graph") / "run", steps=5, nan_at=3)


@pytest.fixture(scope="module", autouse=True)
def zarr_started(nan_recording):
    """zarr starts its I/O threads on first use, for the life of the process: before the
    checks that no thread is left behind (as in test_recordings)."""
    import zarr

    from gradviz.core.record.reader import Reader
    from gradviz.core.record.recording_data import read_recording

    read_recording(Reader(nan_recording), 0)
    group = zarr.open_group(nan_recording, mode="r")["rank0"]
    for _, array in group.arrays():
        array[:]
    # Its executor's threads start as reads overlap: start them all now.
    import asyncio
    import time

    from zarr.core.sync import _get_loop

    loop = _get_loop()

    async def overlap():
        await asyncio.gather(*(loop.run_in_executor(None, time.sleep, 0.05) for _ in range(40)))

    asyncio.run_coroutine_threadsafe(overlap(), loop).result(timeout=30)


def open_graph(qtbot, lab, path):
    """Open the recording, wait for its graph on the Graph page; returns the page."""
    data = open_and_wait(qtbot, lab, path)
    page = lab.graph.page
    qtbot.waitUntil(lambda: page.scene is not None and page.shown is not None, timeout=WAIT_MS)
    return data, page


def test_the_origin_and_the_modules_after_it_are_marked_from_the_first_nonfinite_step(
    qtbot, lab, nan_recording
):
    data, page = open_graph(qtbot, lab, nan_recording)
    lab.window.pages.show_page(lab.graph.index)
    assert lab.window.pages.bar.tabText(lab.window.pages.current()) == "Graph"
    assert page.shown.source == "recording" and ("m:inp", "o:b1") in page.shown.edges
    health = lab.recordings.page
    health.timeline.select_step(2)  # the step before: nothing marked, every gradient finite
    assert page.step == 2
    assert page.marks() == {"origin": frozenset(), "after": frozenset()}
    assert page.node_health("m:b2.fc1").worst in (Health.FINITE, Health.ZERO)
    page.timeline.select_step(3)  # the page's own timeline moves Model health's too
    assert health.timeline.step == 3 and page.step == 3
    # Its Follow and state say what Model health's say of the same (complete) recording.
    ours, theirs = page.timeline.readouts(), health.timeline.readouts()
    assert ours["state"] == theirs["state"] == "complete"
    assert not page.timeline.follow.isEnabled() and not health.timeline.follow.isEnabled()
    marks = page.marks()
    assert marks["origin"] == {"m:b2.fc1"}
    assert marks["after"] >= AFTER and not (BEFORE & marks["after"])
    # Colours: the NaN of the palette where the recording says NaN, as Model health draws it.
    assert page.node_health("m:b2.fc1").worst == Health.NAN
    assert page.node_colour("m:b2.fc1") == OKABE_ITO[Health.NAN].lower()
    assert page.node_colour("x:loss") != OKABE_ITO[Health.NAN].lower()  # no gradients: grey
    # The weight was poisoned outside any step: the origin names the parameter that held it.
    assert (
        "was held by parameter 'b2.fc1.weight' as the forward ran at step 3" in page.header.text()
    )
    assert "the first non-finite value began here" in page.describe("m:b2.fc1")
    line = lab.window.pages.bar.tabText(lab.window.pages.current())
    from gradviz.gui.shell.window_line import page_title

    assert page_title(lab.window) == line == "Graph"


def ctrl_click_cell(qtbot, health_map, tensor: int, index: int) -> None:
    """A Ctrl+click on the health map's cell (tensor, index), as the user makes it."""
    from PySide6.QtCore import QPointF, Qt

    scene_pos = health_map.plot.getPlotItem().vb.mapViewToScene(QPointF(index + 0.5, tensor + 0.5))
    point = health_map.plot.mapFromScene(scene_pos)
    qtbot.mouseClick(
        health_map.plot.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ControlModifier,
        point,
    )  # fmt: skip


def test_a_clicked_node_selects_all_its_tensors_on_model_health_and_back(qtbot, lab, nan_recording):
    data, page = open_graph(qtbot, lab, nan_recording)
    health = lab.recordings.page
    page.select_node("m:b1.fc2")  # a layer: its weight and its bias, outlined as one run
    assert health.selected_tensors() == ["b1.fc2.weight", "b1.fc2.bias"]
    rows = [data.tensors.index("b1.fc2.weight"), data.tensors.index("b1.fc2.bias")]
    assert health.health.selected_rows == tuple(sorted(rows))
    assert health.histogram.title.text().startswith("b1.fc2.weight @ step")
    assert health.selection_label.text() == (
        "2 tensors selected (b1.fc2.weight, b1.fc2.bias); the histogram shows b1.fc2.weight."
    )
    page.select_node("m:b2")  # a block: every tensor under it
    assert health.selected_tensors() == [t for t in data.tensors if t.startswith("b2.")]
    assert len(health.selected_tensors()) == 4
    # Model health's cell click selects that one tensor and the node holding it here.
    health.select_cell(data.tensors.index("out.bias"), 1)
    assert health.selected_tensors() == ["out.bias"] and health.selection_label.isHidden()
    assert page.selected == "m:out"
    assert page.step == int(data.steps[1])  # and the graph's step followed
    # Ctrl+click adds a row: the node holding both (the layer) is selected here.
    ctrl_click_cell(qtbot, health.health, data.tensors.index("out.weight"), 1)
    qtbot.waitUntil(lambda: len(health.selected_rows) == 2)
    assert set(health.selected_tensors()) == {"out.weight", "out.bias"}
    assert health.selected_tensors()[0] == "out.bias"  # the histogram stays on the first
    assert page.selected == "m:out"
    # Shift+click from b1.fc1.weight to b1.fc2.bias: the rows of block b1's two layers.
    health.select_cell(data.tensors.index("b1.fc1.weight"), 1)
    assert page.selected == "m:b1.fc1"
    health.add_cell(data.tensors.index("b1.fc2.bias"), 1, True)
    assert set(health.selected_tensors()) == {t for t in data.tensors if t.startswith("b1.")}
    assert page.selected == "m:b1"


def test_model_health_choosing_tensors_while_the_graph_is_laid_out_again_selects_nothing(
    qtbot, lab, nan_recording
):
    """Found by the agreement test: a Model health selection made while the Graph page's
    new layout was pending read the old graph's health against no graph (AttributeError in
    the event loop)."""
    data, page = open_graph(qtbot, lab, nan_recording)
    page.set_graph(page.graph, page.where)  # as a new graph arrives: its layout is pending
    assert page.shown is None
    lab.recordings.page.select_cell(data.tensors.index("out.bias"), 1)
    assert page.selected is None
    qtbot.waitUntil(lambda: page.shown is not None, timeout=WAIT_MS)  # laid out: it selects
    lab.recordings.page.select_cell(data.tensors.index("out.bias"), 1)
    assert page.selected == "m:out"


def test_a_graph_over_the_node_limit_is_collapsed_and_says_so_and_expands(qtbot):
    page = GraphPage()
    qtbot.addWidget(page)
    nodes = []
    for b in range(30):  # 30 blocks of 10 layers: 330 nodes
        nodes.append(GraphNode(f"m:b{b}", f"b{b}", MODULE, f"b{b}", None))
        for k in range(10):
            path = f"b{b}.l{k}"
            nodes.append(GraphNode(f"m:{path}", f"l{k}", MODULE, path, f"m:b{b}"))
    graph = ModelGraph(tuple(nodes), (), "names")
    page.set_graph(graph, "big.safetensors")
    qtbot.waitUntil(lambda: page.shown is not None, timeout=WAIT_MS)
    assert len(page.scene.nodes) == 30 <= PAGE_NODE_LIMIT
    assert "30 modules collapsed (330 nodes in all, more than 200 drawn at once)" in (
        page.header.text()
    )
    page.toggle_module("m:b4")  # double-click: that block opens, the others stay folded
    qtbot.waitUntil(lambda: page.shown is not None and "m:b4.l9" in page.scene.nodes)
    assert len(page.scene.nodes) == 30 + 10
    page.shutdown()


def test_a_wide_names_tree_is_drawn_collapsed_below_its_top_levels_and_says_so(qtbot):
    from gradviz.core.graph.names import graph_from_names

    page = GraphPage()
    qtbot.addWidget(page)
    graph = graph_from_names(resnet18_state_dict_names())  # a ResNet-18 state_dict
    assert len(graph.nodes) == 178 <= PAGE_NODE_LIMIT  # not over the node limit, only wide
    page.set_graph(graph, "resnet18.pt")
    qtbot.waitUntil(lambda: page.shown is not None, timeout=WAIT_MS)
    blocks = {f"m:layer{k}.{b}" for k in range(1, 5) for b in range(2)}
    assert {n.id for n in page.shown.nodes if n.hidden} == blocks
    assert len(page.scene.nodes) == 7 + 16  # the top modules, their tensors and blocks
    assert sum(n.hidden for n in page.shown.nodes) + len(page.shown.nodes) == 178
    assert (
        "8 modules collapsed below depth 2 so that no level of the tree is wider than 24 "
        "nodes (178 nodes in all): double-click a module to expand it."
    ) in page.header.text()
    page.toggle_module("m:layer2.0")  # double-click: that block opens, the others stay
    qtbot.waitUntil(lambda: page.shown is not None and "m:layer2.0.downsample" in page.scene.nodes)
    assert "7 modules collapsed below depth 2" in page.header.text()
    page.expand_all()
    qtbot.waitUntil(lambda: page.shown is not None and len(page.scene.nodes) == 178)
    assert "collapsed" not in page.header.text()
    page.collapse_to_fit()  # Collapse folds it as it was first drawn
    qtbot.waitUntil(lambda: page.shown is not None and len(page.scene.nodes) == 23)
    page.shutdown()


def test_the_search_finds_modules_by_name_and_exports_write_png_and_svg(
    qtbot, lab, nan_recording, tmp_path
):
    _, page = open_graph(qtbot, lab, nan_recording)
    page.search.setText("fc2")
    assert page.search_matches() == ["m:b1.fc2", "m:b2.fc2"]
    assert page.matches_label.text() == "2 found"
    for suffix in (".png", ".svg"):
        target = tmp_path / f"graph{suffix}"
        page.choose_path = lambda _parent, _suffix, t=target: str(t)
        page.export_buttons[0 if suffix == ".png" else 1].click()
        assert target.stat().st_size > 1000
    assert "<svg" in (tmp_path / "graph.svg").read_text()


def test_a_hostile_model_file_is_one_sentence_on_the_page(qtbot, lab, tmp_path):
    bad = tmp_path / "model.pt"
    bad.write_bytes(b"\x80\x02" + b"(" * 200_000)  # a pickle nested far too deep
    errors = []
    lab.models.opener.show_error = lab.graph.show_error = lambda s, _d: errors.append(s)
    lab.window.pages.show_page(lab.graph.index)
    lab.models.opener.open_path(str(bad))
    qtbot.waitUntil(lambda: bool(errors), timeout=WAIT_MS)
    assert len(errors) == 1 and len(errors[0].splitlines()) == 1 and "model.pt" in errors[0]
    assert lab.graph.page.scene is None  # nothing half-drawn; the page still answers
    page = lab.graph.page
    page.search.setText("x")
    assert page.search_matches() == []


def test_names_only_graph_of_a_state_dict_has_no_edges_and_says_so(qtbot, lab, tmp_path):
    import torch

    from gradviz.gui.shell.launch import PageOnOpen
    from gradviz.gui.shell.window_line import page_title

    path = tmp_path / "weights.pt"
    torch.save(torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1)).state_dict(),
               path)  # fmt: skip
    chosen = PageOnOpen(lab, "graph")  # gradviz gui weights.pt --page graph
    lab.models.opener.open_path(str(path))
    page = lab.graph.page
    qtbot.waitUntil(lambda: page.shown is not None and chosen.ready, timeout=WAIT_MS)
    # The explorer came forward with the file; the Graph page asked for is on screen.
    assert page_title(lab.window) == "Graph" and page.isVisible()
    assert not any(dock.isVisible() for dock in lab.window.docks.values())
    assert page.shown.edges == () and page.shown.source == "names"
    assert "the order and the connections are not in the file." in page.header.text()
    assert "Structure from names" in page.header.text()  # each note reads as a sentence
    assert {n.kind for n in page.shown.nodes} == {MODULE, PARAMETER}
    assert page.timeline.isHidden()
    page.select_node("m:0")  # the module's weights in the explorer's layer table
    table = lab.models.panel.layers
    assert [table.item(i.row(), 0).text() for i in table.selectionModel().selectedRows()] == ["0"]


def test_without_grandalf_the_page_draws_a_plain_layering_and_says_so(qtbot, monkeypatch):
    from gradviz.core.graph.layout import FALLBACK_LINE
    from gradviz.core.graph.model import OP
    from gradviz.gui.pages.graph import page as page_module

    monkeypatch.setattr(page_module, "has_grandalf", lambda: False)
    page = GraphPage()
    qtbot.addWidget(page)
    nodes = tuple(GraphNode(f"o:{k}", f"op{k}", OP, "", None) for k in range(4))
    edges = (("o:0", "o:1"), ("o:1", "o:2"), ("o:0", "o:3"), ("o:2", "o:3"))
    page.set_graph(ModelGraph(nodes, edges, "fx"), "net.pt2")
    qtbot.waitUntil(lambda: page.shown is not None, timeout=WAIT_MS)
    assert not page.fallback.isHidden() and page.fallback.text() == FALLBACK_LINE
    y = {k: page.scene.layout.positions[k][1] for k in page.scene.nodes}
    assert all(y[a] < y[b] for a, b in edges)  # still top to bottom, by longest path
    assert y["o:3"] > y["o:2"] > y["o:1"] > y["o:0"]
    page.shutdown()


@pytest.fixture(scope="module")
def input_nan_recording(tmp_path_factory):
    """Written in this process: 4 steps of a small MLP; the batch of step 2 holds a NaN."""
    import torch
    from torch import nn

    import gradviz

    path = tmp_path_factory.mktemp("graph-input") / "run"
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1))
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        with gradviz.watch(model, path, every=1) as rec:
            for step in range(4):
                x = torch.randn(8, 2)
                if step == 2:
                    x[3, 1] = float("nan")
                opt.zero_grad()
                loss = model(x).square().mean()
                loss.backward()
                rec.log(loss=loss)
                opt.step()
    return path


def test_a_nan_from_the_batch_is_marked_on_the_input_node(qtbot, lab, input_nan_recording):
    open_and_wait(qtbot, lab, input_nan_recording)
    page = lab.graph.page
    qtbot.waitUntil(lambda: page.scene is not None and page.shown is not None, timeout=WAIT_MS)
    lab.window.pages.show_page(lab.graph.index)
    page.timeline.select_step(1)
    assert page.marks() == {"origin": frozenset(), "after": frozenset()}
    page.timeline.select_step(2)
    marks = page.marks()
    assert marks["origin"] == {"i:input"}
    assert {"m:0", "m:2", "x:loss"} <= marks["after"]
    assert "came in with the model's input at step 2" in page.header.text()
    assert "the first non-finite value began here" in page.describe("i:input")
    assert page.readouts()["nodes"]["i:input"]["origin"] is True


def test_the_header_names_the_origin_once_a_followed_recording_reaches_it(
    qtbot, lab, input_nan_recording
):
    import dataclasses

    data = open_and_wait(qtbot, lab, input_nan_recording)
    page = lab.graph.page
    qtbot.waitUntil(lambda: page.scene is not None and page.shown is not None, timeout=WAIT_MS)
    summary = data.summary  # as followed before step 2 came: no first non-finite yet
    ranks = tuple(dataclasses.replace(r, first_nonfinite=None) for r in summary.per_rank)
    before = dataclasses.replace(data, summary=dataclasses.replace(summary, per_rank=ranks))
    page.set_recording(before)
    assert "first non-finite" not in page.header.text()
    page.set_recording(data)  # the writer reached its NaN step
    assert "came in with the model's input at step 2" in page.header.text()


def test_the_header_says_which_steps_a_damaged_recording_lost(qtbot, lab, input_nan_recording):
    import dataclasses

    data = open_and_wait(qtbot, lab, input_nan_recording)
    page = lab.graph.page
    qtbot.waitUntil(lambda: page.scene is not None and page.shown is not None, timeout=WAIT_MS)
    assert "Damaged recording" not in page.header.text()
    lost = ({"rank": 0, "what": "stats", "missing_steps": [[1, 1]], "reason": "r."},)
    page.set_recording(
        dataclasses.replace(data, summary=dataclasses.replace(data.summary, damaged=lost))
    )
    assert "Damaged recording: rank 0 stats: steps 1 lost" in page.header.text()


def test_a_node_with_lost_tensors_says_how_many_it_lost(qtbot, lab, input_nan_recording):
    import dataclasses

    import numpy as np

    data = open_and_wait(qtbot, lab, input_nan_recording)
    page = lab.graph.page
    qtbot.waitUntil(lambda: page.scene is not None and page.shown is not None, timeout=WAIT_MS)
    missing = np.zeros(data.counts.shape[:2], bool)
    missing[list(data.tensors).index("0.weight"), 1] = True  # 0.weight's stats of step 1 lost
    page.set_recording(dataclasses.replace(data, missing=missing), 1)
    assert "1 tensor lost at this step" in page.describe("m:0")
    assert "lost at this step" not in page.describe("m:2")
    assert page.node_health("m:0").lost == 1 and page.node_health("m:0").worst is not None
