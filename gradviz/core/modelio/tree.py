"""Read a whole pickled module (a tree of inert stand-ins) as layers and, where it is made
of known torch layers, as a chain of Linear layers and activations in submodule order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gradviz.core.modelio.chain import ChainItem, LinearWeights
from gradviz.core.modelio.info import LayerInfo
from gradviz.core.modelio.limits import quoted
from gradviz.core.modelio.standins import InertObject

LINEAR = "torch.nn.modules.linear.Linear"
SEQUENTIAL = "torch.nn.modules.container.Sequential"
ACTIVATIONS = {
    "torch.nn.modules.activation.ReLU": "relu",
    "torch.nn.modules.activation.Tanh": "tanh",
    "torch.nn.modules.activation.Sigmoid": "sigmoid",
    "torch.nn.modules.activation.GELU": "gelu",
    "torch.nn.modules.activation.Softplus": "softplus",
    "torch.nn.modules.linear.Identity": "identity",
}
# In eval mode these pass their input through unchanged, so they are part of a chain.
PASS_THROUGH = {
    f"torch.nn.modules.dropout.{name}"
    for name in (
        "Dropout",
        "Dropout1d",
        "Dropout2d",
        "Dropout3d",
        "AlphaDropout",
        "FeatureAlphaDropout",
    )
}
MAX_DEPTH = 64


@dataclass
class ModuleTree:
    """What a pickled module tree holds: every module with tensors as a LayerInfo, the
    chain (None with ``reason`` where it is not one), and whether order was assumed."""

    layers: list[LayerInfo] = field(default_factory=list)
    tensors: dict[str, Any] = field(default_factory=dict)
    chain: list[ChainItem] | None = field(default_factory=list)
    reason: str | None = None
    order_assumed: bool = False
    has_activation_modules: bool = False
    order: list[str] = field(default_factory=list)  # the chain's layer names, in order
    custom_class: str | None = None  # the first class whose forward order was assumed
    training: list[str] = field(default_factory=list)  # modules saved in training mode


# A module's hooks change what it computes (forward, pre-forward) or the gradients that flow
# through it (backward); the file keeps only their names, never their code.
HOOKS = {
    "_forward_pre_hooks": "a forward pre-hook",
    "_forward_hooks": "a forward hook",
    "_backward_pre_hooks": "a backward pre-hook",
    "_backward_hooks": "a backward hook",
}


def is_module(obj: Any) -> bool:
    """True for an inert stand-in restored with a module's state (``_modules`` etc.)."""
    state = getattr(obj, "pickled_state", None) if isinstance(obj, InertObject) else None
    return isinstance(state, dict) and isinstance(state.get("_modules"), dict)


def read_tree(root: Any) -> ModuleTree:
    """Walk the module tree under ``root`` (an inert module) in submodule order."""
    tree = ModuleTree()
    _visit(root, "", 0, set(), tree)
    if tree.reason is not None:
        tree.chain = None
    return tree


def _visit(obj: Any, path: str, depth: int, seen: set[int], tree: ModuleTree) -> None:
    label = f"layer {path}" if path else "the top-level module"
    if depth > MAX_DEPTH or id(obj) in seen:
        _fail(tree, f"the module tree at {label} is cyclic or deeper than {MAX_DEPTH} levels")
        return
    seen.add(id(obj))
    if not is_module(obj):
        _fail(tree, f"{label} is {_type_name(obj)}, not a module")
        return
    state = obj.pickled_state
    qualname = obj.qualname
    _check_hooks(state, label, tree)
    if state.get("training") is True:
        tree.training.append(path or "(top)")
    own = _own_tensors(state)
    if own:
        kind = qualname.rpartition(".")[2]
        shapes = {leaf: tuple(int(s) for s in t.shape) for leaf, t in own.items()}
        tree.layers.append(LayerInfo(path or "(top)", kind, shapes))
        tree.tensors.update({f"{path}.{leaf}" if path else leaf: t for leaf, t in own.items()})
    children = [(k, v) for k, v in state["_modules"].items() if v is not None]
    if qualname == LINEAR:
        _add_linear(path, own, tree)
    elif qualname in ACTIVATIONS:
        _add_activation(qualname, state, label, tree)
        tree.order.append(f"{path or '(top)'} ({qualname.rpartition('.')[2]})")
    elif qualname in PASS_THROUGH:
        tree.order.append(f"{path or '(top)'} ({qualname.rpartition('.')[2]})")
    elif children and not own:
        if qualname != SEQUENTIAL:
            tree.order_assumed = True
            tree.custom_class = tree.custom_class or qualname
    elif qualname.startswith("torch.nn."):
        _fail(tree, f"{label} is a {qualname.rpartition('.')[2]} layer")
    else:
        _fail(tree, f"{label} is {qualname}, whose forward code is not in the file")
    # Every submodule is listed (and its tensors counted), chain or not.
    for key, child in children:
        _visit(child, f"{path}.{key}" if path else str(key), depth + 1, seen, tree)


