"""Run a state_dict in the user's own model class (``--model-class file.py:Net``).

Importing the class runs the user's code, so it needs trust, like TorchScript. The weights are
still read safely (weights-only, after the bounded checks), then loaded with
``load_state_dict(strict=True)``: every key and shape must match.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import sys
from dataclasses import replace
from typing import Any

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio.info import ModelInfo
from gradviz.core.modelio.limits import quoted


def class_refusal(model_class: str) -> str:
    return (
        f"--model-class {quoted(model_class)} imports and runs your code; give --trust to allow "
        "it (trust=True)."
    )


def import_class(model_class: str) -> type:
    """The class named ``path/to/file.py:Net`` or ``package.module:Net``."""
    where, _, name = model_class.rpartition(":")
    if not where or not name:
        raise GradvizError(
            f"--model-class takes path/to/file.py:ClassName or package.module:ClassName, not "
            f"{quoted(model_class)}."
        )
    try:
        if where.endswith(".py") or os.sep in where:
            module = _import_file(where)
        else:
            module = importlib.import_module(where)
    except GradvizError:
        raise
    except Exception as exc:
        raise GradvizError(
            f"Importing {quoted(where)} for --model-class failed: {type(exc).__name__}: "
            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}."
        ) from None
    cls = getattr(module, name, None)
    if not isinstance(cls, type):
        raise GradvizError(f"{quoted(where)} has no class named {quoted(name)}.")
    return cls


def _import_file(path: str):
    if not os.path.isfile(path):
        raise GradvizError(f"--model-class file {quoted(path)} does not exist.")
    with open(path, "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()[:16]
    name = f"gradviz_user_model_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def parse_args(model_args: str | dict | list | None) -> tuple[list, dict]:
    """Constructor arguments: a JSON object (keywords) or list (positional)."""
    if model_args is None:
        return [], {}
    value = model_args
    if isinstance(model_args, str):
        try:
            value = json.loads(model_args)
        except json.JSONDecodeError as exc:
            raise GradvizError(f"--model-args is not valid JSON ({exc.msg}).") from None
    if isinstance(value, dict):
        return [], value
    if isinstance(value, list):
        return value, {}
    raise GradvizError("--model-args must be a JSON object (keywords) or list (positional).")


def build(
    model_class: str, model_args: Any, tensors: dict[str, Any], info: ModelInfo
) -> tuple[Any, ModelInfo]:
    """An instance of the class with the file's tensors loaded strictly, in eval mode."""
    cls = import_class(model_class)
    args, kwargs = parse_args(model_args)
    try:
        module = cls(*args, **kwargs)
    except Exception as exc:
        raise GradvizError(
            f"Creating {cls.__name__} with --model-args failed: {type(exc).__name__}: "
            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}."
        ) from None
    _load_strictly(module, tensors, info.path, cls.__name__)
    module.eval()
    notes = info.assumptions + (
        f"The model is {class_label(model_class, cls)} (from --model-class), with the file's "
        "weights loaded strictly.",
    )
    return module, replace(info, runnable=True, assumptions=notes, spec=None)


def class_label(model_class: str, cls: type) -> str:
    """How to name the user's class: ``net.py:Net`` for a class from a file (imported under
    a private module name), ``package.module.Net`` otherwise."""
    where, _, _ = model_class.rpartition(":")
    if where.endswith(".py") or os.sep in where:
        return f"{os.path.basename(where)}:{cls.__qualname__}"
    return f"{cls.__module__}.{cls.__qualname__}"


def _load_strictly(module: Any, tensors: dict[str, Any], path: str, name: str) -> None:
    expected = module.state_dict()
    missing = [k for k in expected if k not in tensors]
    unexpected = [k for k in tensors if k not in expected]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing (first {quoted(missing[0])})")
        if unexpected:
            parts.append(f"{len(unexpected)} not in {name} (first {quoted(unexpected[0])})")
        raise GradvizError(
            f"The weights in {path} do not fit {name}: {' and '.join(parts)}; check "
            "--model-class and --model-args."
        )
    for key, tensor in tensors.items():
        if tuple(expected[key].shape) != tuple(tensor.shape):
            raise GradvizError(
                f"The weights in {path} do not fit {name}: {quoted(key)} is "
                f"{tuple(tensor.shape)} in the file but {tuple(expected[key].shape)} in the "
                "class; check --model-args."
            )
    module.load_state_dict(tensors, strict=True)
