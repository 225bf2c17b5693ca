"""TorchScript (``torch.jit.save``) and torch.export (``.pt2``) programs.

Loading either can run code stored in the file (torch's documentation says so for both; a
``.pt2`` may carry pickled weights), so gradviz opens them only with explicit trust. Once
trusted they run as they are, whatever their architecture, in a process of their own within
a time and a memory limit (program_process): the ``_open_*`` functions here run there.
"""

from __future__ import annotations

import io
import json
import os
import re
import zipfile
from dataclasses import replace
from typing import Any

from gradviz.core.common.errors import GradvizError
from gradviz.core.common.torch_notices import torch_deprecations_logged, torch_logs_kept
from gradviz.core.modelio.batch_range import (
    batch_range_note,
    described_batch_notes,
    dynamic_batch_range,
    fixed_batch_note,
    in_batch_range,
)
from gradviz.core.modelio.content import Content
from gradviz.core.modelio.declared import read_entry
from gradviz.core.modelio.formats import BY_NAME
from gradviz.core.modelio.info import LayerInfo, ModelInfo
from gradviz.core.modelio.limits import MAX_DESCRIPTION_ENTRY_BYTES
from gradviz.core.modelio.readers import Opened
from gradviz.core.modelio.tensors import (
    check_dense,
    layers_from_shapes,
    layers_from_tensors,
    nonfinite_names,
)

_CLASS_LINE = re.compile(r"^class (\w+)\(", re.MULTILINE)


def refusal(info: ModelInfo) -> str:
    """Why an untrusted program is not opened, naming --trust."""
    return (
        f"{info.path} is {BY_NAME[info.format].title}, and loading one can run code stored "
        "in the file; open it only if you trust where it came from, with --trust "
        "(trust=True)."
    )


def open_torchscript(
    content: Content,
    base: ModelInfo,
    *,
    trust: bool,
    activation: str | None,
    assume_sequential: bool,
) -> Opened:
    """Untrusted: a description (the classes its code declares) that says trust is
    needed. Trusted: the loaded program."""
    base = replace(base, runnable=True, needs_trust=True)
    if not trust:
        return Opened(replace(base, classes=_torchscript_classes_from_code(content.data)))
    return _in_own_process("torchscript", content, base)


def open_exported(
    content: Content,
    base: ModelInfo,
    *,
    trust: bool,
    activation: str | None,
    assume_sequential: bool,
) -> Opened:
    """Untrusted: a description (its weights' names and shapes) that says trust is
    needed. Trusted: the loaded program."""
    base = replace(base, runnable=True, needs_trust=True)
    if not trust:
        layers = _exported_layers_from_config(content.data)
        notes = base.assumptions + described_batch_notes(content.data)
        return Opened(replace(base, layers=layers, assumptions=notes))
    return _in_own_process("exported", content, base)


def _in_own_process(kind: str, content: Content, base: ModelInfo) -> Opened:
    """The program loaded in a process of its own, within ``content.limits``; the module
    built is a RemoteProgram that runs it there."""
    from gradviz.core.modelio.program_process import ProgramProcess
    from gradviz.core.modelio.remote_program import RemoteProgram
    from gradviz.core.settings.program_limits import ProgramLimits

    name = os.path.basename(base.path)
    process = ProgramProcess(content.limits or ProgramLimits(), name)
    info, probe_batch, trained, dtype = process.request("open", kind, content.data, base)
    return Opened(
        info, build=lambda: RemoteProgram(process, trained, dtype), probe_batch=probe_batch
    )


def _open_torchscript(data: bytes, base: ModelInfo) -> Opened:
    import torch

    try:
        # The file is TorchScript whatever torch thinks of the format's future; the user
        # cannot act on the deprecation notice, so it goes to the log.
        with (
            torch.sparse.check_sparse_tensor_invariants(),
            torch_deprecations_logged(),
            torch_logs_kept(),
        ):
            module = torch.jit.load(io.BytesIO(data), map_location="cpu")
    except Exception as exc:
        raise GradvizError(f"{base.path} is a damaged TorchScript file ({_line(exc)}).") from None
    tensors = _named_tensors(module)
    check_dense(tensors, base.path)
    layers = []
    classes = set()
    for name, sub in module.named_modules():
        kind = getattr(sub, "original_name", type(sub).__name__)
        classes.add(kind)
        own = {
            k: tuple(t.shape)
            for k, t in list(sub.named_parameters(recurse=False))
            + list(sub.named_buffers(recurse=False))
        }
        if own:
            layers.append(LayerInfo(name or "(top)", kind, own))
    info = replace(
        base,
        classes=tuple(sorted(classes)),
        layers=tuple(layers),
        nonfinite_weights=nonfinite_names(tensors),
    )
    return Opened(info, build=lambda: module.eval())