def _check_hooks(state: dict, label: str, tree: ModuleTree) -> None:
    """Refuse a module that carries a hook: running it without the hook's code would give
    another function (and other gradients) than the saved model, silently."""
    if tree.reason is None:
        tree.reason = hook_reason(state, label)


def hook_reason(state: dict, label: str) -> str | None:
    """The sentence refusing the first hook a module's saved state carries, or None."""
    for key, what in HOOKS.items():
        hooks = state.get(key)
        if isinstance(hooks, dict) and hooks:
            hook = next(iter(hooks.values()))
            name = getattr(hook, "qualname", None) or type(hook).__name__
            return (
                f"{label} carries {what} ({quoted(name)}), code that changes what it computes "
                "and that the file holds only by name; gradviz refuses rather than run the "
                "model without it: remove the hook before saving, or save the model as "
                "TorchScript or .pt2."
            )
    return None


def _add_linear(path: str, own: dict[str, Any], tree: ModuleTree) -> None:
    weight = own.get("weight")
    if weight is None or weight.dim() != 2 or not weight.is_floating_point():
        _fail(tree, f"the Linear layer {path or '(top)'} has no floating-point 2-D weight")
        return
    tree.order.append(f"{path or '(top)'} (Linear)")
    if tree.chain is not None:
        tree.chain.append(LinearWeights(path, weight, own.get("bias")))


def _add_activation(qualname: str, state: dict, label: str, tree: ModuleTree) -> None:
    name = ACTIVATIONS[qualname]
    # gradviz's activations use torch's defaults; other settings compute something else.
    if name == "gelu" and not _is_default(state, "approximate", "none"):
        _fail(tree, f"{label} is GELU with approximate={state.get('approximate')!r}")
        return
    if name == "softplus" and not (
        _is_default(state, "beta", 1) and _is_default(state, "threshold", 20)
    ):
        _fail(tree, f"{label} is Softplus with non-default beta or threshold")
        return
    tree.has_activation_modules = tree.has_activation_modules or name != "identity"
    if tree.chain is not None:
        tree.chain.append(name)


def _is_default(state: dict, key: str, default: object) -> bool:
    value = state.get(key, default)
    # A pickle can put anything here; only a plain value equal to torch's default counts.
    return type(value) in (str, int, float) and value == default


def _own_tensors(state: dict) -> dict[str, Any]:
    import torch

    tensors = {}
    for group in ("_parameters", "_buffers"):
        entries = state.get(group)
        if isinstance(entries, dict):
            for key, value in entries.items():
                if isinstance(value, torch.Tensor):
                    tensors[str(key)] = value
    return tensors


def _fail(tree: ModuleTree, what: str) -> None:
    if tree.reason is None:
        tree.reason = (
            f"gradviz rebuilds only chains of Linear layers and activations, and {what}; "
            "such a model runs only as trusted TorchScript or .pt2."
        )


def _type_name(obj: Any) -> str:
    if isinstance(obj, InertObject):
        return obj.qualname
    return type(obj).__name__
