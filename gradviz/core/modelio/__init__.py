"""Load saved models safely: detect the format from the bytes, describe, rebuild, run.

Public API (the CLI and the desktop app use exactly this)::

    inspect_model(path, *, trust=False, activation=None) -> ModelInfo
    load_model(path, *, trust=False, activation=None, in_dim=None) -> LoadedModel

Loading policy:

==================  =========================================  ==========================  =====
format              how it is read                             what runs                   trust
==================  =========================================  ==========================  =====
gradviz model file  safetensors + ``gradviz.spec`` metadata    rebuilt NetworkSpec         no
safetensors         safetensors, Linear chain from the names   rebuilt NetworkSpec         no
state_dict (.pt)    ``torch.load(weights_only=True)``          rebuilt NetworkSpec         no
whole module (.pt)  weights-only unpickler, classes -> inert   rebuilt NetworkSpec         no
TorchScript         ``torch.jit.load``                         the program itself          yes
.pt2                ``torch.export.load``                      the program itself          yes
==================  =========================================  ==========================  =====

Files over ``MAX_MODEL_BYTES`` (1 GiB) are refused before they are read. Importing this
package does not import torch.
"""

from gradviz.core.modelio.info import FORMATS, LayerInfo, LoadedModel, ModelInfo
from gradviz.core.modelio.loading import inspect_model, load_model
from gradviz.core.modelio.sniff import MAX_MODEL_BYTES, detect_format

__all__ = [
    "FORMATS",
    "MAX_MODEL_BYTES",
    "LayerInfo",
    "LoadedModel",
    "ModelInfo",
    "detect_format",
    "inspect_model",
    "load_model",
]
