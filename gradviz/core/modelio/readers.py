"""Readers for the formats gradviz rebuilds without trust: torch.save files (state_dicts,
checkpoints, whole pickled modules), safetensors and gradviz's own model file.

Each opener (named in ``formats.FORMATS``) returns an ``Opened``: the ModelInfo, and where
the model is runnable a function that builds the module. Nothing from the file is run or
imported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio import sniff
from gradviz.core.modelio.chain import (
    NotAChain,
    activations_between,
    build_chain,
    linear_items,
    same_width_layers,
    spec_from_items,
    with_activation,
)
from gradviz.core.modelio.content import CHECKPOINT_KEYS, Content
from gradviz.core.modelio.info import ModelInfo
from gradviz.core.modelio.limits import bounded, quoted
from gradviz.core.modelio.standins import InertObject, read_torch_pickle
from gradviz.core.modelio.tensors import (
    check_dense,
    layers_from_tensors,
    natural_key,
    nonfinite_names,
)
from gradviz.core.modelio.tree import is_module, read_tree
from gradviz.core.nets.networks import NetworkSpec

ORDER_ASSUMED = "The forward order was assumed from the order of the submodules."


@dataclass(frozen=True)
class Opened:
    """A file read without running it: its description and, if runnable, a module builder."""

    info: ModelInfo
    build: Callable[[], Any] | None = None
    spec: NetworkSpec | None = None
    probe_batch: int = 2  # batch size of the check run (a .pt2 may accept only one)
    ran: str = "code from the file"  # what runs, for the message of a failure inside it
    refusal: str | None = None  # why it is not opened without trust, where it needs it


def open_state_dict(
    content: Content,
    base: ModelInfo,
    *,
    trust: bool,
    activation: str | None,
    assume_sequential: bool,
) -> Opened:
    """A ``torch.save`` file of named tensors (a state_dict, or a checkpoint's entry that is
    one), run as a Linear chain where the tensors are one."""
    held = content.torch_object
    notes = (
        [f"The weights were taken from the checkpoint's {held.nested_in!r} entry."]
        if held.nested_in
        else []
    )
    return open_tensors(
        dict(held.target),
        replace(base, classes=held.classes),
        activation,
        natural_order=False,
        notes=notes,
        assume_sequential=assume_sequential,
    )


def open_pickled_module(
    content: Content,
    base: ModelInfo,
    *,
    trust: bool,
    activation: str | None,
    assume_sequential: bool,
) -> Opened:
    """A ``torch.save`` of a whole module (or a checkpoint's entry that is one), read with
    inert stand-ins for its classes.

    A whole module of a class of its own (not nn.Sequential) runs only with
    ``assume_sequential``: its forward is not in the file, so running its layers in
    declaration order is the user's call."""
    held = content.torch_object
    return _open_module_tree(
        held.target,
        replace(base, classes=held.classes),
        activation,
        held.nested_in,
        assume_sequential,
        trust,
    )


def read_tensors(data: bytes, base: ModelInfo, *, zip_format: bool) -> dict[str, Any]:
    """The named tensors of a state_dict file (or a checkpoint's state_dict entry), for
    loading into a class the user names; GradvizError where the file holds none."""
    import torch

    obj, _ = read_torch_pickle(data, base.path, zip_format=zip_format)
    for candidate in [obj] + [obj.get(k) for k in CHECKPOINT_KEYS if isinstance(obj, Mapping)]:
        if is_module(candidate):
            tensors = read_tree(candidate).tensors
        elif isinstance(candidate, Mapping) and candidate:
            tensors = dict(candidate)
        else:
            continue
        if all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in tensors.items()):
            check_dense(tensors, base.path)
            return tensors
    raise GradvizError(f"{base.path} holds {describe(obj)}, not a state_dict.")


