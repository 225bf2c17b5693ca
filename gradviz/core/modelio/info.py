"""What gradviz learned about a model file, and a model ready to run.

``ModelInfo`` is plain data (no torch objects) so the CLI can print it as JSON and the desktop
app can show it on the GUI thread. ``LoadedModel`` adds the live module.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from gradviz.core.nets.networks import NetworkSpec


@dataclass(frozen=True)
class LayerInfo:
    """One layer (or group of tensors sharing a name prefix) as the file describes it.

    ``kind`` is the class name where the file names one (``Linear``, ``Conv2d``), else a
    guess from the tensor names (``linear`` for a 2-D weight with an optional bias) or
    ``tensors``. ``shapes`` maps each tensor's own name (``weight``, ``bias``) to its shape.
    """

    name: str
    kind: str
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def parameters(self) -> int:
        total = 0
        for shape in self.shapes.values():
            count = 1
            for size in shape:
                count *= size
            total += count
        return total


@dataclass(frozen=True)
class ModelInfo:
    """A description of a model file, made without running anything from it.

    ``format``: the name of its entry in ``formats.FORMATS`` (``state_dict``, ``pt2``, ...).
    ``runnable``: gradviz can build a module from it (after trust, where ``needs_trust``).
    ``classes``: classes and functions the file names (fully qualified), none of them imported.
    ``in_dim`` / ``out_dim``: input and output widths, None where the file does not say.
    ``in_shape``: the shape of one input sample where a .pt2 program declares it (3, 32, 32).
    ``nonfinite_weights``: names of tensors holding NaN or Inf (the model still loads).
    ``assumptions``: sentences stating what gradviz assumed to rebuild the model.
    ``not_runnable_reason``: one sentence when ``runnable`` is false, else None.
    ``order_to_confirm``: for a whole module of a class of its own, the layers in the order
    they would run with ``assume_sequential`` (``"fc1 (Linear)"``, ...); () otherwise.
    ``modules``: for a whole pickled module, every module of its tree in submodule order as
    ``(path, class)`` (``("(top)", "torch.nn.modules.container.Sequential")``, ``("0",
    "torch.nn.modules.linear.Linear")``, ...); () for other formats.
    ``runs_as``: one sentence saying what will run (``Rebuilt from torch.nn classes, no code
    from the file.``), None where the format says it (a program runs itself).
    ``activation_from_caller``: the file records no activation that gradviz can place between
    its Linear layers, so the one used is the caller's ``activation`` (``identity`` where none
    was given); ``gradviz jacobian`` refuses such a file without ``--activation``.
    """

    path: str
    format: str
    size_bytes: int
    runnable: bool
    needs_trust: bool
    classes: tuple[str, ...] = ()
    layers: tuple[LayerInfo, ...] = ()
    in_dim: int | None = None
    out_dim: int | None = None
    in_shape: tuple[int, ...] | None = None  # one sample's shape, where a program declares it
    nonfinite_weights: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()
    not_runnable_reason: str | None = None
    spec: str | None = None  # the rebuilt NetworkSpec (text or JSON form), where there is one
    order_to_confirm: tuple[str, ...] = ()
    activation_from_caller: bool = False
    modules: tuple[tuple[str, str], ...] = ()
    runs_as: str | None = None

    @property
    def parameters(self) -> int:
        """Number of values in the layers' tensors (parameters and buffers)."""
        return sum(layer.parameters for layer in self.layers)

    @property
    def widths_from_weights(self) -> tuple[int | None, int | None]:
        """(inputs, outputs) as the first and last layers with a weight say them, where
        those are Linear (``in_features``, ``out_features``) or convolutions (channels);
        None for a side whose layer is anything else. A reading of the weights, not of the
        forward (``in_dim`` and ``out_dim`` are that)."""
        weighted = [layer for layer in self.layers if "weight" in layer.shapes]
        if not weighted:
            return None, None
        first, last = weighted[0], weighted[-1]
        return (
            first.shapes["weight"][1] if _linear_or_conv(first) else None,
            last.shapes["weight"][0] if _linear_or_conv(last) else None,
        )

    def width_words(self, side: str, unknown: str = "?") -> str:
        """One side (``"in"`` or ``"out"``) in words: the declared width (``2``); else what
        the weights say, ``2 (from the weights)`` or ``3 channels (from the weights)``; else
        ``unknown``."""
        declared = self.in_dim if side == "in" else self.out_dim
        if declared is not None:
            return str(declared)
        inputs, outputs = self.widths_from_weights
        value = inputs if side == "in" else outputs
        if value is None:
            return unknown
        weighted = [layer for layer in self.layers if "weight" in layer.shapes]
        channels = _is_conv(weighted[0] if side == "in" else weighted[-1])
        return f"{value}{' channels' if channels else ''} (from the weights)"

    def widths_line(self) -> str:
        """``2 inputs → 4 outputs``; ``? inputs`` for a side not known; where a side is
        read from the weights, ``2 inputs → 4 outputs (from the weights)`` or ``3 input
        channels → …``."""
        words = []
        for side, noun in (("in", "inputs"), ("out", "outputs")):
            text = self.width_words(side)
            if text.endswith(" channels (from the weights)"):
                text, noun = text[: -len(" channels (from the weights)")], f"{side}put channels"
            words.append(f"{text.removesuffix(' (from the weights)')} {noun}")
        read = any(self.width_words(side).endswith("(from the weights)") for side in ("in", "out"))
        return " → ".join(words) + (" (from the weights)" if read else "")

    def to_dict(self) -> dict:
        """JSON-ready: the fields above plus ``parameters``; each layer is
        ``{"name", "type", "shapes"}`` with shapes as lists."""
        data = asdict(self)
        data["classes"] = list(self.classes)
        data["layers"] = [
            {
                "name": layer.name,
                "type": layer.kind,
                "shapes": {k: list(v) for k, v in layer.shapes.items()},
            }
            for layer in self.layers
        ]
        data["nonfinite_weights"] = list(self.nonfinite_weights)
        data["assumptions"] = list(self.assumptions)
        data["order_to_confirm"] = list(self.order_to_confirm)
        data["modules"] = [{"name": name, "class": cls} for name, cls in self.modules]
        data["parameters"] = self.parameters
        data["in_from_weights"], data["out_from_weights"] = self.widths_from_weights
        return data


_LINEAR_KINDS = ("linear",)
_CONV_KINDS = ("conv1d", "conv2d", "conv3d")


def _is_conv(layer: LayerInfo) -> bool:
    return layer.kind.lower() in _CONV_KINDS and len(layer.shapes["weight"]) in (3, 4, 5)


def _linear_or_conv(layer: LayerInfo) -> bool:
    linear = layer.kind.lower() in _LINEAR_KINDS and len(layer.shapes["weight"]) == 2
    return linear or _is_conv(layer)


def _or(value: int | None, unknown: str) -> str:
    return unknown if value is None else str(value)


@dataclass(frozen=True)
class LoadedModel:
    """A model ready to run on the CPU in eval mode, mapping (B, n) inputs to (B, m) outputs.

    Where gradviz rebuilt the network from weights, ``module`` is the ``nn.Sequential`` of
    ``spec.build()`` with the file's weights (no code from the file). Trusted TorchScript and
    .pt2 programs run as they are, wrapped so that a wrong input width, an error inside the
    program or an output that is not a tensor becomes GradvizError; ``spec`` is None. Such a
    program runs in a process of its own (``module`` is a remote_program.RemoteProgram)."""

    module: torch.nn.Module
    info: ModelInfo
    spec: NetworkSpec | None = None
