"""The ``gradviz fit ...`` line that reproduces a distance-fit setup headless.

The desktop app's Edit > Copy as command puts this line on the clipboard, so a run seen in
the window can be repeated in a terminal or a script. Only settings that differ from the
defaults are written; point files are written as ``file:PATH`` with an absolute path, so
the line works from any folder. Imports neither torch nor Qt.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import fields

from gradviz.core.config import FitConfig
from gradviz.core.pointsets import FILE_PREFIX


def fit_command_line(config: FitConfig) -> str:
    """``gradviz fit`` plus one option per setting of ``config`` that is not the default.

    Values are shell-quoted (``shlex.quote``); a value that starts with ``-`` is written
    as ``--option=VALUE`` so that argparse does not take it for an option. Relative point
    files become absolute (resolved against the current folder).
    """
    default = FitConfig()
    words = ["gradviz", "fit"]
    for f in fields(FitConfig):
        value = getattr(config, f.name)
        if value == getattr(default, f.name):
            continue
        option = "--" + f.name.replace("_", "-")
        if isinstance(value, bool):  # only store_true flags exist (their default is False)
            if value:
                words.append(option)
            continue
        text = _absolute_file_spec(value) if f.name in ("target", "init") else _format(value)
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
