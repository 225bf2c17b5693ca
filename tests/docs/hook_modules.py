"""The docs' build hooks (docs/hooks/*.py), imported by path: they are not a package."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

HOOKS = Path(__file__).resolve().parents[2] / "docs" / "hooks"


def load_hook(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", HOOKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
