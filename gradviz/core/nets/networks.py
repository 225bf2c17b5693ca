"""Small networks as data: a NetworkSpec, its text and JSON forms, and the torch module.

Parsing imports no torch (``build`` imports it when called), so the GUI can validate a spec
as the user types, before torch has finished importing.

Text form: widths joined by ``-``. A hidden width may name the activation that follows it
(``2-20:tanh-20:relu-4``); an ``:activation`` on the last width applies after every hidden
layer that names none (``2-20-20-4:sigmoid`` has a sigmoid after each of the two hidden
layers, as it always had). ``2-20-20-4`` is three Linear layers and no activation. JSON form::

    {"version": 1, "layers": [{"type": "linear", "in": 2, "out": 20, "bias": true},
                              {"type": "tanh"}, {"type": "linear", "in": 20, "out": 4}]}

gradviz's model file is a ``.safetensors`` file: the tensors are the module's state_dict and
the metadata holds the spec's JSON under ``gradviz.spec``. Nothing in it is pickled, so
loading a file from anywhere runs no code from it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Union

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.config import ACTIVATIONS

if TYPE_CHECKING:
    import torch

SPEC_VERSION = 1
MAX_WIDTH = 100_000
#: The safetensors metadata key that holds the NetworkSpec JSON in gradviz's model file.
SPEC_METADATA_KEY = "gradviz.spec"


@dataclass(frozen=True)
class Linear:
    in_features: int
    out_features: int
    bias: bool = True


@dataclass(frozen=True)
class Activation:
    name: str  # one of config.ACTIVATIONS


Layer = Union[Linear, Activation]


@dataclass(frozen=True)
class NetworkSpec:
    """An ordered chain of Linear layers and activations."""

    layers: tuple[Layer, ...]

    def __post_init__(self) -> None:
        linears = [layer for layer in self.layers if isinstance(layer, Linear)]
        if not linears:
            raise GradvizError("A network needs at least one Linear layer.")
        for a, b in zip(linears, linears[1:], strict=False):
            if a.out_features != b.in_features:
                raise GradvizError(
                    f"Layer widths do not chain: a layer of output width {a.out_features} "
                    f"is followed by one of input width {b.in_features}."
                )
        for layer in self.layers:
            if isinstance(layer, Activation) and layer.name not in ACTIVATIONS:
                raise GradvizError(_unknown_activation(layer.name))

    @property
    def in_dim(self) -> int:
        return self.linears[0].in_features

    @property
    def out_dim(self) -> int:
        return self.linears[-1].out_features

    @property
    def linears(self) -> list[Linear]:
        return [layer for layer in self.layers if isinstance(layer, Linear)]

    @property
    def parameter_count(self) -> int:
        return sum(
            lin.in_features * lin.out_features + (lin.out_features if lin.bias else 0)
            for lin in self.linears
        )

    # ---- text and JSON forms -------------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> NetworkSpec:
        """Parse the text form (``2-20-20-4:tanh``) or the JSON form (starts with ``{``)."""
        text = text.strip()
        if not text:
            raise GradvizError("The network spec is empty; write widths like 2-20-20-4:tanh.")
        if text.startswith("{"):
            return cls.from_json(text)
        return cls.from_chain(*_parse_text(text))

    @classmethod
    def from_widths(cls, widths: list[int], activation: str = "identity") -> NetworkSpec:
        """Linear layers of these widths, ``activation`` after every hidden layer."""
        if activation not in ACTIVATIONS:
            raise GradvizError(_unknown_activation(activation))
        return cls.from_chain(widths, [activation] * max(0, len(widths) - 2))

    @classmethod
    def from_chain(cls, widths: list[int], activations: list[str]) -> NetworkSpec:
        """Linear layers of these widths with ``activations[k]`` after hidden layer k (one
        name per hidden width, ``len(widths) - 2``; "identity" puts no layer there)."""
        if len(activations) != max(0, len(widths) - 2):
            raise GradvizError(
                f"{len(widths)} widths have {max(0, len(widths) - 2)} hidden layers, "
                f"but {len(activations)} activations were given."
            )
        for name in activations:
            if name not in ACTIVATIONS:
                raise GradvizError(_unknown_activation(name))
        layers: list[Layer] = []
        for k, (a, b) in enumerate(zip(widths, widths[1:], strict=False)):
            if k > 0 and activations[k - 1] != "identity":
                layers.append(Activation(activations[k - 1]))
            layers.append(Linear(a, b))
        return cls(tuple(layers))

    def widths(self) -> list[int]:
        """The input width and each Linear layer's output width, in order."""
        return [self.in_dim] + [lin.out_features for lin in self.linears]

    def chain_activations(self) -> list[str] | None:
        """The activation after each hidden layer ("identity" where there is none), or None
        where the spec is not such a chain: an activation before the first or after the last
        Linear layer, or two of them in one place."""
        between: list[list[str]] = [[]]
        for layer in self.layers:
            if isinstance(layer, Linear):
                between.append([])
            else:
                between[-1].append(layer.name)
        if between[0] or between[-1] or any(len(names) > 1 for names in between):
            return None
        return [names[0] if names else "identity" for names in between[1:-1]]

    def to_text(self) -> str | None:
        """The text form, or None where there is none (no bias, activations that are not one
        per hidden layer). One activation after every hidden layer is written once at the end
        (``2-20-20-4:tanh``), mixed ones after their widths (``2-20:tanh-20:relu-4``)."""
        activations = self.chain_activations()
        if activations is None:
            return None
        widths = self.widths()
        named = set(activations)
        if len(named) == 1 and "identity" not in named:
            text = "-".join(str(w) for w in widths) + f":{activations[0]}"
        else:
            hidden = [
                f"{w}" if act == "identity" else f"{w}:{act}"
                for w, act in zip(widths[1:-1], activations, strict=True)
            ]
            text = "-".join([str(widths[0]), *hidden, str(widths[-1])])
        try:
            same = NetworkSpec.parse(text) == self
        except GradvizError:  # a width past what a typed spec takes (a file's network)
            return None
        return text if same else None

    def to_dict(self) -> dict:
        layers = []
        for layer in self.layers:
            if isinstance(layer, Linear):
                layers.append(
                    {
                        "type": "linear",
                        "in": layer.in_features,
                        "out": layer.out_features,
                        "bias": layer.bias,
                    }
                )
            else:
                layers.append({"type": layer.name})
        return {"version": SPEC_VERSION, "layers": layers}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> NetworkSpec:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise GradvizError(
                f"The network JSON is not valid JSON: {exc.msg} "
                f"at line {exc.lineno}, column {exc.colno}."
            ) from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: object) -> NetworkSpec:
        if not isinstance(data, dict) or not isinstance(data.get("layers"), list):
            raise GradvizError('The network JSON must be an object with a "layers" list.')
        if data.get("version") != SPEC_VERSION:
            raise GradvizError(
                f"Unsupported network spec version {data.get('version')!r}; "
                f"this gradviz reads version {SPEC_VERSION}."
            )
        return cls(tuple(_layer_from_dict(k, item) for k, item in enumerate(data["layers"])))

    def __str__(self) -> str:
        return self.to_text() or self.to_json()

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        """The state_dict names and shapes of ``build()``'s module, without building it."""
        shapes: dict[str, tuple[int, ...]] = {}
        for k, layer in enumerate(self.layers):
            if isinstance(layer, Linear):
                shapes[f"{k}.weight"] = (layer.out_features, layer.in_features)
                if layer.bias:
                    shapes[f"{k}.bias"] = (layer.out_features,)
        return shapes

    # ---- torch -----------------------------------------------------------------------------
    def build(self, seed: int = 0, dtype: torch.dtype | None = None) -> torch.nn.Sequential:
        """The module: an ``nn.Sequential`` in layer order, seeded (same spec + seed = same
        weights) without touching the global random state."""
        import torch  # deferred: parsing must not pay for importing torch

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            modules = [_module_for(layer) for layer in self.layers]
        module = torch.nn.Sequential(*modules)
        return module.to(dtype) if dtype is not None else module


