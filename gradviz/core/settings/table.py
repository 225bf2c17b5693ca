"""The settings table: each field of a settings dataclass describes itself.

A field of ``FitConfig`` or ``LiveSettings`` (gradviz.core.settings.config) is declared with
``setting(default, title=..., tooltip=..., group=...)``, which stores a ``SettingInfo`` in the
field's metadata. This module is the one reader of that table: the setup form
(gradviz.gui.widgets.settings_form) builds its editors from ``settings_of``, the CLI builds its
``gradviz fit`` options with ``add_arguments`` / ``from_arguments``, and experiment files and
CLI values are checked by ``settings_from_dict`` and ``check_settings``. Adding a setting is one
field with its ``setting(...)`` in config.py; the form, the CLI and file validation follow.

Imports neither torch nor Qt (the form is built before torch has loaded)."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.drawn import DRAWN_PREFIX, is_drawn, parse_drawn

#: The key under which a field's SettingInfo lives in ``dataclasses.Field.metadata``.
METADATA_KEY = "gradviz"
#: The prefix that marks a file where a setting accepts one (``file:points.csv``).
FILE_PREFIX = "file:"

_TYPE_WORDS: dict[type, str] = {
    int: "a whole number",
    float: "a number",
    str: "a text",
    bool: "true or false",
}


@dataclass(frozen=True)
class SettingInfo:
    """How one setting is shown, checked and offered on the command line.

    title: the app's name for it (form label, messages). tooltip: one sentence for the form
    and, unless ``cli_help`` is given, the CLI's help. group: the form's section. live: a
    change applies to a running run (False: the run must be reset). limits: inclusive
    (low, high) for numbers. choices: allowed values, each with a one-line explanation;
    ``accepts_file`` also allows ``file:PATH`` and ``drawn:x,y x,y ...`` (drawn points).
    editor: "" picks the form's editor from the type and choices; "network" and "device"
    name the form's custom editors, and "points" adds the point-set gallery to a choice of
    generators that accepts files. flag,
    metavar, cli_help: the CLI option where it differs from ``--name`` and the tooltip.
    unset: what leaving an optional setting unset (None) does, in words; ``--help`` gives
    it as the default and the form's tooltip says it. unset_word: what the form's editor of
    an optional number shows for unset (its 0), in place of a 0 the run never uses.
    """

    title: str
    tooltip: str
    group: str
    live: bool = False
    limits: tuple[float, float] | None = None
    choices: Mapping[str, str] | None = None
    accepts_file: bool = False
    editor: str = ""
    flag: str | None = None
    metavar: str | None = None
    cli_help: str | None = None
    unset: str = ""
    unset_word: str = "unset"


def setting(default: Any, **info: Any) -> Any:
    """A dataclass field with ``default`` whose metadata is ``SettingInfo(**info)``; choices
    given as a plain sequence get empty explanations."""
    choices = info.get("choices")
    if choices is not None and not isinstance(choices, Mapping):
        info["choices"] = dict.fromkeys(choices, "")
    return dataclasses.field(default=default, metadata={METADATA_KEY: SettingInfo(**info)})


@dataclass(frozen=True)
class Setting:
    """One row of the table: a field's name, type, default and SettingInfo.

    ``kind`` is int, float, str or bool; ``optional`` says None is allowed too.
    """

    name: str
    kind: type
    optional: bool
    default: Any
    info: SettingInfo

    @property
    def title(self) -> str:
        return self.info.title

    @property
    def flag(self) -> str:
        return self.info.flag or "--" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        """The attribute argparse stores this setting's option under."""
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def cli_help(self) -> str:
        """The CLI's help: ``cli_help`` or the tooltip, with the limits where there are any
        and, for an optional setting, what leaving it unset does."""
        text = self.info.cli_help or self.info.tooltip
        text = f"{text} [{_span(self)}]" if self.info.limits else text
        return f"{text} (default: {self.info.unset})" if self.info.unset else text


@functools.cache
def settings_of(cls: type) -> tuple[Setting, ...]:
    """The rows of settings dataclass ``cls``, in field order (fields without a
    SettingInfo are not settings and are left out)."""
    hints = typing.get_type_hints(cls)
    rows = []
    for field in dataclasses.fields(cls):
        info = field.metadata.get(METADATA_KEY)
        if info is None:
            continue
        kinds = [t for t in typing.get_args(hints[field.name]) if t is not type(None)]
        kind = kinds[0] if kinds else hints[field.name]
        optional = bool(kinds) and type(None) in typing.get_args(hints[field.name])
        rows.append(Setting(field.name, kind, optional, field.default, info))
    return tuple(rows)


