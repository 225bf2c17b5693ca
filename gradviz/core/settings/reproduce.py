"""The ``gradviz fit ...`` line that reproduces a distance-fit setup headless.

The desktop app's Edit > Copy as command puts this line on the clipboard, so a run seen in
the window can be repeated in a terminal or a script. Only settings that differ from the
defaults are written; point files are written as ``file:PATH`` with an absolute path, so
the line works from any folder. Imports neither torch nor Qt.
"""

from __future__ import annotations

import os
import shlex

from gradviz.core.settings.config import FitConfig
from gradviz.core.settings.table import FILE_PREFIX, settings_of


def fit_command_line(config: FitConfig) -> str:
    """``gradviz fit`` plus one option per setting of ``config`` that is not the default
    (options named as the settings table names them for ``add_arguments``).

    Values are shell-quoted (``shlex.quote``); a value that starts with ``-`` is written
    as ``--option=VALUE`` so that argparse does not take it for an option. Relative point
    files become absolute (resolved against the current folder).
    """
    words = ["gradviz", "fit"]
    for row in settings_of(type(config)):
        value = getattr(config, row.name)
        if value == row.default:
            continue
        option = row.flag
        if row.kind is bool:  # store_true flags (default False) or --flag / --no-flag
            words.append(option if value else "--no-" + option.removeprefix("--"))
            continue
        text = _absolute_file_spec(value) if row.info.accepts_file else _format(value)
        words.append(f"{option}={text}" if text.startswith("-") else option)
        if not text.startswith("-"):
            words.append(text)
    return " ".join(shlex.quote(word) for word in words)


def _format(value: object) -> str:
    # repr of a float round-trips exactly through float() (argparse's type for --lr).
    return repr(value) if isinstance(value, float) else str(value)


def _absolute_file_spec(spec: str) -> str:
    if not spec.startswith(FILE_PREFIX) or spec == FILE_PREFIX:
        return spec
    return FILE_PREFIX + os.path.abspath(spec[len(FILE_PREFIX) :])
