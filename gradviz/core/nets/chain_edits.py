"""Edits of a network by hand: add or remove a hidden layer, change a width or an activation.

The network editors (the lab's setup panel, the Jacobian explorer) change a NetworkSpec one
click at a time through a ``Chain``: the widths, the activation after each hidden layer and
each Linear layer's bias flag. Every edit returns a new Chain (the spec it came from is not
changed) and refuses, in one sentence, what would not be a network. A spec whose activations
are not one per hidden layer (written in JSON) has no Chain: it is edited as text.

Imports neither torch nor Qt.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gradviz.core.common.errors import GradvizError
from gradviz.core.nets.networks import MAX_WIDTH, Linear, NetworkSpec
from gradviz.core.settings.config import ACTIVATIONS

#: The activation a hidden layer gets where no neighbour suggests one.
DEFAULT_ACTIVATION = "tanh"
#: The width of a first hidden layer (later ones copy their neighbour's).
DEFAULT_WIDTH = 16


@dataclass(frozen=True)
class Chain:
    """A network as widths (input, hidden..., output), the activation after each hidden
    layer ("identity": none) and whether each Linear layer has a bias."""

    widths: tuple[int, ...]
    activations: tuple[str, ...]  # len(widths) - 2
    biases: tuple[bool, ...]  # len(widths) - 1

    @classmethod
    def of(cls, spec: NetworkSpec) -> Chain | None:
        """The chain of ``spec``, or None where its activations are not one per hidden layer."""
        activations = spec.chain_activations()
        if activations is None:
            return None
        return cls(
            tuple(spec.widths()), tuple(activations), tuple(lin.bias for lin in spec.linears)
        )

    def spec(self) -> NetworkSpec:
        base = NetworkSpec.from_chain(list(self.widths), list(self.activations))
        layers, k = [], 0
        for layer in base.layers:
            if isinstance(layer, Linear):
                layer = Linear(layer.in_features, layer.out_features, self.biases[k])
                k += 1
            layers.append(layer)
        return NetworkSpec(tuple(layers))

    @property
    def hidden_count(self) -> int:
        return len(self.widths) - 2

    def with_width(self, column: int, width: int) -> Chain:
        """Width ``width`` at ``column`` (0: the input, last: the output)."""
        if not 0 <= column < len(self.widths):
            raise GradvizError(f"The network has no column {column}.")
        if not 1 <= width <= MAX_WIDTH:
            raise GradvizError(f"A width must be from 1 to {MAX_WIDTH:,}, not {width}.")
        widths = list(self.widths)
        widths[column] = int(width)
        return replace(self, widths=tuple(widths))

    def with_activation(self, hidden: int, name: str) -> Chain:
        """Activation ``name`` after hidden layer ``hidden`` (0 is the first)."""
        if not 0 <= hidden < self.hidden_count:
            raise GradvizError(f"The network has no hidden layer {hidden + 1}.")
        if name not in ACTIVATIONS:
            raise GradvizError(f"Unknown activation {name!r}; choose one of {ACTIVATIONS}.")
        activations = list(self.activations)
        activations[hidden] = name
        return replace(self, activations=tuple(activations))

    def with_hidden_added(self, column: int | None = None) -> Chain:
        """A hidden layer inserted before ``column`` (default: before the output), as wide
        as the hidden layer before it and with its activation (else DEFAULT_WIDTH and
        DEFAULT_ACTIVATION); its Linear layer has a bias."""
        column = len(self.widths) - 1 if column is None else column
        if not 1 <= column < len(self.widths):
            raise GradvizError("A hidden layer goes between the input and the output.")
        neighbour = column - 1 if column > 1 else column  # a hidden column next to it
        has_neighbour = 1 <= neighbour <= self.hidden_count
        width = self.widths[neighbour] if has_neighbour else DEFAULT_WIDTH
        activation = self.activations[neighbour - 1] if has_neighbour else DEFAULT_ACTIVATION
        widths = list(self.widths)
        widths.insert(column, width)
        activations = list(self.activations)
        activations.insert(column - 1, activation)
        biases = list(self.biases)
        biases.insert(column - 1, True)
        return Chain(tuple(widths), tuple(activations), tuple(biases))

    def with_hidden_removed(self, column: int) -> Chain:
        """Without the hidden layer at ``column`` (1 .. len(widths) - 2): its two Linear
        layers become one, which keeps the bias flag of the second."""
        if not 1 <= column <= self.hidden_count:
            raise GradvizError(f"Column {column} is not a hidden layer; only those are removed.")
        widths = list(self.widths)
        del widths[column]
        activations = list(self.activations)
        del activations[column - 1]
        biases = list(self.biases)
        del biases[column - 1]
        return Chain(tuple(widths), tuple(activations), tuple(biases))


def spec_text(spec: NetworkSpec) -> str:
    """The text a spec is written as in a spec field: its text form, else its JSON."""
    return spec.to_text() or spec.to_json()


def with_output_width(spec: NetworkSpec, width: int) -> NetworkSpec:
    """``spec`` with its last Linear layer's output width set to ``width`` (any spec, a JSON
    one too: the lab's network ends in D, the points' dimension, and follows it)."""
    if not 1 <= width <= MAX_WIDTH:
        raise GradvizError(f"A width must be from 1 to {MAX_WIDTH:,}, not {width}.")
    layers = list(spec.layers)
    last = max(k for k, layer in enumerate(layers) if isinstance(layer, Linear))
    old = layers[last]
    layers[last] = Linear(old.in_features, int(width), old.bias)
    return NetworkSpec(tuple(layers))
