"""Rebuild a whole pickled module from the classes the installed environment provides.

A pickle of a module is a class reference plus its state: unpickling makes the object with
``cls.__new__(cls)`` and hands it the saved state (``__setstate__``, or ``__dict__``);
``__init__`` never runs. gradviz reads the file with inert stand-ins (``standins.py``), then,
where every class it names is installed, does the same with the installed classes: the
module is made as unpickling makes it, from the saved state alone, and nothing from the
file runs. Classes found in ``torch.nn`` (``Sequential``, ``Linear``, ``Conv2d``,
``BatchNorm1d``, ...) are torch's own code, already imported; any other installed class
(``torchvision.models.resnet.ResNet``, a package of one's own) is imported only with trust,
because importing it runs that package's code.

Only plain values go into the state (tensors as the weights-only reader made them, numbers,
strings, tuples, lists, dicts, sets); a hook, a function or any other object is named and
refused, never dropped.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import types
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio.limits import quoted
from gradviz.core.modelio.standins import InertObject
from gradviz.core.modelio.tree import HOOKS, MAX_DEPTH, hook_reason, is_module

TORCH_NN, INSTALLED, MISSING = "torch.nn", "installed", "missing"
SEQUENTIAL = "torch.nn.modules.container.Sequential"
LINEAR = "torch.nn.modules.linear.Linear"
#: The words the panel, ``inspect`` and ``jacobian --json`` use for a module rebuilt so.
RUNS_AS_TORCH_NN = "rebuilt from torch.nn classes, no code from the file"


@dataclass
class Plan:
    """How a pickled module tree would be rebuilt: each class the tree names (module and
    qualname) with where it is found (TORCH_NN, INSTALLED with the path it would be
    imported from, or MISSING); ``refusal`` one sentence where the state cannot be rebuilt
    whatever is installed."""

    classes: dict[str, str] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)  # INSTALLED class -> its package path
    refusal: str | None = None

    @property
    def missing(self) -> list[str]:
        return [name for name, where in self.classes.items() if where == MISSING]

    @property
    def installed(self) -> list[str]:
        return [name for name, where in self.classes.items() if where == INSTALLED]

    @property
    def rebuildable(self) -> bool:
        return self.refusal is None and not self.missing

    def runs_as(self) -> str:
        """One sentence: how the module will run."""
        if not self.installed:
            return f"{RUNS_AS_TORCH_NN[:1].upper()}{RUNS_AS_TORCH_NN[1:]}."
        return (
            f"Rebuilt from the installed {_classes_words(self.installed, self.origins)} "
            "(imported with your trust: its code runs) and torch.nn classes; no code from "
            "the file runs."
        )


def plan(root: Any) -> Plan:
    """Walk the module tree under ``root`` (inert stand-ins) and say how it would be
    rebuilt; imports nothing but what torch already imported."""
    import torch

    result = Plan()
    _plan_visit(root, "", 0, (set(), set()), result)
    top = _torch_nn_class(root.qualname) if is_module(root) else None
    if top is not None and top.forward is torch.nn.Module.forward:  # ModuleList, ModuleDict
        _refuse(result, f"the top-level module is a {top.__name__}, which has no forward")
    elif top is not None and result.refusal is None:
        result.refusal = one_input_refusal(top)
    return result


def _plan_visit(
    obj: Any, path: str, depth: int, marks: tuple[set[int], set[int]], result: Plan
) -> None:
    """``marks``: the modules on the path from the root (a cycle) and those already
    checked (a module the file uses twice is checked once: a file that nests shared modules
    64 deep would otherwise be walked 2**64 times)."""
    label = _label(path)
    active, done = marks
    if id(obj) in active or depth > MAX_DEPTH:
        _refuse(result, f"the module tree at {label} is cyclic or deeper than {MAX_DEPTH} levels")
        return
    if id(obj) in done:
        return
    if not is_module(obj):
        _refuse(result, f"{label} is {_type_name(obj)}, not a module")
        return
    active.add(id(obj))
    done.add(id(obj))
    name = obj.qualname
    if name not in result.classes:
        result.classes[name], origin = _where(name)
        if origin:
            result.origins[name] = origin
    if obj.pickled_args:
        _refuse(result, f"{label} ({_short(name)}) is made with arguments to its class")
    _plan_state(obj.pickled_state, label, name, result)
    for key, child in obj.pickled_state["_modules"].items():
        if child is not None:
            _plan_visit(child, f"{path}.{key}" if path else str(key), depth + 1, marks, result)
    active.discard(id(obj))


def _plan_state(state: dict, label: str, name: str, result: Plan) -> None:
    """Refuse hooks, values that are not plain, and entries that would replace a method."""
    hooked = hook_reason(state, label)
    if hooked is not None and result.refusal is None:
        result.refusal = hooked
    for key, value in state.items():
        if not isinstance(key, str):
            _refuse(result, f"{label} has a state entry named by a {type(key).__name__}")
            continue
        if key in HOOKS or key.endswith("_hooks"):
            if isinstance(value, dict) and value:
                _refuse(result, f"{label} carries a hook ({key}), code the file holds only by name")
            continue
        if key == "_modules":
            bad = [k for k, v in value.items() if v is not None and not is_module(v)]
            if bad:
                _refuse(result, f"{label}'s submodule {quoted(str(bad[0]))} is not a module")
            continue
        problem = _not_plain(value, 0, set())
        if problem is not None:
            _refuse(result, f"{label}'s {quoted(key)} holds {problem}, which is not a plain value")
        elif result.classes.get(name) == TORCH_NN and _replaces_method(_torch_nn_class(name), key):
            _refuse(result, f"{label}'s state replaces its method {quoted(key)}")


def _not_plain(value: Any, depth: int, seen: set[int]) -> str | None:
    """None for a plain value (recursively), else what the first other thing is. ``seen``:
    the containers already checked (one the file names twice through its memo is checked
    once)."""
    import torch

    if depth > MAX_DEPTH:
        return f"values nested deeper than {MAX_DEPTH} levels"
    if value is None or type(value) in (bool, int, float, complex, str, bytes):
        return None
    if type(value) in (torch.Tensor, torch.nn.Parameter):
        return None
    if isinstance(value, (torch.dtype, torch.device, torch.Size)):
        return None
    plain_containers = (tuple, list, set, frozenset, dict, OrderedDict)
    if type(value) in plain_containers and id(value) in seen:
        return None
    seen.add(id(value))
    if type(value) in (tuple, list, set, frozenset):
        return next((p for p in (_not_plain(v, depth + 1, seen) for v in value) if p), None)
    if type(value) in (dict, OrderedDict):
        items = (p for kv in value.items() for p in (_not_plain(kv[0], depth + 1, seen),
                 _not_plain(kv[1], depth + 1, seen)))  # fmt: skip
        return next((p for p in items if p), None)
    if is_module(value):
        return f"the module {quoted(value.qualname)} outside its submodules"
    if isinstance(value, type) and issubclass(value, InertObject):  # a name held as a value
        return quoted(value.qualname)
    return quoted(_type_name(value))


def _replaces_method(cls: type | None, key: str) -> bool:
    """Whether an instance entry ``key`` would hide a method or property of ``cls``."""
    if cls is None:
        return False
    try:
        found = inspect.getattr_static(cls, key)
    except AttributeError:
        return False
    return isinstance(found, (types.FunctionType, property, staticmethod, classmethod))


# ---- where a class is found ----------------------------------------------------------------
def _where(name: str) -> tuple[str, str | None]:
    """(TORCH_NN | INSTALLED | MISSING, the package path for INSTALLED)."""
    if _torch_nn_class(name) is not None:
        return TORCH_NN, None
    module = name.rpartition(".")[0]
    top = module.split(".", 1)[0]
    # A class of the saving script (``__main__``) or of torch itself outside torch.nn is not
    # one an installed package provides.
    if not module or top in ("__main__", "torch", "builtins") or not top.isidentifier():
        return MISSING, None
    if top in sys.modules:
        spec = getattr(sys.modules[top], "__spec__", None)
    else:
        try:
            spec = importlib.util.find_spec(top)  # a top-level name: nothing is imported
        except (ImportError, ValueError):
            spec = None
    if spec is None:
        return MISSING, None
    where = spec.origin or (list(spec.submodule_search_locations or []) or [top])[0]
    return INSTALLED, os.path.dirname(where) if where.endswith("__init__.py") else where


def _torch_nn_class(name: str) -> type | None:
    """The class ``name`` (module.qualname) where it is a torch.nn module class: found in
    an already imported ``torch.nn`` module, a subclass of ``nn.Module`` defined there."""
    import torch

    module_name, _, qualname = name.rpartition(".")
    if not (module_name == "torch.nn" or module_name.startswith("torch.nn.")):
        return None
    found = _attribute(sys.modules.get(module_name), qualname)
    if not (isinstance(found, type) and issubclass(found, torch.nn.Module)):
        return None
    defined_in = found.__module__ or ""
    if not defined_in.startswith("torch.nn.") or found.__qualname__ != qualname:
        return None
    return found


def _attribute(module: Any, qualname: str) -> Any:
    if module is None or "<" in qualname or any(p.startswith("__") for p in qualname.split(".")):
        return None
    found = module
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found


def _installed_class(name: str) -> type:
    """Import the installed class ``name`` (runs its package's code: only with trust)."""
    import torch

    module_name, _, qualname = name.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise GradvizError(
            f"Importing {quoted(module_name)} for the class {quoted(name)} failed: "
            f"{type(exc).__name__}."
        ) from None
    found = _attribute(module, qualname)
    if not (isinstance(found, type) and issubclass(found, torch.nn.Module)):
        raise GradvizError(f"The installed {quoted(name)} is not a torch.nn.Module class.")
    return found


# ---- the rebuild ----------------------------------------------------------------------------
def rebuild(root: Any, *, trusted: bool) -> Any:
    """The module ``root`` describes, made from installed classes as unpickling makes it,
    in eval mode. ``trusted``: installed classes outside torch.nn may be imported."""
    found = plan(root)
    if not found.rebuildable:
        raise GradvizError(found.refusal or f"{quoted(found.missing[0])} is not installed.")
    if found.installed and not trusted:
        raise GradvizError(trust_refusal(found))
    classes = {
        name: _torch_nn_class(name) if where == TORCH_NN else _installed_class(name)
        for name, where in found.classes.items()
    }
    module = _made(root, classes, {})
    return module.eval()


def _made(obj: InertObject, classes: dict[str, type], made: dict[int, Any]) -> Any:
    """One module: ``cls.__new__(cls)`` then its state, submodules first (a module used
    twice in the file is one module here, as unpickling makes it)."""
    if id(obj) in made:
        return made[id(obj)]
    cls = classes[obj.qualname]
    replaced = [key for key in obj.pickled_state if _replaces_method(cls, str(key))]
    if replaced:  # checked before for torch.nn's classes; an installed one is known now
        raise GradvizError(
            tree_refusal(f"a {cls.__name__}'s state replaces its method {quoted(replaced[0])}")
        )
    state = dict(obj.pickled_state)
    state["_modules"] = OrderedDict(
        (key, None if child is None else _made(child, classes, made))
        for key, child in obj.pickled_state["_modules"].items()
    )
    module = cls.__new__(cls)
    if hasattr(module, "__setstate__"):
        module.__setstate__(state)
    else:
        module.__dict__.update(state)
    made[id(obj)] = module
    return module


def first_input_width(root: Any) -> int | None:
    """The input width where the first layer a Sequential runs is Linear (its weight's
    columns), else None: only a Sequential's order is known without running it."""
    obj = root
    for _ in range(MAX_DEPTH):
        if not is_module(obj):
            return None
        if obj.qualname == LINEAR:
            weight = (obj.pickled_state.get("_parameters") or {}).get("weight")
            return int(weight.shape[1]) if getattr(weight, "dim", lambda: 0)() == 2 else None
        if obj.qualname != SEQUENTIAL:
            return None
        children = [c for c in obj.pickled_state["_modules"].values() if c is not None]
        if not children:
            return None
        obj = children[0]
    return None


def one_input_refusal(cls: type) -> str | None:
    """Why a module of class ``cls`` cannot be run on one input tensor, or None."""
    try:
        parameters = inspect.signature(cls.forward).parameters.values()
    except (TypeError, ValueError):
        return None
    required = [
        p.name
        for p in list(parameters)[1:]
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if len(required) > 1:
        return (
            f"{cls.__name__}'s forward takes {len(required)} inputs "
            f"({', '.join(required)}); gradviz runs models of one input tensor."
        )
    return None


def trust_refusal(found: Plan) -> str:
    """Why a module of installed classes outside torch.nn is not rebuilt without trust."""
    classes = _classes_words(found.installed, found.origins)
    return (
        f"The file's module would be rebuilt from the installed {classes}, and importing it "
        "runs that package's code (no code from the file runs); open it only if you trust "
        "that package, with --trust (trust=True)."
    )


def tree_refusal(reason: str) -> str:
    return (
        f"gradviz rebuilds a whole pickled module only from its saved state, and {reason}; "
        "remove it before saving, or save the model as TorchScript or .pt2."
    )


def module_rows(root: Any) -> tuple[tuple[str, str], ...]:
    """(path, class) for every module of the tree in submodule order, ``(top)`` first;
    a module met again (shared, or a cycle) is listed once."""
    rows: list[tuple[str, str]] = []
    seen: set[int] = set()
    stack = [("", root, 0)]
    while stack and len(rows) < 100_000:
        path, obj, depth = stack.pop()
        if not is_module(obj) or id(obj) in seen or depth > MAX_DEPTH:
            continue
        seen.add(id(obj))
        rows.append((path or "(top)", obj.qualname))
        children = [(k, v) for k, v in obj.pickled_state["_modules"].items() if v is not None]
        for key, child in reversed(children):
            stack.append((f"{path}.{key}" if path else str(key), child, depth + 1))
    return tuple(rows)


def _classes_words(names: list[str], origins: dict[str, str]) -> str:
    shown = [f"{quoted(n)} (from {origins[n]})" if n in origins else quoted(n) for n in names[:3]]
    more = " …" if len(names) > 3 else ""
    return f"class{'es' if len(names) > 1 else ''} {', '.join(shown)}{more}"


def _refuse(result: Plan, what: str) -> None:
    if result.refusal is None:
        result.refusal = tree_refusal(what)


def _label(path: str) -> str:
    return f"layer {path}" if path else "the top-level module"


def _short(name: str) -> str:
    return name.rpartition(".")[2]


def _type_name(obj: Any) -> str:
    if isinstance(obj, InertObject):
        return obj.qualname
    return type(obj).__name__
