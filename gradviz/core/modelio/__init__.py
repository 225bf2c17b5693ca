"""Load saved models safely: detect the format from the bytes, describe, rebuild, run.

Public API (the CLI and the desktop app use exactly this)::

    inspect_model(path, *, trust=False, activation=None, assume_sequential=False,
                  limits=None) -> ModelInfo
    load_model(path, *, trust=False, activation=None, in_dim=None, assume_sequential=False,
               model_class=None, model_args=None, limits=None) -> LoadedModel

Loading policy (each format is one entry of ``formats.FORMATS``):

==================  =========================================  ==========================  =====
format              how it is read                             what runs                   trust
==================  =========================================  ==========================  =====
gradviz model file  safetensors + ``gradviz.spec`` metadata    rebuilt NetworkSpec         no
safetensors         safetensors, Linear chain from the names   rebuilt NetworkSpec         no
state_dict (.pt)    ``torch.load(weights_only=True)``          rebuilt NetworkSpec         no
whole Sequential    weights-only unpickler, classes -> inert   rebuilt NetworkSpec         no
whole module of     as above, then cls.__new__ + saved state   torch.nn's own layers       no
  torch.nn classes    from the installed torch.nn classes
whole module of an  as above, from the installed class         the installed class         yes
  installed class
whole module, own   as above; order is a guess                 only with assume_sequential no
  class (.pt)
+ model_class       weights read as above, strict load         the user's class            yes
TorchScript         ``torch.jit.load``                         the program itself          yes
.pt2                ``torch.export.load``                      the program itself          yes
==================  =========================================  ==========================  =====

Every file is judged on what it declares before anything of that size is read, allocated or
inflated (``declared.py``, ``pickle_scan.py``; the limits are in ``limits.py``). A trusted
TorchScript or .pt2 program is loaded and run in a process of its own, within ``limits``
(a ProgramLimits: seconds per step, GiB; ``program_process.py``). Importing this package
does not import torch.
"""

from gradviz.core.modelio.formats import FORMATS, ModelFormat
from gradviz.core.modelio.info import LayerInfo, LoadedModel, ModelInfo
from gradviz.core.modelio.loading import inspect_model, load_model
from gradviz.core.modelio.sniff import MAX_MODEL_BYTES, detect_format

__all__ = [
    "FORMATS",
    "MAX_MODEL_BYTES",
    "LayerInfo",
    "LoadedModel",
    "ModelFormat",
    "ModelInfo",
    "detect_format",
    "inspect_model",
    "load_model",
]
