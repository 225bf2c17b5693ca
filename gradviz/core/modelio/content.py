"""A model file's bytes as its container holds them, each part read once, on first use.

``sniff`` names the container from the bytes (a torch.save zip or pickle, safetensors, a
TorchScript or .pt2 archive); the formats of ``formats.FORMATS`` are told apart inside a
container by what it holds (a safetensors header's metadata, the object a torch.save pickle
restores), which several formats ask about: this reads it for the first and keeps it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio import sniff

#: Where a torch.save checkpoint keeps the model, in the order they are looked for.
CHECKPOINT_KEYS = ("state_dict", "model_state_dict", "model")


@dataclass(frozen=True)
class TorchObject:
    """What a torch.save file restores (read without running it): ``target`` is the
    object itself or, for a checkpoint, its first entry named in CHECKPOINT_KEYS
    (``nested_in``, None at the top); ``classes`` the classes and functions it names."""

    target: Any
    nested_in: str | None
    classes: tuple[str, ...]


@dataclass
class Content:
    """One model file: its container kind (a ``sniff`` kind), its bytes and its path;
    ``limits`` (a ProgramLimits, None for the defaults) bound a trusted program's run."""

    kind: str
    data: bytes
    path: str
    limits: Any = None
    _parts: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def safetensors_metadata(self) -> dict[str, str]:
        """The ``__metadata__`` of a safetensors header, after every check on the header."""
        if "metadata" not in self._parts:
            from gradviz.core.modelio.safetensors_header import read_header

            self._parts["metadata"] = read_header(self.data, self.path)[1]
        return self._parts["metadata"]

    @property
    def torch_object(self) -> TorchObject:
        """The object a torch.save file (zip or legacy pickle) restores, with stand-ins for
        its classes (``standins.read_torch_pickle``: nothing from the file is run)."""
        if "torch" not in self._parts:
            from gradviz.core.modelio.standins import read_torch_pickle

            obj, classes = read_torch_pickle(
                self.data, self.path, zip_format=self.kind == sniff.TORCH_ZIP
            )
            target, nested_in = _checkpoint_entry(obj)
            self._parts["torch"] = TorchObject(target, nested_in, tuple(classes))
        return self._parts["torch"]

    def not_a_model(self) -> GradvizError:
        """The error for a file that no format in FORMATS supports, saying what it holds."""
        if self.kind == sniff.NUMPY:
            return GradvizError(
                f"{self.path} is a NumPy array file, not a model (it can be used as inputs: "
                "--inputs file:PATH)."
            )
        if self.kind in sniff.TORCH_CONTAINERS:
            from gradviz.core.modelio.readers import describe

            held = self.torch_object
            where = f" in its {held.nested_in!r} entry" if held.nested_in else ""
            return GradvizError(
                f"{self.path} holds {describe(held.target)}, not a state_dict or a module{where}."
            )
        return GradvizError(
            f"{self.path} is a {self.kind} file, which holds no model gradviz reads."
        )


def is_tensor_mapping(obj: Any) -> bool:
    """True for a non-empty mapping of names to tensors (a state_dict)."""
    import torch

    return (
        isinstance(obj, Mapping)
        and bool(obj)
        and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items())
    )


def _checkpoint_entry(obj: Any) -> tuple[Any, str | None]:
    """The object that holds the model: ``obj`` itself where it is a module or a
    state_dict, else a checkpoint's first entry named in CHECKPOINT_KEYS (only one level:
    an entry that is neither is not searched further)."""
    from gradviz.core.modelio.tree import is_module

    if is_module(obj) or is_tensor_mapping(obj) or not isinstance(obj, Mapping):
        return obj, None
    for key in CHECKPOINT_KEYS:
        if key in obj:
            return obj[key], key
    return obj, None
