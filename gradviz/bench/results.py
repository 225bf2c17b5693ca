"""A results file of ``gradviz bench --out FILE.json``: the figures with where they came from.

Schema 1 (the Performance page of the docs is generated from committed files of this form)::

    {"schema": 1, "command": "gradviz bench ...", "date": ISO 8601 UTC (the start),
     "gradviz": version, "torch": version, "python": version,
     "machine": {"cpu": model name, "cores": int, "platform": str},
     "load": {"before": [1, 5, 15-minute load averages], "after": [...]},
     "repeats": int, "quick": bool,
     "suites": {name: {...the suite's figures..., "tables": [
         {"title": str, "columns": [str, ...], "rows": [[cell, ...], ...], "notes": [str, ...]}
     ]}}}

JSON has no NaN or Infinity: they are written as null. A load average the platform does not
report is null too.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
from pathlib import Path

from gradviz.commands.output import finite_or_null
from gradviz.core.common.errors import GradvizError

SCHEMA = 1


def checked_out_path(out: str) -> Path:
    """The path ``--out`` names, checked before the measurements start (they take minutes)."""
    path = Path(out)
    if path.suffix.lower() != ".json":
        raise GradvizError(f"--out {out!r} must end in .json (the results are written as JSON).")
    if path.is_dir():
        raise GradvizError(f"--out {out!r} is a folder; give a file name ending in .json.")
    folder = path.parent
    if not folder.is_dir():
        raise GradvizError(
            f"The folder of --out {out!r} does not exist; create {str(folder)!r} first."
        )
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise GradvizError(f"--out {out!r} cannot be written here (permission denied).")
    return path


def command_line(argv: list[str]) -> str:
    """The command as a shell would take it: ``gradviz`` and the arguments as given."""
    return shlex.join(["gradviz", *argv])


def load_average() -> list[float] | None:
    """The 1, 5 and 15-minute load averages (runnable processes), None where unknown."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def machine() -> dict:
    """The CPU's model name, its logical core count and the platform."""
    return {"cpu": _cpu_model(), "cores": os.cpu_count() or 0, "platform": platform.platform()}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def started(argv: list[str]) -> dict:
    """The head of a results file, taken as the run starts (date and load before)."""
    import torch

    import gradviz

    return {
        "schema": SCHEMA,
        "command": command_line(argv),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "gradviz": gradviz.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": machine(),
        "load": {"before": load_average(), "after": None},
    }


def finished(head: dict, repeats: int, quick: bool, suites: dict[str, dict]) -> dict:
    """The whole document: ``head`` with the load after the run and every suite's results."""
    document = {**head, "load": {**head["load"], "after": load_average()}}
    document.update(repeats=repeats, quick=quick, suites=suites)
    return finite_or_null(document)


def write(path: Path, document: dict) -> None:
    """Write ``document`` as indented JSON (NaN and Infinity as null), replacing ``path``
    only once the whole file is written."""
    text = json.dumps(finite_or_null(document), indent=1, allow_nan=False) + "\n"
    partial = path.with_name(path.name + ".partial")
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise GradvizError(f"Cannot write the results to {path} ({exc.strerror or exc}).") from None
