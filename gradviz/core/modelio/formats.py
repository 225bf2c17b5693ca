"""The model file formats gradviz reads: one entry each, in priority order.

Each ``ModelFormat`` says how the format is named (``ModelInfo.format``, ``gradviz inspect
--json``) and titled, which file names the app's dialogs offer for it, how it is recognised
(the ``sniff`` containers it comes in, then ``supports`` on what the container holds), whether
opening it can run code from the file (so it needs trust), whether gradviz rebuilds the network
from its weights alone, and the functions that open it. ``loading`` asks the formats in the
order of ``FORMATS`` whether they support a file and opens it with the first that does;
adding a format is one entry here (and its reader).

Importing this module does not import torch: the readers are imported when first called.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gradviz.core.modelio import sniff

if TYPE_CHECKING:
    from gradviz.core.modelio.content import Content
    from gradviz.core.modelio.info import ModelInfo
    from gradviz.core.modelio.readers import Opened

#: ``open(content, base, trust=, activation=, assume_sequential=)``: the file read into an
#: Opened (its ModelInfo, named with the format, and a builder where it runs).
Opener = Callable[..., "Opened"]
#: ``weights(content, base)``: the file's named tensors, for the user's own model class.
WeightsReader = Callable[["Content", "ModelInfo"], dict[str, Any]]


@dataclass(frozen=True)
class ModelFormat:
    """One format. ``containers``: the ``sniff`` kinds whose bytes can hold it;
    ``supports(content)``: whether a file of one of them is this format (asked in FORMATS
    order). ``runs_code``: opening it can run code stored in the file, so it needs trust.
    ``rebuilt``: gradviz rebuilds the network from the file's weights alone, so the
    activation between Linear layers can be the caller's choice. ``weights``: reads the
    file's named tensors for ``--model-class`` (None: the format cannot feed one)."""

    name: str
    title: str
    extensions: tuple[str, ...]
    containers: tuple[str, ...]
    runs_code: bool
    rebuilt: bool
    supports: Callable[[Content], bool]
    open: Opener
    weights: WeightsReader | None = None


def _lazy(module: str, function: str) -> Callable[..., Any]:
    """``module.function``, imported on the first call (the readers import torch)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), function)(*args, **kwargs)

    call.__name__ = function
    return call


def _always(content: Content) -> bool:
    return True


def _has_gradviz_spec(content: Content) -> bool:
    return "gradviz.spec" in content.safetensors_metadata


def _holds_module(content: Content) -> bool:
    from gradviz.core.modelio.tree import is_module

    return is_module(content.torch_object.target)


def _holds_tensors(content: Content) -> bool:
    from gradviz.core.modelio.content import is_tensor_mapping

    return is_tensor_mapping(content.torch_object.target)


_READERS = "gradviz.core.modelio.readers"
_PROGRAMS = "gradviz.core.modelio.programs"
_TORCH_SAVE = (sniff.TORCH_ZIP, sniff.PICKLE)
_TORCH_NAMES = (".pt", ".pth", ".ckpt", ".bin")

GRADVIZ = ModelFormat(
    name="gradviz",
    title="a gradviz model file",
    extensions=(".safetensors",),
    containers=(sniff.SAFETENSORS,),
    runs_code=False,
    rebuilt=False,  # the file records its network (``gradviz.spec``), activations included
    supports=_has_gradviz_spec,
    open=_lazy(_READERS, "open_gradviz"),
)
SAFETENSORS = ModelFormat(
    name="safetensors",
    title="a safetensors file",
    extensions=(".safetensors",),
    containers=(sniff.SAFETENSORS,),
    runs_code=False,
    rebuilt=True,
    supports=_always,
    open=_lazy(_READERS, "open_safetensors_tensors"),
    weights=_lazy(_READERS, "safetensors_weights"),
)
STATE_DICT = ModelFormat(
    name="state_dict",
    title="a state_dict",
    extensions=_TORCH_NAMES,
    containers=_TORCH_SAVE,
    runs_code=False,
    rebuilt=True,
    supports=_holds_tensors,
    open=_lazy(_READERS, "open_state_dict"),
    weights=_lazy(_READERS, "state_dict_weights"),
)
PICKLED_MODULE = ModelFormat(
    name="pickled_module",
    title="a whole pickled module",
    extensions=_TORCH_NAMES,
    containers=_TORCH_SAVE,
    runs_code=False,  # read with inert stand-ins for its classes: its code is not in the file
    rebuilt=True,
    supports=_holds_module,
    open=_lazy(_READERS, "open_pickled_module"),
)
TORCHSCRIPT = ModelFormat(
    name="torchscript",
    title="a TorchScript program",
    extensions=(".pt", ".pth"),
    containers=(sniff.TORCHSCRIPT,),
    runs_code=True,
    rebuilt=False,
    supports=_always,
    open=_lazy(_PROGRAMS, "open_torchscript"),
)
EXPORTED_PROGRAM = ModelFormat(
    name="pt2",
    title="a torch.export program (.pt2)",
    extensions=(".pt2",),
    containers=(sniff.EXPORTED_PROGRAM,),
    runs_code=True,
    rebuilt=False,
    supports=_always,
    open=_lazy(_PROGRAMS, "open_exported"),
)

#: Every format, in the order they are asked whether they support a file.
FORMATS = (GRADVIZ, SAFETENSORS, STATE_DICT, PICKLED_MODULE, TORCHSCRIPT, EXPORTED_PROGRAM)
BY_NAME = {entry.name: entry for entry in FORMATS}


def format_of(content: Content) -> ModelFormat | None:
    """The first format in FORMATS that supports the file, None where none does."""
    for entry in FORMATS:
        if content.kind in entry.containers and entry.supports(content):
            return entry
    return None


def weights_format(kind: str) -> ModelFormat | None:
    """The first format that reads named tensors from a file of container ``kind`` for the
    user's own model class, None where none does."""
    return next((f for f in FORMATS if kind in f.containers and f.weights is not None), None)


def file_filter(label: str, formats: tuple[ModelFormat, ...] = FORMATS) -> str:
    """A file dialog's filter offering ``formats``' extensions (each once, in table order),
    then every file: ``Model files (*.safetensors *.pt ...);;All files (*)``."""
    names = dict.fromkeys(f"*{ext}" for entry in formats for ext in entry.extensions)
    return f"{label} ({' '.join(names)});;All files (*)"