def _open_exported(data: bytes, base: ModelInfo) -> Opened:
    import torch

    try:
        # torch logs a traceback before raising; gradviz's sentence says it once.
        with torch.sparse.check_sparse_tensor_invariants(), torch_logs_kept() as causes:
            program = torch.export.load(io.BytesIO(data))
    except Exception as exc:
        # torch's own error points at the traceback it logged: say the logged cause.
        cause = causes[-1].split(". ")[0].rstrip(".")[:200] if causes else _line(exc)
        # torch.export.load may already have run code from the file: never call it damaged.
        raise GradvizError(
            f"{base.path} could not be loaded as a .pt2 program ({cause}); loading it "
            "may already have run code from the file."
        ) from None
    tensors = {k: v for k, v in program.state_dict.items() if isinstance(v, torch.Tensor)}
    check_dense(tensors, base.path)
    nodes = {node.name: node for node in program.graph.nodes}
    inputs = [nodes.get(n) for n in program.graph_signature.user_inputs]
    batch, in_dim = _declared_shape(inputs)
    _, out_dim = _declared_shape([nodes.get(n) for n in program.graph_signature.user_outputs])
    sample_batch, in_shape = _declared_sample_shape(inputs)
    batch = batch if batch is not None else sample_batch
    in_shape = in_shape or _example_sample_shape(program)
    notes = base.assumptions
    build = program.module
    if batch is not None:
        build = _in_fixed_batches(program, batch)
        notes += (fixed_batch_note(batch),)
    elif (batches := dynamic_batch_range(program, inputs)) is not None:
        build = in_batch_range(program, *batches)
        notes += tuple(note for note in [batch_range_note(*batches)] if note)
    info = replace(
        base,
        layers=_typed_layers(program, layers_from_tensors(tensors)),
        in_dim=in_dim,
        in_shape=in_shape,
        out_dim=out_dim,
        nonfinite_weights=nonfinite_names(tensors),
        assumptions=notes,
    )
    return Opened(info, build=build, probe_batch=batch or 2)


def _in_fixed_batches(program: Any, size: int):
    from gradviz.core.modelio.guard import InFixedBatches

    return lambda: InFixedBatches(program.module(), size)


def _typed_layers(program: Any, layers: tuple[LayerInfo, ...]) -> tuple[LayerInfo, ...]:
    """``layers`` with each one's class name (``Conv2d``, ``Linear``) where the program's
    graph records the module that uses its parameters (``nn_module_stack``)."""
    kinds: dict[str, str] = {}
    parameters = program.graph_signature.inputs_to_parameters
    for node in program.graph.nodes:
        owner = parameters.get(node.name) if node.op == "placeholder" else None
        for user in node.users if owner is not None else ():
            stack = user.meta.get("nn_module_stack") or {}
            path, kind = list(stack.values())[-1] if stack else ("", "")
            if path == owner.rpartition(".")[0] and kind:
                kinds[path or "(top)"] = str(getattr(kind, "__name__", kind)).rpartition(".")[2]
    return tuple(replace(layer, kind=kinds.get(layer.name, layer.kind)) for layer in layers)


def _declared_sample_shape(nodes: list) -> tuple[int | None, tuple[int, ...] | None]:
    """(batch, sample shape) of a program's single (B, *in_shape) input: the batch None where
    it is dynamic, the sample shape None unless every one of its sizes is fixed."""
    if len(nodes) != 1 or nodes[0] is None:
        return None, None
    shape = getattr(nodes[0].meta.get("val"), "shape", None)
    if shape is None or len(shape) < 2:
        return None, None
    sample = tuple(_static(size) for size in shape[1:])
    return _static(shape[0]), (None if None in sample else sample)


def _example_sample_shape(program: Any) -> tuple[int, ...] | None:
    """One sample's shape from the example input the program was exported with (where its
    graph leaves some sizes dynamic): the single tensor argument's shape without its batch."""
    try:
        args, kwargs = program.example_inputs
    except Exception:  # older programs carry none
        return None
    if kwargs or len(args) != 1 or getattr(args[0], "dim", lambda: 0)() < 2:
        return None
    return tuple(int(size) for size in args[0].shape[1:])


def _declared_shape(nodes: list) -> tuple[int | None, int | None]:
    """(batch, width) of a program's single (B, n) input or output, each None where the
    program does not declare it as a fixed number."""
    if len(nodes) != 1 or nodes[0] is None:
        return None, None
    shape = getattr(nodes[0].meta.get("val"), "shape", None)
    if shape is None or len(shape) != 2:
        return None, None
    return _static(shape[0]), _static(shape[1])


def _static(size: Any) -> int | None:
    return size if isinstance(size, int) else None  # a SymInt is a dynamic dimension


def _exported_layers_from_config(data: bytes) -> tuple[LayerInfo, ...]:
    """Weight names and shapes from a .pt2's ``model_weights_config.json`` (plain JSON, safe
    to read without trust); empty where the archive has none or it is not as expected."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entry = next(
                i
                for i in archive.infolist()
                if i.filename.endswith("weights/model_weights_config.json")
            )
            config = json.loads(_small_entry(archive, entry))["config"]
        shapes = {
            name: tuple(int(size["as_int"]) for size in item["tensor_meta"]["sizes"])
            for name, item in config.items()
        }
    except Exception:  # a description is optional; the trusted load reports real damage
        return ()
    return layers_from_shapes(shapes)


def _torchscript_classes_from_code(data: bytes) -> tuple[str, ...]:
    """Class names declared in a TorchScript archive's ``code/`` files, read as text (never
    compiled or run); empty where the archive is not as expected."""
    names = set()
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                _, _, inner = info.filename.partition("/code/")
                if not inner.endswith(".py") or info.file_size > MAX_DESCRIPTION_ENTRY_BYTES:
                    continue  # a description is optional: large entries are never read
                # TorchScript renames repeated classes ___torch_mangle_N; one name is enough.
                module = re.sub(r"\.___torch_mangle_\d+", "", inner[:-3].replace("/", "."))
                text = _small_entry(archive, info).decode("utf-8", errors="replace")
                names.update(f"{module}.{name}" for name in _CLASS_LINE.findall(text))
    except Exception:  # a description is optional; the trusted load reports real damage
        return ()
    return tuple(sorted(names))


def _small_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """An untrusted entry read for a description, only up to MAX_DESCRIPTION_ENTRY_BYTES
    (inflation stops at the declared size)."""
    return read_entry(archive, info, MAX_DESCRIPTION_ENTRY_BYTES, "the file")


def _named_tensors(module: Any) -> dict[str, Any]:
    return dict(list(module.named_parameters()) + list(module.named_buffers()))


def _line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__).rstrip(".")[:300]
