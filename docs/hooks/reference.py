"""The reference pages, made from the code at build time: nothing in them is written by hand.

- ``reference/cli.md``: the parser of ``gradviz/cli.py`` (``build_parser``), each command's
  ``--help`` as argparse prints it;
- ``reference/settings.md``: the settings table (every field of the app's settings
  dataclasses, ``APP_SETTINGS``, with its ``setting(...)``: title, default, limits or choices,
  CLI flag, live or reset);
- ``reference/api.md``: the library's public names (``gradviz.__all__``, each from the module
  that defines it) and the types they hand back, rendered from their docstrings by
  mkdocstrings.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
#: Columns argparse wraps its help at on these pages (it reads COLUMNS).
HELP_WIDTH = 96

#: Modules whose public classes a user receives from the library's functions (the origin
#: that ``trace_nonfinite``/``find_origin`` return, the series a ``Reader`` hands out) and the
#: trainer callbacks, documented beside the public names.
RECEIVED_MODULES: dict[str, str] = {
    "gradviz.core.origin.result": "What `trace_nonfinite` and `find_origin` return.",
    "gradviz.core.record.reader": "Reading a recording: the reader, a rank's stream, its series.",
    "gradviz.integrations.lightning": 'The Lightning callback (`pip install -e ".[lightning]"`).',
    "gradviz.integrations.transformers": (
        'The Hugging Face callback (`pip install -e ".[transformers]"`).'
    ),
}


@contextlib.contextmanager
def _project_on_path() -> Iterator[None]:
    """The checkout's gradviz importable, whatever the build's working directory."""
    sys.path.insert(0, str(ROOT))
    try:
        yield
    finally:
        sys.path.remove(str(ROOT))


@contextlib.contextmanager
def _help_width(columns: int) -> Iterator[None]:
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(columns)
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


# ---- the command line ---------------------------------------------------------------------------
def commands(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """Each subcommand of ``parser``: name -> (its one-line help, its parser), in order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            return {name: (helps.get(name, ""), sub) for name, sub in action.choices.items()}
    return {}


def cli_page() -> str:
    """The CLI reference: ``gradviz --help`` and every command's ``--help``."""
    with _project_on_path():
        from gradviz.cli import build_parser

        with _help_width(HELP_WIDTH):
            parser = build_parser()
            top = parser.format_help()
            subs = {
                name: (text, sub.format_help()) for name, (text, sub) in commands(parser).items()
            }
    lines = [
        "# Command line",
        "",
        "Every command and option of `gradviz`, as `--help` prints it (this page is made from",
        "the parser in `gradviz/cli.py` when the site is built). The [command-line guide]"
        "(../how-to/cli.md) says how the commands behave together: JSON output, exit codes,",
        "memory checks.",
        "",
        "```text",
        top.rstrip(),
        "```",
    ]
    for name, (summary, text) in subs.items():
        lines += ["", f"## gradviz {name}", "", f"{summary[:1].upper()}{summary[1:]}.", ""]
        lines += ["```text", text.rstrip(), "```"]
    return "\n".join(lines) + "\n"


# ---- the settings -------------------------------------------------------------------------------
def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


_KIND_WORDS = {int: "a whole number", float: "a number", str: "a text", bool: "true or false"}


def _allowed(row) -> str:
    """What a setting accepts, in words: its limits, its choices, a file, or its kind."""
    info = row.info
    parts = []
    if info.limits is not None:
        low, high = info.limits
        parts.append(f"{low:,} to {high:,}" if row.kind is int else f"{low:g} to {high:g}")
    if info.choices is not None:
        names = ", ".join(f"`{name}`" for name in info.choices)
        parts.append(names + (", or `file:PATH`" if info.accepts_file else ""))
    elif info.accepts_file:
        parts.append("`file:PATH`")
    if not parts:
        kind = _KIND_WORDS.get(row.kind, row.kind.__name__)
        parts.append(f"{kind} (`{info.metavar}`)" if info.metavar else kind)
    return "; ".join(parts) + ("; or none" if row.optional else "")


def _default(row) -> str:
    """The default as an experiment file writes it (JSON)."""
    return "none" if row.default is None else f"`{json.dumps(row.default)}`"


def settings_page() -> str:
    """The settings reference: one table per settings dataclass, and each choice explained."""
    with _project_on_path():
        from gradviz.core.settings.config import APP_SETTINGS
        from gradviz.core.settings.table import settings_of

        classes = APP_SETTINGS
        tables = {cls: settings_of(cls) for cls in classes}
    lines = [
        "# Settings",
        "",
        "Every setting of a run and of the display, from the settings table (each field of the",
        "settings dataclasses declares its title, tooltip, limits or choices, and whether a",
        "change applies to a running run; this page is made from those declarations when the",
        "site is built). The app's setup panel, `gradviz fit`'s options and experiment files",
        "all take these settings, with these limits and words.",
        "",
        'An experiment file is JSON: `{"fit": {...}, "display": {...}}` with the keys below',
        "(a key left out takes its default; an unknown key, a value of the wrong type or one",
        "outside its limits is named in one sentence).",
    ]
    for cls, rows in tables.items():
        section = "fit" if cls.__name__ == "FitConfig" else "display"
        doc = (cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        lines += ["", f"## `{cls.__name__}`: the `{section}` section", "", doc, ""]
        lines += [
            "| key | title | default | allowed | CLI option | a change while running |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for row in rows:
            flag = f"`{row.flag}`" if section == "fit" else "(app only)"
            live = "applies live" if row.info.live else "needs a reset"
            lines.append(
                f"| `{row.name}` | {_cell(row.title)} | {_cell(_default(row))} "
                f"| {_cell(_allowed(row))} | {flag} | {live} |"
            )
        lines += [""]
        for row in rows:
            lines += [f"`{row.name}`", f":   {_cell(row.info.tooltip)}"]
            for name, text in (row.info.choices or {}).items():
                if text:
                    lines.append(f"    - `{name}`: {_cell(text)}")
            lines.append("")
    return "\n".join(lines) + "\n"


# ---- the library --------------------------------------------------------------------------------
def public_names() -> dict[str, str]:
    """The library's public names: name -> the module that defines it (``gradviz._LAZY``)."""
    with _project_on_path():
        import gradviz

        return {name: gradviz._LAZY[name] for name in gradviz.__all__ if name in gradviz._LAZY}


def api_page() -> str:
    """The library reference: each public name, then the types the library hands back."""
    lines = [
        "# Library API",
        "",
        "`import gradviz` is light: no Qt, and torch only once one of these is used. Every",
        "name below is rendered from its docstring when the site is built; the first section",
        "is `gradviz.__all__`, each name under the module that defines it.",
        "",
        "## The `gradviz` namespace",
    ]
    for name, module in public_names().items():
        lines += ["", f"::: {module}.{name}", "    options:", "      show_root_full_path: false"]
    lines += ["", "## What the library hands back"]
    for module, summary in RECEIVED_MODULES.items():
        lines += ["", f"### `{module}`", "", summary, ""]
        lines += [f"::: {module}", "    options:", "      show_root_heading: false"]
        lines += ["      heading_level: 4", '      filters: ["!^_"]']
    return "\n".join(lines) + "\n"


PAGES = {
    "reference/cli.md": cli_page,
    "reference/settings.md": settings_page,
    "reference/api.md": api_page,
}


def on_files(files: Files, config) -> Files:
    for uri, make in PAGES.items():
        files.append(File.generated(config, uri, content=make()))
    return files
