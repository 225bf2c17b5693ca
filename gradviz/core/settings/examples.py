"""The bundled example experiments (File > Examples): their files, settings and one line.

The examples are the JSON experiment files in the repository's ``resources/experiments``,
installed with the package as ``gradviz.examples`` (pyproject.toml maps the folder), so a
wheel install has them too. In a source checkout or an editable install the folder beside
the package is read, so the examples are those of the code that runs.
"""

from __future__ import annotations

import importlib.resources
import json
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.config import FitConfig, LiveSettings
from gradviz.core.settings.experiment import experiment_from_dict

#: The examples' folder in a source checkout, relative to the package's parent folder.
CHECKOUT_FOLDER = Path("resources") / "experiments"


@dataclass(frozen=True)
class Example:
    """One bundled experiment: ``name`` (its file's stem), its settings and one line."""

    name: str
    config: FitConfig
    live: LiveSettings
    description: str


def examples_folder() -> Traversable:
    """Where the examples are: the checkout's folder beside the package, else the
    installed package ``gradviz.examples``."""
    root = Path(__file__).resolve().parents[3]
    if (root / "pyproject.toml").is_file() and (root / CHECKOUT_FOLDER).is_dir():
        return root / CHECKOUT_FOLDER
    return importlib.resources.files("gradviz.examples")


def bundled_examples(folder: Traversable | None = None) -> list[Example]:
    """Every example, by name; GradvizError names a file that is not a valid experiment."""
    folder = examples_folder() if folder is None else folder
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".json")), key=_name)
    return [read_example(f) for f in files]


def read_example(file: Traversable) -> Example:
    """The example in ``file`` (an experiment file, optionally with a ``description``)."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GradvizError(f"The example {file.name!r} cannot be read: {exc}.") from None
    config, live = experiment_from_dict(data, source=f"the example {file.name!r}")
    description = data.get("description", "") if isinstance(data, dict) else ""
    return Example(_name(file), config, live, description or summary(config))


def summary(config: FitConfig) -> str:
    """A setup in a few words, for an example that has no description of its own."""
    coords = f"a {config.net} network" if config.net else "free coordinates"
    return (
        f"{config.n:,} points of {config.target} in {config.dim}-D, {config.method} method, "
        f"{coords}"
    )


def _name(file: Traversable) -> str:
    return file.name.removesuffix(".json")