def _parse_text(text: str) -> tuple[list[int], list[str]]:
    """Widths and the activation after each hidden width of the text form."""
    parts = text.split("-")
    widths, named = [], []
    for k, part in enumerate(parts):
        width, colon, activation = part.partition(":")
        width, activation = width.strip(), activation.strip()
        if not width.isdigit() or not 1 <= int(width) <= MAX_WIDTH:
            raise GradvizError(
                f"Width {k + 1} of {text!r} is {width!r}; widths must be whole numbers from 1 "
                f"to {MAX_WIDTH:,}, joined by '-', e.g. 2-20-20-4:tanh."
            )
        if colon and activation not in ACTIVATIONS:
            raise GradvizError(_unknown_activation(activation))
        widths.append(int(width))
        named.append(activation if colon else None)
    if len(widths) < 2:
        raise GradvizError(
            f"{text!r} has one width; a network needs an input and an output width, "
            "e.g. 2-4 or 2-20-20-4:tanh."
        )
    if named[0] is not None:
        raise GradvizError(
            f"{text!r} names an activation after the input width {widths[0]}; an activation "
            "follows a hidden width (2-20:tanh-4), or ends the spec to follow every hidden "
            "layer (2-20-20-4:tanh)."
        )
    every = named[-1] or "identity"  # the last width's: after every hidden layer unnamed
    return widths, [every if name is None else name for name in named[1:-1]]


