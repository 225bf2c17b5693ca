"""The two entry points: ``inspect_model`` (describe a file, run nothing) and ``load_model``
(a module ready to run). The CLI and the desktop app use exactly these."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
from dataclasses import replace

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio import sniff
from gradviz.core.modelio.content import Content
from gradviz.core.modelio.formats import format_of, weights_format
from gradviz.core.modelio.info import LoadedModel, ModelInfo
from gradviz.core.modelio.limits import bounded, escaped
from gradviz.core.modelio.readers import Opened
from gradviz.core.settings.config import ACTIVATIONS
from gradviz.core.settings.program_limits import ProgramLimits


def _bounded_errors(function):
    """Names and sizes in a message come from the file: every GradvizError leaving the
    public functions is one line of at most limits.MESSAGE_CHARS characters, with the
    file's name escaped (a name may hold a newline)."""

    @functools.wraps(function)
    def wrapper(path, *args, **kwargs):
        try:
            with paused_gc():
                return function(path, *args, **kwargs)
        except GradvizError as exc:
            message, name = str(exc), os.fspath(path)
            if isinstance(name, str) and name:
                message = message.replace(name, escaped(name))
            raise GradvizError(bounded(message)) from None

    return wrapper


@contextlib.contextmanager
def paused_gc():
    """Python's cyclic garbage collector paused for the block, where it was running.

    Reading a file of 10,000 layers makes some 10^6 objects that live on; the collector
    walks all of them again and again as they are made (1.8 s of 10 s for 10,000
    Linear(1, 1) layers). They hold no cycles to collect, so nothing is lost by waiting
    until the block ends. Where the collector is already off (the app collects on a timer
    of its own), it stays off."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@_bounded_errors
def inspect_model(
    path: str | os.PathLike,
    *,
    trust: bool = False,
    activation: str | None = None,
    assume_sequential: bool = False,
    max_bytes: int = sniff.MAX_MODEL_BYTES,
    limits: ProgramLimits | None = None,
) -> ModelInfo:
    """Describe the model file at ``path`` without running anything from it.

    TorchScript and .pt2 programs are loaded (to list their layers) only with ``trust``;
    untrusted, they are described with ``needs_trust=True``. ``activation`` is the one to
    assume where the file holds weights only (default ``identity``). A whole pickled module
    made of torch.nn classes is runnable (rebuilt from them); one of another installed
    package's class needs ``trust`` (``needs_trust``); one of a class of its own is runnable
    only with ``assume_sequential`` (its layers then run in the order they were declared).
    A trusted program is loaded in a process of its own within ``limits`` (default
    ProgramLimits()), which is stopped once it is described.
    Raises GradvizError for anything that is not a readable model file."""
    opened = _open(
        path,
        trust=trust,
        activation=activation,
        assume_sequential=assume_sequential,
        max_bytes=max_bytes,
        limits=limits,
    )
    return opened.info


@_bounded_errors
def load_model(
    path: str | os.PathLike,
    *,
    trust: bool = False,
    activation: str | None = None,
    in_dim: int | None = None,
    assume_sequential: bool = False,
    model_class: str | None = None,
    model_args: str | dict | list | None = None,
    max_bytes: int = sniff.MAX_MODEL_BYTES,
    limits: ProgramLimits | None = None,
) -> LoadedModel:
    """The model at ``path`` as a module on the CPU in eval mode, mapping (B, n) inputs to
    (B, m) outputs (see LoadedModel for what ``module`` is for each format).

    ``trust`` must be true for TorchScript and .pt2 programs (they can run code from the
    file). ``in_dim`` is the input width where the file does not declare one (TorchScript);
    where it does, a different ``in_dim`` is an error. A program whose input width is known
    is run once on a batch of zeros, to check its output and learn ``out_dim``.

    ``model_class`` (``path/to/file.py:Net`` or ``package.module:Net``, built with
    ``model_args``, JSON) runs the file's weights in the user's own class; importing it runs
    the user's code, so it needs ``trust``.

    A trusted TorchScript or .pt2 program is loaded and run in a process of its own, within
    ``limits`` (default ProgramLimits(): 60 s per step, 8 GiB): past either, or once
    ``limits.cancel`` is set, that process is stopped and the step fails with one sentence.
    Raises GradvizError for anything that cannot be loaded, with one sentence saying why."""
    if model_class is not None:
        return _in_user_class(path, model_class, model_args, trust=trust, max_bytes=max_bytes)
    opened = _open(
        path,
        trust=trust,
        activation=activation,
        assume_sequential=assume_sequential,
        max_bytes=max_bytes,
        limits=limits,
    )
    info = opened.info
    if info.needs_trust and not trust and opened.refusal is not None:
        raise GradvizError(opened.refusal)  # installed classes a pickled module names
    if info.needs_trust and not trust:
        from gradviz.core.modelio.programs import refusal

        raise GradvizError(refusal(info))
    if not info.runnable or opened.build is None:
        raise GradvizError(info.not_runnable_reason or f"{info.path} cannot be run.")
    return _ready(opened, in_dim)


def _in_user_class(
    path: str | os.PathLike, model_class: str, model_args, *, trust: bool, max_bytes: int
) -> LoadedModel:
    from gradviz.core.modelio import user_class
    from gradviz.core.modelio.guard import CheckedModel

    if not trust:
        raise GradvizError(user_class.class_refusal(model_class))
    name = os.fspath(path)
    data, kind = _checked_bytes(name, max_bytes)
    base = ModelInfo(path=name, format=kind, size_bytes=len(data), runnable=False, needs_trust=True)
    weights = weights_format(kind)
    if weights is None:
        raise GradvizError(
            f"{name} is a {kind} file; --model-class needs a state_dict (.pt) or safetensors "
            "file of weights."
        )
    tensors = weights.weights(Content(kind, data, name), base)
    base = replace(base, format=weights.name)
    from gradviz.core.modelio.tensors import layers_from_tensors, nonfinite_names

    base = replace(
        base, layers=layers_from_tensors(tensors), nonfinite_weights=nonfinite_names(tensors)
    )
    module, info = user_class.build(model_class, model_args, tensors, base)
    checked = CheckedModel(module, None, os.path.basename(name), ran="your model class")
    return LoadedModel(module=checked, info=info)


def _ready(opened: Opened, in_dim: int | None) -> LoadedModel:
    info = opened.info
    if in_dim is not None and in_dim < 1:
        raise GradvizError(f"The input width must be at least 1, not {in_dim}.")
    if in_dim is not None and info.in_dim is not None and in_dim != info.in_dim:
        raise GradvizError(f"{info.path} takes inputs of width {info.in_dim}, not {in_dim}.")
    if opened.spec is not None:
        # gradviz built this nn.Sequential itself from the spec: it runs no code from the
        # file, and the Jacobian engine recognises it as per-sample by construction.
        return LoadedModel(module=opened.build(), info=info, spec=opened.spec)
    return _ready_program(opened, in_dim)


def _ready_program(opened: Opened, in_dim: int | None) -> LoadedModel:
    """A trusted program, wrapped so that its failures become GradvizError, and run once
    on zeros where its input width is known."""
    from gradviz.core.modelio.guard import CheckedModel, probe_output_width
    from gradviz.core.modelio.remote_program import RemoteProgram

    info = opened.info
    width = info.in_dim if info.in_dim is not None else in_dim
    inner = opened.build()
    remote = isinstance(inner, RemoteProgram)  # a trusted program, in its own process
    trained = inner.trained if remote else _eval_mode(inner)
    if trained:
        from gradviz.core.modelio.readers import trained_note

        info = replace(info, assumptions=info.assumptions + (trained_note(trained),))
    name = os.path.basename(info.path)
    model = inner.checked(width, name) if remote else CheckedModel(inner, width, name, opened.ran)
    if width is not None:
        out_dim = probe_output_width(model, width, _float_dtype(inner), opened.probe_batch)
        notes = info.assumptions
        if info.in_dim is None:
            notes += (
                f"The input width {width} was given by you (--in-dim); the file does "
                "not declare it.",
            )
        info = replace(info, in_dim=width, out_dim=out_dim, assumptions=notes)
    return LoadedModel(module=model, info=info)


def _eval_mode(module) -> list[str]:
    """Put ``module`` in eval mode; the names of its modules that were in training mode."""
    import torch

    if not isinstance(module, torch.nn.Module):
        return []
    trained = [name or "(top)" for name, sub in module.named_modules() if sub.training]
    # torch.export's modules may refuse eval(); they run in the mode they were exported in.
    try:
        module.eval()
    except NotImplementedError:
        return []
    return trained


def _float_dtype(module):
    import torch

    for tensor in list(module.parameters()) + list(module.buffers()):
        if tensor.is_floating_point():
            return tensor.dtype
    return torch.float32


def _open(
    path: str | os.PathLike,
    *,
    trust: bool,
    activation: str | None,
    max_bytes: int,
    assume_sequential: bool = False,
    limits: ProgramLimits | None = None,
) -> Opened:
    if activation is not None and activation not in ACTIVATIONS:
        raise GradvizError(
            f"Unknown activation {activation!r}; choose one of: {', '.join(ACTIVATIONS)}."
        )
    name = os.fspath(path)
    data, kind = _checked_bytes(name, max_bytes)
    base = ModelInfo(
        path=name, format=kind, size_bytes=len(data), runnable=False, needs_trust=False
    )
    content = Content(kind, data, name, limits)
    return _read(content, base, trust=trust, activation=activation, assume=assume_sequential)


def _checked_bytes(name: str, max_bytes: int) -> tuple[bytes, str]:
    """The file's bytes and kind, after every check on what it declares: a torch file is
    judged from its parts (zip central directory, pickle entries) before it is read whole."""
    with sniff.open_model_file(name, max_bytes) as handle:
        kind = sniff.detect_format(handle, name)
        if kind in sniff.TORCH_CONTAINERS:
            from gradviz.core.modelio.declared import check_torch_bytes

            check_torch_bytes(handle, name, is_zip=kind != sniff.PICKLE)
        return sniff.read_checked(handle, name, max_bytes), kind


def _read(
    content: Content, base: ModelInfo, *, trust: bool, activation: str | None, assume: bool
) -> Opened:
    """The file opened by the first format in ``formats.FORMATS`` that supports it."""
    entry = format_of(content)
    if entry is None:
        raise content.not_a_model()
    return entry.open(
        content,
        replace(base, format=entry.name),
        trust=trust,
        activation=activation,
        assume_sequential=assume,
    )
