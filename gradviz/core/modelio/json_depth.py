"""Bound the nesting of JSON from a file before parsing it.

Python's ``json`` parser recurses once per level: a safetensors header (or ``gradviz.spec``
metadata) nested 200,000 deep ends in RecursionError. The depth is measured on the raw text,
strings blanked out first, with numpy (a 16 MiB header in well under a second).
"""

from __future__ import annotations

import re

import numpy as np

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio.limits import MAX_JSON_DEPTH

# A JSON string: quotes around anything but a quote or backslash, or an escaped character.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_OPEN = np.frombuffer(b"[{", dtype=np.uint8)
_CLOSE = np.frombuffer(b"]}", dtype=np.uint8)


def json_depth(raw: bytes | str) -> int:
    """The deepest nesting of arrays and objects in ``raw`` (0 for a bare number)."""
    data = raw.encode("utf-8", errors="surrogatepass") if isinstance(raw, str) else raw
    codes = np.frombuffer(_STRING.sub(b'""', data), dtype=np.uint8)
    steps = np.isin(codes, _OPEN).astype(np.int64) - np.isin(codes, _CLOSE)
    return int(np.cumsum(steps).max(initial=0))


def check_json_depth(raw: bytes | str, name: str, what: str) -> None:
    """GradvizError when ``raw`` nests deeper than limits.MAX_JSON_DEPTH."""
    depth = json_depth(raw)
    if depth > MAX_JSON_DEPTH:
        raise GradvizError(
            f"{name} has {what} nested {depth:,} levels deep, over gradviz's limit of "
            f"{MAX_JSON_DEPTH} (a model's description needs a few); it is refused unread."
        )