def _layer_from_dict(k: int, item: object) -> Layer:
    if not isinstance(item, dict) or "type" not in item:
        raise GradvizError(f'Layer {k} of the network JSON must be an object with a "type".')
    kind = item["type"]
    if kind == "linear":
        widths = [item.get("in"), item.get("out")]
        if not all(type(w) is int and 1 <= w <= MAX_WIDTH for w in widths):
            raise GradvizError(
                f'Layer {k} (linear) needs whole-number "in" and "out" widths from 1 to '
                f"{MAX_WIDTH:,}; it has in={widths[0]!r}, out={widths[1]!r}."
            )
        bias = item.get("bias", True)
        if not isinstance(bias, bool):
            raise GradvizError(f'Layer {k} (linear) has "bias": {bias!r}; use true or false.')
        return Linear(widths[0], widths[1], bias)
    if kind in ACTIVATIONS:
        return Activation(kind)
    raise GradvizError(
        f"Layer {k} has unknown type {kind!r}; use linear or an activation "
        f"({', '.join(ACTIVATIONS)})."
    )


def _unknown_activation(name: str) -> str:
    return f"Unknown activation {name!r}; choose one of: {', '.join(ACTIVATIONS)}."


def _module_for(layer: Layer):
    import torch.nn as nn

    if isinstance(layer, Linear):
        return nn.Linear(layer.in_features, layer.out_features, bias=layer.bias)
    return {
        "identity": nn.Identity,
        "relu": nn.ReLU,
        "tanh": nn.Tanh,
        "sigmoid": nn.Sigmoid,
        "gelu": nn.GELU,
        "softplus": nn.Softplus,
    }[layer.name]()


# ---- gradviz's model file ------------------------------------------------------------------
def save_network(path: str | Path, spec: NetworkSpec, module: torch.nn.Module) -> None:
    """Write ``module``'s state_dict to ``path`` as safetensors, with ``spec`` in the metadata.

    The module must be the one ``spec`` describes (same parameter names and shapes, floating
    point); otherwise GradvizError. Tensors are copied to the CPU; the module is not changed.
    """
    from safetensors.torch import save_file

    state = {name: t.detach() for name, t in module.state_dict().items()}
    _check_state(spec, state, f"The module to save as {str(path)!r}")
    tensors = {name: t.to("cpu", copy=True).contiguous() for name, t in state.items()}
    try:
        save_file(tensors, str(path), metadata={SPEC_METADATA_KEY: spec.to_json()})
        # safetensors writes through a private temporary file (mode 0600): give the file the
        # mode any file the user saves gets.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(path, 0o666 & ~umask)
    except OSError as exc:
        raise GradvizError(
            f"Could not write the model file {str(path)!r}: {exc.strerror}."
        ) from None