def _open_module_tree(
    root: Any,
    base: ModelInfo,
    activation: str | None,
    nested_in: str | None,
    assume: bool,
    trust: bool = False,
) -> Opened:
    from gradviz.core.modelio import installed

    tree = read_tree(root)
    check_dense(tree.tensors, base.path)
    info = replace(
        base,
        layers=tuple(tree.layers),
        nonfinite_weights=nonfinite_names(tree.tensors),
        modules=installed.module_rows(root),
    )
    notes = (
        [f"The module was taken from the checkpoint's {nested_in!r} entry."] if nested_in else []
    )
    if tree.training:
        notes.append(trained_note(tree.training))
    if tree.chain is not None and not tree.order_assumed:
        # nn.Sequential of Linear layers and activations: the file records every activation.
        return _chain_opened(tree.chain, replace(info, runs_as=CHAIN_RUNS_AS), notes)
    found = installed.plan(root)
    # An installed class's own forward beats an assumed order: it is asked for (trust)
    # unless the caller confirmed the order and did not trust; its refusal offers both.
    ordered = tree.chain is not None
    if found.rebuildable and (not ordered or (found.installed and (trust or not assume))):
        either = _order_refusal(tree).removesuffix(".") + "; " + _installed_option(found)
        return _installed_opened(
            root, found, info, notes, trust, (either, tuple(tree.order)) if ordered else None
        )
    if tree.chain is None:
        reason = found.refusal if found.refusal and not found.missing else tree.reason
        return Opened(replace(info, runnable=False, not_runnable_reason=bounded(reason or "")))
    items = tree.chain
    if tree.order_assumed and not assume:
        return Opened(
            replace(
                info,
                runnable=False,
                not_runnable_reason=bounded(_order_refusal(tree)),
                order_to_confirm=tuple(tree.order),
            )
        )
    linears = [item for item in items if not isinstance(item, str)]
    notes.append(ORDER_ASSUMED)
    notes.append(skips_dropped(linears))
    if len(linears) < 2:
        return _chain_opened(items, info, notes)
    if activations_between(items):
        if tree.has_activation_modules:
            if activation is not None:
                notes.append(_unused_activation(activation, "its activation modules"))
            return _chain_opened(items, info, notes)
        lead = (
            "The file has no activation modules; a forward method may still apply functions "
            "the file does not record, so"
        )
    else:
        # One module used at several places (self.act after each layer) is kept once in
        # the file: where it runs is in the forward method, which the file does not hold.
        lead = (
            f"The file's activation modules ({', '.join(_activation_names(tree))}) do not "
            "sit between each pair of Linear layers (a shared module runs wherever the "
            "forward method calls it, which the file does not record), so they were set "
            "aside and"
        )
    act = activation or "identity"
    notes.append(_activation_sentence(act, lead))
    opened = _chain_opened(with_activation(linears, act), info, notes)
    return replace(opened, info=replace(opened.info, activation_from_caller=True))


#: How a whole nn.Sequential of Linear layers and activations runs.
CHAIN_RUNS_AS = (
    "Rebuilt from torch.nn classes (Linear layers and activations), no code from the file."
)


def _installed_opened(
    root: Any,
    found: Any,
    info: ModelInfo,
    notes: list[str],
    trust: bool,
    ordered: tuple[str, tuple[str, ...]] | None = None,
) -> Opened:
    """A module tree rebuilt from installed classes (``installed.py``): at once where
    every class is torch.nn's, after trust where one is another installed package's.
    ``ordered``: (the refusal offering both, the listed order) where its layers could also
    run in their listed order."""
    from gradviz.core.modelio import installed

    if found.installed:
        notes.append(
            f"The installed {', '.join(quoted(n) for n in found.installed[:3])} runs its own "
            "forward, as installed now; the file records only the class's name and its state."
        )
    info = replace(
        info,
        runnable=True,
        needs_trust=bool(found.installed),
        in_dim=installed.first_input_width(root),
        runs_as=found.runs_as(),
        assumptions=tuple(notes),
    )
    if found.installed and not trust and ordered is not None:
        # Listed with its order to confirm, as a class no package provides; the trust
        # question is the other way to run it.
        either, order = ordered
        reason = bounded(either)
        return Opened(
            replace(info, runnable=False, not_runnable_reason=reason, order_to_confirm=order),
            refusal=reason,
        )
    if found.installed and not trust:
        return Opened(info, refusal=bounded(installed.trust_refusal(found)))

    def build() -> Any:
        module = installed.rebuild(root, trusted=trust)
        refusal = installed.one_input_refusal(type(module))
        if refusal is not None:
            raise GradvizError(refusal)
        return module

    return Opened(info, build=build, ran="the rebuilt modules")


def _installed_option(found: Any) -> str:
    classes = ", ".join(quoted(n) for n in found.installed[:3])
    return f"or run the installed {classes} with --trust (importing it runs its code)."


def trained_note(paths: list[str]) -> str:
    """The sentence saying that a model saved in training mode is run in eval mode."""
    named = ", ".join(quoted(p) for p in paths[:3]) + (" …" if len(paths) > 3 else "")
    return (
        f"The model was saved in training mode ({named}); gradviz runs it in eval mode, as "
        "for inference: Dropout passes its input through and BatchNorm uses its running "
        "statistics."
    )


def _activation_names(tree: Any) -> list[str]:
    names = [entry for entry in tree.order if not entry.endswith("(Linear)")]
    return names[:4] + (["…"] if len(names) > 4 else [])


