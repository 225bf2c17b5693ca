"""A model's graph as plain frozen data: nodes (modules, operations, inputs, outputs,
parameters), data-flow edges and where the graph came from.

Nesting is ``parent`` (a module node's id), never an edge: edges are data flow only, so a
graph read from names alone has module nodes and no edges. Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Node kinds, as in ``gradviz inspect --graph --json``.
MODULE = "module"
OP = "op"
INPUT = "input"
OUTPUT = "output"
PARAMETER = "parameter"
KINDS = (MODULE, OP, INPUT, OUTPUT, PARAMETER)

# Where a graph came from.
EXPORT = "export"
TORCHSCRIPT = "torchscript"
FX = "fx"
NAMES = "names"
RECORDING = "recording"
SOURCES = (EXPORT, TORCHSCRIPT, FX, NAMES, RECORDING)

NAMES_LABEL = "structure from names: the order and the connections are not in the file"


def module_id(path: str) -> str:
    """The id of the module node at dotted ``path`` (``block.conv`` -> ``m:block.conv``)."""
    return f"m:{path}"


def op_id(path: str) -> str:
    """The id of the operation node of the container at ``path``'s own output."""
    return f"o:{path}"


# A recording's graph ends (``run_order``): the model's input and the logged loss.
INPUT_ID = "i:input"
LOSS_ID = "x:loss"


def module_depth(path: str) -> int:
    """0 for the model itself (``""``), 1 for ``block``, 2 for ``block.conv``."""
    return 0 if not path else path.count(".") + 1


@dataclass(frozen=True)
class GraphNode:
    """One node. ``module``: the dotted path of the module that owns it (a module node's own
    path; ``""`` for the model itself). ``parent``: the id of the module node it sits in,
    None at the top. ``type``: the module's class or the operation's full name
    (``Conv2d``, ``aten.conv2d.default``), None where unknown. ``hidden``: how many nodes a
    collapsed module stands for (0 when it is not collapsed). ``health``: gradient health
    at a step where a recording gives it, else None. ``shape``: the shape of its output
    where the source knows it (a recording's first step), else None."""

    id: str
    name: str
    kind: str
    module: str
    parent: str | None
    type: str | None = None
    hidden: int = 0
    health: dict | None = None
    shape: tuple[int, ...] | None = None

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "kind": self.kind,
            "module": self.module,
            "parent": self.parent,
            "type": self.type,
            "hidden": self.hidden,
            "health": self.health,
            "shape": None if self.shape is None else list(self.shape),
        }


@dataclass(frozen=True)
class Collapsed:
    """Why and how far a graph over the node limit was collapsed: each module at ``depth``
    stands for the modules inside it and their nodes (at 0: each top-level module for
    everything inside it); ``nodes`` is the count before collapsing."""

    limit: int
    nodes: int
    depth: int

    @property
    def sentence(self) -> str:
        if self.depth == 0:
            where = "each top-level module stands for everything inside it"
        else:
            levels = "level" if self.depth == 1 else "levels"
            where = f"each module {self.depth} {levels} deep stands for the modules inside it"
        return (
            f"The graph has {self.nodes:,} nodes, more than the limit of {self.limit:,}: {where}."
        )

    def to_dict(self) -> dict:
        return {
            "limit": self.limit,
            "nodes": self.nodes,
            "depth": self.depth,
            "sentence": self.sentence,
        }


@dataclass(frozen=True)
class ModelGraph:
    """Nodes in program order (for names: file order), ``edges`` as (from id, to id) pairs
    of data flow, ``source`` one of SOURCES, ``notes`` sentences a reader must see (the
    names-only label, why export fell back to fx), ``collapsed`` where the node limit
    collapsed modules (None when the graph is whole)."""

    nodes: tuple[GraphNode, ...]
    edges: tuple[tuple[str, str], ...]
    source: str
    notes: tuple[str, ...] = ()
    collapsed: Collapsed | None = None
    _index: dict = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {node.id: node for node in self.nodes})

    def node(self, node_id: str) -> GraphNode:
        return self._index[node_id]

    def by_name(self, kind: str) -> dict[str, list[GraphNode]]:
        """Nodes of ``kind`` grouped by name (``add`` -> the add nodes), for look-ups."""
        groups: dict[str, list[GraphNode]] = {}
        for node in self.nodes:
            if node.kind == kind:
                groups.setdefault(node.name, []).append(node)
        return groups

    def inputs_of(self, node_id: str) -> list[str]:
        """Ids of the nodes with an edge into ``node_id``, in edge order."""
        return [a for a, b in self.edges if b == node_id]

    def to_dict(self) -> dict:
        """JSON-ready: ``{"nodes": [...], "edges": [[from, to], ...], "source", "notes",
        "collapsed"}``."""
        return {
            "nodes": [node.to_dict() for node in self.nodes],
            "edges": [list(edge) for edge in self.edges],
            "source": self.source,
            "notes": list(self.notes),
            "collapsed": None if self.collapsed is None else self.collapsed.to_dict(),
        }
