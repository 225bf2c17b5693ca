"""The graph of a model file, by what the file holds.

==================================  ===========================================  =======
file                                graph                                        trust
==================================  ===========================================  =======
.pt2 (torch.export)                 the program's own graph                      yes
TorchScript                         the program's inlined graph (no scopes kept)  yes
weights + ``--model-class``         torch.export (else torch.fx) of the class    yes
                                    run on zeros of ``--input-shape``
state_dict, safetensors, pickled    the module tree by names, no edges           no
module
==================================  ===========================================  =======

Every file passes modelio's checks on what it declares before torch reads it.
"""

from __future__ import annotations

import io
import os
from typing import Any

from gradviz.core.common.errors import GradvizError
from gradviz.core.graph.collapse import NODE_LIMIT, limit_nodes
from gradviz.core.graph.model import ModelGraph
from gradviz.core.modelio import formats, sniff
from gradviz.core.modelio.limits import bounded


def graph_of_file(
    path: str | os.PathLike,
    *,
    trust: bool = False,
    model_class: str | None = None,
    model_args: Any = None,
    input_shape: tuple[int, ...] | None = None,
    node_limit: int = NODE_LIMIT,
    limits: Any = None,
) -> ModelGraph:
    """The graph of the model file at ``path``, collapsed past ``node_limit`` nodes.
    ``input_shape`` is one sample's shape (3, 32, 32) for tracing ``model_class``, where the
    file does not say. A trusted program is read in a process of its own within ``limits``
    (a ProgramLimits; None: the defaults). Raises GradvizError with one sentence for
    anything it cannot read."""
    name = os.fspath(path)
    try:
        if model_class is not None:
            graph = _graph_of_user_class(name, model_class, model_args, trust, input_shape)
        else:
            data = sniff.read_model_bytes(name)
            kind = sniff.detect_format(data, name)
            program = _program_format(kind)
            if program is not None:
                graph = _graph_of_program(name, data, program, trust, limits)
            else:
                graph = _graph_of_weights(name, trust)
        return limit_nodes(graph, node_limit)
    except GradvizError as exc:
        # Names and torch's errors in a message come from the file or the user's code: one
        # line of bounded length, as modelio's own messages are.
        raise GradvizError(bounded(str(exc))) from None


def _graph_of_weights(name: str, trust: bool) -> ModelGraph:
    """State_dicts, safetensors and pickled modules: the tensors' names (inspect_model reads
    them with every check, running nothing)."""
    from gradviz.core.graph.names import graph_from_names
    from gradviz.core.modelio import inspect_model

    info = inspect_model(name, trust=trust)
    names = []
    types = {}
    for layer in info.layers:
        prefix = "" if layer.name == "(top)" else layer.name
        names.extend(f"{prefix}.{leaf}" if prefix else leaf for leaf in layer.shapes)
        if info.format == formats.PICKLED_MODULE.name and prefix:
            types[prefix] = layer.kind  # a pickled module names its classes
    return graph_from_names(names, types)


def _program_format(kind: str) -> formats.ModelFormat | None:
    """The format of a program file of container ``kind`` (one that runs code), else None."""
    return next((f for f in formats.FORMATS if kind in f.containers and f.runs_code), None)


def _graph_of_program(
    name: str, data: bytes, program: formats.ModelFormat, trust: bool, limits: Any
) -> ModelGraph:
    from gradviz.core.modelio.declared import check_torch_bytes
    from gradviz.core.modelio.info import ModelInfo
    from gradviz.core.modelio.programs import refusal

    if not trust:
        base = ModelInfo(name, program.name, len(data), runnable=True, needs_trust=True)
        raise GradvizError(refusal(base))
    check_torch_bytes(data, name, is_zip=True)
    from gradviz.core.modelio.program_process import ProgramProcess
    from gradviz.core.settings.program_limits import ProgramLimits

    # Loading the program runs code from the file: in its own process, within the limits.
    process = ProgramProcess(limits or ProgramLimits(), os.path.basename(name))
    try:
        return process.request("graph", program.name, name, data)
    finally:
        process.close()


def graph_of_program_here(format_name: str, name: str, data: bytes) -> ModelGraph:
    """The graph of a trusted program, loaded in this process (program_child's)."""
    return _PROGRAM_GRAPHS[format_name](name, data)


def _graph_of_exported(name: str, data: bytes) -> ModelGraph:
    import torch

    from gradviz.core.graph.fx_graph import graph_from_exported

    try:
        with torch.sparse.check_sparse_tensor_invariants():
            program = torch.export.load(io.BytesIO(data))
    except Exception as exc:
        raise GradvizError(
            f"{name} could not be loaded as a .pt2 program ({_line(exc)}); loading it may "
            "already have run code from the file."
        ) from None
    return graph_from_exported(program)


def _graph_of_torchscript(name: str, data: bytes) -> ModelGraph:
    import torch

    from gradviz.core.common.torch_notices import torch_deprecations_logged
    from gradviz.core.graph.torchscript import graph_from_torchscript

    try:
        with torch.sparse.check_sparse_tensor_invariants(), torch_deprecations_logged():
            module = torch.jit.load(io.BytesIO(data), map_location="cpu")
    except Exception as exc:
        raise GradvizError(f"{name} is a damaged TorchScript file ({_line(exc)}).") from None
    return graph_from_torchscript(module)


_PROGRAM_GRAPHS = {
    formats.TORCHSCRIPT.name: _graph_of_torchscript,
    formats.EXPORTED_PROGRAM.name: _graph_of_exported,
}


def _graph_of_user_class(
    name: str, model_class: str, model_args: Any, trust: bool, input_shape: tuple[int, ...] | None
) -> ModelGraph:
    """The user's class with the file's weights, traced on a batch of two zero samples."""
    import torch

    from gradviz.core.graph.trace import graph_of_module
    from gradviz.core.modelio import load_model

    loaded = load_model(name, trust=trust, model_class=model_class, model_args=model_args)
    shape = input_shape or loaded.info.in_shape
    if shape is None and loaded.info.in_dim is not None:
        shape = (loaded.info.in_dim,)
    if shape is None:
        raise GradvizError(
            f"Tracing {model_class} needs the shape of one input; give it with --input-shape "
            "(e.g. 3,32,32)."
        )
    from gradviz.core.modelio.guard import CheckedModel

    module = loaded.module
    if isinstance(module, CheckedModel):
        module = module.inner  # the class itself: the guard is not part of the graph
    dtype = next((t.dtype for t in module.parameters() if t.is_floating_point()), torch.float32)
    return graph_of_module(module, torch.zeros(2, *shape, dtype=dtype))


def _line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__).rstrip(".")[:300]