def load_network(path: str | Path) -> tuple[NetworkSpec, torch.nn.Sequential]:
    """Read gradviz's model file: the spec from its metadata, the module with its weights.

    The module is built from the spec in the tensors' dtype and loaded strictly: missing,
    extra or misshapen tensors, absent or bad metadata, non-float tensors and unreadable
    files all raise GradvizError naming the problem.
    """
    metadata, state = _read_safetensors(Path(path))
    where = f"The model file {str(path)!r}"
    text = (metadata or {}).get(SPEC_METADATA_KEY)
    if text is None:
        raise GradvizError(
            f"{where} has no {SPEC_METADATA_KEY!r} metadata, so it is not a gradviz model "
            "file; save models with gradviz (save_network) to get one."
        )
    try:
        spec = NetworkSpec.from_json(text)
    except GradvizError as exc:
        raise GradvizError(
            f"{where} holds a bad network spec in {SPEC_METADATA_KEY!r}: {exc}"
        ) from None
    _check_state(spec, state, where)
    dtypes = {t.dtype for t in state.values()}
    if len(dtypes) > 1:
        names = ", ".join(sorted(str(d).removeprefix("torch.") for d in dtypes))
        raise GradvizError(f"{where} mixes tensor dtypes ({names}); a model has one dtype.")
    module = spec.build(seed=0, dtype=dtypes.pop() if dtypes else None)
    module.load_state_dict(state, strict=True)
    return spec, module


def _read_safetensors(path: Path) -> tuple[dict[str, str] | None, dict[str, torch.Tensor]]:
    from safetensors import SafetensorError, safe_open

    if not path.is_file():
        raise GradvizError(f"The model file {str(path)!r} does not exist or is not a file.")
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata()
            state = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118
    except (SafetensorError, OSError, ValueError) as exc:
        raise GradvizError(
            f"Could not read {str(path)!r} as a safetensors model file ({exc}); "
            "gradviz's model files are written by save_network."
        ) from None
    return metadata, state


def _check_state(spec: NetworkSpec, state: dict[str, torch.Tensor], where: str) -> None:
    """Raise GradvizError unless ``state`` has exactly the names and shapes ``spec`` needs,
    all floating point."""
    expected = spec.state_shapes()
    missing = [name for name in expected if name not in state]
    extra = [name for name in state if name not in expected]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if extra:
            parts.append(f"unexpected {', '.join(extra)}")
        raise GradvizError(f"{where} does not match its network spec {spec}: {'; '.join(parts)}.")
    for name, shape in expected.items():
        got = tuple(state[name].shape)
        if got != shape:
            raise GradvizError(
                f"{where}: tensor {name!r} has shape {list(got)} but the spec {spec} "
                f"needs {list(shape)}."
            )
        if not state[name].is_floating_point():
            raise GradvizError(
                f"{where}: tensor {name!r} is {str(state[name].dtype).removeprefix('torch.')}; "
                "weights must be floating point."
            )


def module_copy(module: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """A private copy of ``module`` in ``dtype`` whose parameters are leaves again.

    ``copy.deepcopy`` of a TorchScript module clones its parameters through autograd
    (CloneBackward), so they stop being leaves and touching them warns about non-leaf
    ``.grad``. Copying without autograd and restoring each ``requires_grad`` flag gives the
    copy the original's gradient behaviour; the original is not changed.
    """
    import copy

    import torch

    with torch.no_grad():
        copied = copy.deepcopy(module)
    for original, twin in zip(module.parameters(), copied.parameters(), strict=True):
        twin.requires_grad_(original.requires_grad)
    return copied.to(dtype)


def module_from_state(spec: NetworkSpec, state: dict) -> torch.nn.Sequential:
    """``spec``'s module with the weights of ``state`` (name -> numpy array), in their dtype
    (a copy: the module shares no memory with ``state``)."""
    import torch

    tensors = {name: torch.from_numpy(array.copy()) for name, array in state.items()}
    dtype = next(iter(tensors.values())).dtype if tensors else None
    module = spec.build(dtype=dtype)
    module.load_state_dict(tensors)
    return module
