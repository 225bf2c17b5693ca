"""The model graph's speed: torch.export + graph of a ResNet-18 (torchvision's layout, built
here so that torchvision is not needed) and grandalf's layout of it and of a 1,000-node graph.

    PYTHONPATH=$PWD python -m pytest -m bench tests/bench/test_bench_graph.py -s
"""

import time

import pytest
import torch

from gradviz.core.graph import graph_of_module, layout_graph
from gradviz.core.graph.model import INPUT, OP, OUTPUT, GraphNode, ModelGraph

pytestmark = pytest.mark.bench

LAYOUT_TARGET_S = {"resnet18": 1.0, "1000 nodes": 3.0}


class BasicBlock(torch.nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        nn = torch.nn
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        skip = x if self.downsample is None else self.downsample(x)
        return self.relu(out + skip)


class ResNet18(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        widths = [(64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)]
        for i, (cin, cout, stride) in enumerate(widths, start=1):
            layer = nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1))
            setattr(self, f"layer{i}", layer)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, 1000)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def chain_with_skips(count: int) -> ModelGraph:
    """``count`` op nodes in a chain, every 7th also feeding the node 3 further on."""
    nodes = [GraphNode("in:x", "x", INPUT, "", None)]
    nodes += [GraphNode(f"op:{i}", f"op{i % 10}", OP, "", None) for i in range(count - 2)]
    nodes.append(GraphNode("out:output", "output", OUTPUT, "", None))
    ids = [n.id for n in nodes]
    edges = list(zip(ids, ids[1:]))
    edges += [(ids[i], ids[i + 3]) for i in range(1, count - 3, 7)]
    return ModelGraph(tuple(nodes), tuple(edges), "fx")


def timed(function, *args):
    """(value, wall seconds, CPU seconds of this process): on a shared machine the CPU time
    is what the work costs, the wall time what waiting for a core added to it."""
    start, cpu = time.perf_counter(), time.process_time()
    value = function(*args)
    return value, time.perf_counter() - start, time.process_time() - cpu


def test_graph_and_layout_times():
    graph_of_module(torch.nn.Linear(2, 2), torch.zeros(2, 2))  # torch.export's first call
    model = ResNet18().eval()
    graph, export_s, export_cpu = timed(graph_of_module, model, torch.zeros(1, 3, 224, 224))
    modules = sum(1 for n in graph.nodes if n.kind == "module")
    cases = {"resnet18": graph, "1000 nodes": chain_with_skips(1000)}
    print(
        f"\nResNet-18: export + graph {export_s:.2f} s ({export_cpu:.2f} s CPU) "
        f"({len(graph.nodes)} nodes, {modules} modules)"
    )
    for name, case in cases.items():
        layout, seconds, cpu = timed(layout_graph, case)
        print(
            f"{name}: layout of {len(layout.positions)} laid-out nodes in {seconds:.2f} s "
            f"({cpu:.2f} s CPU)"
        )
        assert cpu <= LAYOUT_TARGET_S[name]


def test_the_graph_a_recording_stores_costs_little():
    """watch's first recorded step with its hooks on every module, and the walk of
    autograd's graph that turns what they saw into the data flow, beside a plain step."""
    from gradviz.core.record.run_order import RunOrder

    torch.manual_seed(0)
    model, x = ResNet18(), torch.randn(2, 3, 64, 64)

    def step():
        loss = model(x).square().mean()
        loss.backward()
        return loss

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # CPU time of one thread: comparable under a shared machine's load
    try:
        step()
        plain = min(timed(step)[2] for _ in range(3))
        order = RunOrder(model)
        hooked = min(timed(step)[2] for _ in range(3))  # the hooks stay until finish
        stored, _, walk = timed(order.finish, step())
    finally:
        torch.set_num_threads(threads)
    print(
        f"\nResNet-18 (2 x 3 x 64 x 64) training step: {plain * 1000:.0f} ms CPU plain, "
        f"{hooked * 1000:.0f} ms CPU with the hooks; the walk {walk * 1000:.1f} ms CPU "
        f"({len(stored['modules'])} modules, {len(stored['edges'])} edges)"
    )
    assert walk < 0.1 * plain and hooked < 1.2 * plain