def find_setting(name: str, classes: tuple[type, ...]) -> Setting:
    """The row called ``name`` in ``classes`` (e.g. ``config.APP_SETTINGS``); KeyError if none."""
    for cls in classes:
        for row in settings_of(cls):
            if row.name == name:
                return row
    raise KeyError(name)


def needs_reset(name: str, classes: tuple[type, ...]) -> bool:
    """Whether changing setting ``name`` needs a fresh run (False: it applies live)."""
    return not find_setting(name, classes).info.live


def groups_of(classes: tuple[type, ...]) -> dict[str, list[Setting]]:
    """The rows of ``classes`` by group title, groups in order of first appearance."""
    grouped: dict[str, list[Setting]] = {}
    for cls in classes:
        for row in settings_of(cls):
            grouped.setdefault(row.info.group, []).append(row)
    return grouped


# ---- checking ----------------------------------------------------------------------------------
def check_settings(instance: Any) -> Any:
    """Return ``instance`` if every setting is within its limits and choices, else raise
    GradvizError naming the first one that is not (the CLI and files share these words)."""
    for row in settings_of(type(instance)):
        value = getattr(instance, row.name)
        if value is None and row.optional:
            continue
        if row.info.choices is not None:
            _check_choice(row, value)
        if row.info.limits is not None:
            _check_limits(row, value)
    return instance


def _check_choice(row: Setting, value: Any) -> None:
    if value in row.info.choices or (row.info.accepts_file and _is_file(value)):
        return
    if row.info.accepts_file and is_drawn(value):
        parse_drawn(value)  # GradvizError names the first point that is not one
        return
    names = ", ".join(row.info.choices)
    also = f", {FILE_PREFIX}PATH or {DRAWN_PREFIX}x,y x,y ..." if row.info.accepts_file else ""
    raise GradvizError(f"Unknown {row.name} {value!r}; choose one of: {names}{also}.")


def _check_limits(row: Setting, value: Any) -> None:
    low, high = row.info.limits
    if low <= value <= high:
        return
    named = row.title if row.title == row.name else f"{row.title} ({row.name})"
    raise GradvizError(f"The {named} must be {_span(row)}, got {value}.")


def _span(row: Setting) -> str:
    low, high = row.info.limits
    if row.kind is int:
        return f"a whole number between {low:,} and {high:,}"
    return f"between {low:g} and {high:g}"


def _is_file(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(FILE_PREFIX)


def settings_from_dict(cls: type, data: Mapping[str, Any], what: str = "setting") -> Any:
    """An instance of the settings dataclass ``cls`` from a hand-written dict (an experiment
    file): unknown keys, values of the wrong type and values outside their limits or choices
    are named in one GradvizError, never ignored."""
    rows = {row.name: row for row in settings_of(cls)}
    unknown = sorted(set(data) - set(rows))
    if unknown:
        raise GradvizError(
            f"Unknown {what}(s) {', '.join(unknown)}; known {what}s are {', '.join(sorted(rows))}."
        )
    values = {name: _typed_value(rows[name], value) for name, value in data.items()}
    return check_settings(cls(**values))


def _typed_value(row: Setting, value: Any) -> Any:
    """``value`` if it has the setting's type (whole numbers pass as numbers), else a
    GradvizError; files are hand-written, so a wrong type must not surface as a TypeError."""
    if value is None and row.optional:
        return None
    if row.kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, row.kind) and not (row.kind is int and isinstance(value, bool)):
        return value
    raise GradvizError(f"Setting {row.name!r} must be {_TYPE_WORDS[row.kind]}, got {value!r}.")


# ---- command line ------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """One option per setting of ``cls``: flag, type, default, choices and help from the table."""
    for row in settings_of(cls):
        options: dict[str, Any] = {"default": row.default, "help": row.cli_help}
        if row.kind is bool:
            options["action"] = "store_true" if not row.default else argparse.BooleanOptionalAction
        else:
            options["type"] = row.kind
            if row.info.choices is not None and not row.info.accepts_file:
                options["choices"] = list(row.info.choices)
            if row.info.metavar:
                options["metavar"] = row.info.metavar
        parser.add_argument(row.flag, dest=row.dest, **options)


def from_arguments(cls: type, args: argparse.Namespace) -> Any:
    """The ``cls`` instance that parsed options (from ``add_arguments``) describe, checked
    against the table's limits and choices (GradvizError: one sentence)."""
    return check_settings(cls(**{row.name: getattr(args, row.dest) for row in settings_of(cls)}))
