"""Check a safetensors file's header before handing it to the safetensors library, so that
each way a file can be broken gets its own sentence.

Layout: 8-byte little-endian header length N, N bytes of JSON (tensor name -> dtype, shape,
``data_offsets`` [begin, end) relative to the data section, plus optional ``__metadata__``
of strings), then the data section, exactly covered by the tensors' byte ranges.
"""

from __future__ import annotations

import json
import struct

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio.json_depth import check_json_depth
from gradviz.core.modelio.limits import MAX_TENSORS, quoted
from gradviz.core.modelio.sniff import SAFETENSORS_MAX_HEADER

DTYPE_BYTES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U64": 8,
    "U32": 4,
    "U16": 2,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
}
UNCHECKED_DTYPES = ("F8_E4M3", "F8_E5M2")


def read_header(data: bytes, name: str) -> tuple[dict[str, dict], dict[str, str]]:
    """The tensor entries (in file order) and the ``__metadata__`` strings, checked."""
    (length,) = struct.unpack("<Q", data[:8])
    available = len(data) - 8
    if length > SAFETENSORS_MAX_HEADER:
        raise GradvizError(
            f"{name} is not a valid safetensors file: its header claims {length:,} bytes, over "
            f"gradviz's limit of {SAFETENSORS_MAX_HEADER:,} (a model of at most {MAX_TENSORS:,} "
            "tensors needs far less)."
        )
    if length > available:
        raise GradvizError(
            f"{name} is not a valid safetensors file: its header claims {length:,} bytes but "
            f"only {available:,} follow (truncated or damaged)."
        )
    check_json_depth(data[8 : 8 + length], name, "a safetensors header")
    try:
        header = json.loads(data[8 : 8 + length].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise GradvizError(f"{name} has a damaged safetensors header (not JSON).") from None
    if not isinstance(header, dict):
        raise GradvizError(f"{name} has a damaged safetensors header (not a JSON object).")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise GradvizError(f"{name} has safetensors metadata that is not a map of strings.")
    if len(header) > MAX_TENSORS:
        raise GradvizError(
            f"{name} declares {len(header):,} tensors, over gradviz's limit of {MAX_TENSORS:,}."
        )
    for key, entry in header.items():
        _check_entry(key, entry, name)
        if entry["dtype"] in UNCHECKED_DTYPES:
            raise GradvizError(
                f"{name}: tensor {quoted(key)} is {entry['dtype']}, a dtype gradviz cannot "
                "check (it reads float16, bfloat16, float32 and float64 weights); convert it "
                "first."
            )
    _check_coverage(header, available - length, name)
    return header, metadata


def _check_entry(key: str, entry: object, name: str) -> None:
    ok = (
        isinstance(entry, dict)
        and entry.get("dtype") in DTYPE_BYTES
        and isinstance(entry.get("shape"), list)
        and all(isinstance(s, int) and s >= 0 for s in entry["shape"])
        and isinstance(entry.get("data_offsets"), list)
        and len(entry["data_offsets"]) == 2
        and all(isinstance(o, int) and o >= 0 for o in entry["data_offsets"])
    )
    if not ok:
        raise GradvizError(f"{name} has a damaged safetensors entry for tensor {quoted(key)}.")
    begin, end = entry["data_offsets"]
    count = 1
    for size in entry["shape"]:
        count *= size
    if end < begin or end - begin != count * DTYPE_BYTES[entry["dtype"]]:
        raise GradvizError(
            f"{name}: tensor {quoted(key)} has byte range [{begin}, {end}) that does not match its "
            f"shape {tuple(entry['shape'])} and dtype {entry['dtype']}."
        )


def _check_coverage(header: dict[str, dict], data_bytes: int, name: str) -> None:
    ranges = sorted((e["data_offsets"][0], e["data_offsets"][1], k) for k, e in header.items())
    position, previous = 0, None
    for begin, end, key in ranges:
        if begin < position:
            raise GradvizError(
                f"{name} is not a valid safetensors file: tensors {quoted(previous)} and "
                f"{quoted(key)} overlap in the data section."
            )
        if begin > position:
            raise GradvizError(
                f"{name} is not a valid safetensors file: a gap of {begin - position} bytes "
                f"precedes tensor {quoted(key)}."
            )
        position, previous = end, key
    if position < data_bytes:
        raise GradvizError(
            f"{name} is not a valid safetensors file: {data_bytes - position:,} trailing bytes "
            "follow the last tensor."
        )
    if position > data_bytes:
        raise GradvizError(
            f"{name} is truncated: its tensors need {position:,} bytes of data but only "
            f"{data_bytes:,} are there."
        )
