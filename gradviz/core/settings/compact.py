"""An experiment in one line: ``helix;n=200;net=8-16:relu-3;method=masked``.

Settings are ``name=value`` joined by ``;``; the first may be a point set alone (the
target). Names are those of experiment files (FitConfig's and LiveSettings' fields), values
are written as on the command line (``none`` unsets an optional one, ``true``/``false`` for
switches) and checked as experiment files are. ``to_compact`` writes the settings that differ
from the defaults, the target always first, so the line is short and reads back exactly.

``gradviz gui --experiment`` takes a file or such a line: an existing file is read as a
file; any other text with ``=`` or ``;`` in it is a line of settings (``experiment_from``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.config import FitConfig, LiveSettings
from gradviz.core.settings.experiment import experiment_from_dict, load_experiment
from gradviz.core.settings.table import Setting, settings_of

SEPARATOR = ";"
_TRUE, _FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")


def is_compact(text: str) -> bool:
    """Whether ``text`` (not an existing file) is a line of settings rather than a path."""
    return "=" in text or SEPARATOR in text


def experiment_from(text: str) -> tuple[FitConfig, LiveSettings]:
    """The settings of ``--experiment``: an experiment file, or a line of settings."""
    if Path(text).is_file() or not is_compact(text):
        return load_experiment(text)
    return parse_compact(text)


def parse_compact(text: str) -> tuple[FitConfig, LiveSettings]:
    """FitConfig and LiveSettings from a line of settings; GradvizError names what is wrong."""
    rows = {row.name: (section, row) for section, cls in _SECTIONS for row in settings_of(cls)}
    parts = [part.strip() for part in text.split(SEPARATOR)]
    data: dict[str, dict[str, Any]] = {"fit": {}, "display": {}}
    for k, part in enumerate(p for p in parts if p):
        name, eq, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not eq:
            if k > 0:
                raise GradvizError(
                    f"{part!r} in {text!r} is not name=value; join settings as name=value "
                    f"with ';' (the first may be a point set alone), e.g. {EXAMPLE}."
                )
            name, value = "target", part
        if name not in rows:
            raise GradvizError(
                f"Unknown setting {name!r} in {text!r}; known settings are "
                f"{', '.join(sorted(rows))}."
            )
        section, row = rows[name]
        if name in data[section]:
            raise GradvizError(f"{text!r} sets {name} twice; give each setting once.")
        data[section][name] = _from_text(row, value)
    return experiment_from_dict(data, source=f"the experiment {text!r}")


def to_compact(config: FitConfig, live: LiveSettings | None = None) -> str:
    """The line of settings that reads back as ``config`` (and ``live``): the target, then
    every setting that is not its default. GradvizError where a value holds a ';'."""
    parts = []
    for section, cls in _SECTIONS:
        instance = config if section == "fit" else live
        if instance is None:
            continue
        for row in settings_of(cls):
            value = getattr(instance, row.name)
            if row.name != "target" and value == row.default:
                continue
            text = _to_text(value)
            if SEPARATOR in text:
                raise GradvizError(
                    f"The {row.title} {text!r} holds a ';', which a line of settings cannot; "
                    "save an experiment file instead."
                )
            bare = row.name == "target" and "=" not in text
            parts.append(text if bare else f"{row.name}={text}")
    return SEPARATOR.join(parts)


EXAMPLE = "helix;n=200;net=8-16:relu-3;method=masked"
_SECTIONS: tuple[tuple[str, type], ...] = (("fit", FitConfig), ("display", LiveSettings))


def _from_text(row: Setting, text: str) -> Any:
    if row.optional and text.lower() in ("none", ""):
        return None
    try:
        if row.kind is bool:
            if text.lower() in _TRUE + _FALSE:
                return text.lower() in _TRUE
            raise ValueError(text)
        if row.kind is int:
            return int(text)
        if row.kind is float:
            return float(text)
    except ValueError:
        words = {bool: "true or false", int: "a whole number", float: "a number"}[row.kind]
        raise GradvizError(f"Setting {row.name!r} must be {words}, got {text!r}.") from None
    return text


def _to_text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)
