"""Experiment files: a run's settings as JSON, so an experiment can be shared and reopened.

Format: ``{"fit": {FitConfig fields}, "display": {LiveSettings fields}}``, with an optional
``"description"``: one line saying what the experiment shows (File > Examples lists it); a
bare object of FitConfig fields is accepted too. Unknown settings, values of the wrong type
and values outside their limits or choices are errors, never silently ignored: the checks
are the settings table's (gradviz.core.settings.table), the same ones the CLI applies.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.config import FitConfig, LiveSettings
from gradviz.core.settings.table import settings_from_dict


def load_experiment(path: str | Path) -> tuple[FitConfig, LiveSettings]:
    """Read an experiment file; GradvizError says what is wrong with it."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GradvizError(f"The experiment file {str(path)!r} does not exist.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise GradvizError(f"The experiment file {str(path)!r} cannot be read: {exc}.") from None
    except json.JSONDecodeError as exc:
        raise GradvizError(
            f"The experiment file {str(path)!r} is not valid JSON ({exc.msg} at line {exc.lineno})."
        ) from None
    return experiment_from_dict(data, source=str(path))


def experiment_from_dict(
    data: object, source: str = "the experiment"
) -> tuple[FitConfig, LiveSettings]:
    if not isinstance(data, dict):
        raise GradvizError(f"{source} must hold a JSON object of settings.")
    sectioned = "fit" in data or "display" in data
    fit_part = data.get("fit", {}) if sectioned else data
    display = data.get("display", {}) if sectioned else {}
    if not isinstance(fit_part, dict) or not isinstance(display, dict):
        raise GradvizError(f'In {source}, "fit" and "display" must be JSON objects.')
    if sectioned and not isinstance(data.get("description", ""), str):
        raise GradvizError(f'In {source}, "description" must be a text (one line).')
    try:
        config = settings_from_dict(FitConfig, fit_part)
        live = settings_from_dict(LiveSettings, display, what="display setting")
    except GradvizError as exc:
        raise GradvizError(f"In {source}: {exc}") from None
    return config, live


def experiment_to_dict(config: FitConfig, live: LiveSettings) -> dict:
    return {"fit": config.to_dict(), "display": asdict(live)}


def save_experiment(path: str | Path, config: FitConfig, live: LiveSettings) -> None:
    text = json.dumps(experiment_to_dict(config, live), indent=2)
    try:
        Path(path).write_text(text + "\n", encoding="utf-8")
    except OSError as exc:
        raise GradvizError(f"The experiment could not be saved to {str(path)!r}: {exc}.") from None