def skips_dropped(linears: list) -> str:
    """The sentence saying that what a forward method adds to the chain is left out."""
    square = same_width_layers(linears)
    if square:
        named = ", ".join(quoted(name) for name in square[:4]) + (" …" if len(square) > 4 else "")
        return (
            f"Anything else its forward method does is not in the file and is left out: a "
            f"skip connection (x + f(x)) around {named}, which map a width to itself as "
            "residual blocks do, would be dropped."
        )
    return (
        "Anything else its forward method does (a skip connection, a reused layer) is not "
        "in the file and is left out."
    )


def open_tensors(
    tensors: dict[str, Any],
    base: ModelInfo,
    activation: str | None,
    *,
    natural_order: bool,
    notes: list[str],
    assume_sequential: bool = False,
) -> Opened:
    """Named tensors (a state_dict or safetensors file): a Linear chain where they are one.

    Weights named as an ``nn.Sequential`` names them (``0``, ``2``, ``net.4``: one index under
    a common prefix) run as that chain. Other names (``fc1``, ``blocks.0.fc``) come from a
    class of its own whose forward (a skip connection, a shared layer) is not in the file, so
    they run only with ``assume_sequential``: never a silently wrong answer."""
    check_dense(tensors, base.path)
    if natural_order:  # safetensors keeps names sorted as text: list 2 after 0, 10 after 9
        tensors = dict(sorted(tensors.items(), key=lambda item: natural_key(item[0])))
    info = replace(
        base, layers=layers_from_tensors(tensors), nonfinite_weights=nonfinite_names(tensors)
    )
    try:
        linears = linear_items(tensors, natural_order=natural_order)
    except (NotAChain, GradvizError) as exc:  # not a chain, or a broken one: say which
        return Opened(replace(info, runnable=False, not_runnable_reason=bounded(str(exc))))
    prefixes = [item.name for item in linears]
    sequential = _sequential_names(prefixes)
    if len(linears) > 1 and not assume_sequential and not sequential:
        refusal = bounded(_names_refusal(prefixes))
        # The app offers the listed order to confirm, as for a module of a class of its own.
        return Opened(
            replace(
                info,
                runnable=False,
                not_runnable_reason=refusal,
                order_to_confirm=tuple(f"{p} (Linear)" for p in prefixes),
            )
        )
    notes = list(notes)
    if len(linears) < 2:
        return _chain_opened(with_activation(linears, "identity"), info, notes)
    if not sequential:
        notes += [ORDER_ASSUMED, skips_dropped(linears)]
    notes.append(
        "The layer order was taken from the tensor names (safetensors does not keep the "
        "saved order)."
        if natural_order
        else "The layer order was taken from the order of the tensors in the file."
    )
    act = activation or "identity"
    notes.append(_activation_sentence(act, "The file holds weights only, so"))
    opened = _chain_opened(with_activation(linears, act), info, notes)
    return replace(opened, info=replace(opened.info, activation_from_caller=True))


def open_gradviz(
    content: Content,
    base: ModelInfo,
    *,
    trust: bool,
    activation: str | None,
    assume_sequential: bool,
) -> Opened:
    """gradviz's own model file: safetensors carrying its network as ``gradviz.spec``."""
    from gradviz.core.modelio.json_depth import check_json_depth
    from gradviz.core.nets.networks import load_network

    metadata = content.safetensors_metadata
    check_json_depth(metadata["gradviz.spec"], base.path, "gradviz.spec metadata")
    spec, module = load_network(base.path)
    tensors = dict(module.state_dict())
    info = replace(
        base,
        runnable=True,
        layers=layers_from_tensors(tensors),
        nonfinite_weights=nonfinite_names(tensors),
        in_dim=spec.in_dim,
        out_dim=spec.out_dim,
        spec=str(spec),
    )
    return Opened(info, build=lambda: module.eval(), spec=spec)


def open_safetensors_tensors(
    content: Content,
    base: ModelInfo,
    *,
    trust: bool,
    activation: str | None,
    assume_sequential: bool,
) -> Opened:
    """safetensors without gradviz's metadata: named tensors, rebuilt as a chain where they
    are one."""
    content.safetensors_metadata  # noqa: B018 (the header's checks and their messages)
    return open_tensors(
        _safetensors_tensors(content.data, base.path),
        base,
        activation,
        natural_order=True,
        notes=[],
        assume_sequential=assume_sequential,
    )


def safetensors_weights(content: Content, base: ModelInfo) -> dict[str, Any]:
    """The named tensors of any safetensors file (gradviz's own included), for the user's
    own model class; the file is opened as it would be alone first, for its checks."""
    from gradviz.core.modelio.formats import format_of

    opener = format_of(content)
    opener.open(content, base, trust=False, activation=None, assume_sequential=False)
    return _safetensors_tensors(content.data, base.path)


