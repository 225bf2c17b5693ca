"""What a command writes to stdout: readable lines, or with ``--json`` one JSON document.

With ``--json`` stdout carries exactly one compact JSON object on one line (so both
``json.loads(stdout)`` and reading the last line work) and nothing else; the readable lines
are written only without it.
"""

from __future__ import annotations

import json
import math


def say(args, line: str) -> None:
    """One readable line on stdout, unless ``--json`` asked for the JSON document alone."""
    if not getattr(args, "json", False):
        print(line)


def print_json(document: dict) -> None:
    """``document`` as one compact line of standard JSON (NaN and Infinity as null)."""
    print(json.dumps(finite_or_null(document), separators=(",", ":"), allow_nan=False))


def finite_or_null(value):
    """JSON has no NaN or Infinity: write them as null (in nested dicts and lists too)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(v) for v in value]
    return value