def state_dict_weights(content: Content, base: ModelInfo) -> dict[str, Any]:
    """The named tensors of a torch.save state_dict (or a checkpoint's, or a pickled
    module's), for the user's own model class."""
    return read_tensors(content.data, base, zip_format=content.kind == sniff.TORCH_ZIP)


def _safetensors_tensors(data: bytes, path: str) -> dict[str, Any]:
    from safetensors import SafetensorError
    from safetensors.torch import load

    try:
        return load(data)
    except (SafetensorError, ValueError, RuntimeError, TypeError) as exc:
        raise GradvizError(f"{path} is not a valid safetensors file ({exc}).") from None


def _chain_opened(items: list, info: ModelInfo, notes: list[str]) -> Opened:
    try:
        spec, linears = spec_from_items(items)
        _check_network_size(spec, linears)
    except GradvizError as exc:
        return Opened(
            replace(
                info,
                runnable=False,
                not_runnable_reason=bounded(str(exc)),
                assumptions=tuple(notes),
            )
        )
    info = replace(
        info,
        runnable=True,
        in_dim=spec.in_dim,
        out_dim=spec.out_dim,
        spec=str(spec),
        assumptions=tuple(notes),
    )
    return Opened(info, build=lambda: build_chain(spec, linears), spec=spec)


def _check_network_size(spec: NetworkSpec, linears: list) -> None:
    """GradvizError when the network to build is over limits.MAX_NETWORK_BYTES (checked
    before anything is allocated: a file may name one stored tensor from many layers)."""
    from gradviz.core.modelio import limits

    itemsize = 8 if str(linears[0].weight.dtype) == "torch.float64" else 4
    size = spec.parameter_count * itemsize
    if size > limits.MAX_NETWORK_BYTES:
        raise GradvizError(
            f"The network rebuilt from these weights would hold {spec.parameter_count:,} "
            f"parameters ({limits.human_bytes(size)}), over gradviz's limit of "
            f"{limits.human_bytes(limits.MAX_NETWORK_BYTES)}."
        )


def _order_refusal(tree: Any) -> str:
    return (
        f"{quoted(tree.custom_class)} is a class of its own whose forward is not in the file, "
        f"so gradviz would have to assume its layers run in the order "
        f"{' -> '.join(tree.order)}; run it so with --assume-sequential, give its class with "
        "--model-class (and --trust), or save it as TorchScript or .pt2."
    )


def _sequential_names(prefixes: list[str]) -> bool:
    """True when the layers are named as one nn.Sequential names its children: a single
    integer index each, under one common prefix (``0``, ``2`` or ``net.0``, ``net.2``)."""
    parts = [p.split(".") for p in prefixes]
    if len({len(p) for p in parts}) != 1 or len({tuple(p[:-1]) for p in parts}) != 1:
        return False
    return all(p[-1].isdigit() for p in parts)


def _names_refusal(prefixes: list[str]) -> str:
    order = " -> ".join(quoted(p) for p in prefixes)
    return (
        f"The layers are named as a class of its own names them ({order}), and the file "
        "holds weights only, so gradviz would have to assume they run one after another in "
        "this order; run it so with --assume-sequential, give the class with --model-class "
        "(and --trust), or save the model as TorchScript or .pt2."
    )


def activation_refusal(info: ModelInfo) -> str:
    """Why a file whose activations are the caller's choice is not run without one."""
    from gradviz.core.settings.config import ACTIVATIONS

    return (
        f"{quoted(info.path)} does not record which activation runs between its Linear layers "
        f"(a wrong one gives a wrong Jacobian), so give it with --activation "
        f"({', '.join(ACTIVATIONS)})."
    )


def _unused_activation(activation: str, what: str) -> str:
    return (
        f"The activation {activation!r} you gave was not used: the file records {what}, and "
        "those run between the layers."
    )


def _activation_sentence(activation: str, lead: str) -> str:
    return (
        f"{lead} the activation between linear layers was assumed to be {activation!r} "
        "(choose another with --activation)."
    )


def describe(obj: Any) -> str:
    """What a restored object is, in a few words (``a dict with keys 'a', 'b'``)."""
    if isinstance(obj, InertObject):
        return f"an object made by {obj.qualname}"
    if isinstance(obj, Mapping):
        keys = ", ".join(repr(k) for k in list(obj)[:5])
        return f"a dict with keys {keys}" if keys else "an empty dict"
    return f"a {type(obj).__name__}"
