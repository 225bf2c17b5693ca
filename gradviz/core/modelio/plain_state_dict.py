"""Read a plain state_dict from a ``torch.save`` zip without torch's unpickler.

torch's weights-only unpickler is written in Python and costs some 60 µs per tensor (2.4 s of
a 10,000-layer file). A plain state_dict (an ``OrderedDict`` of names to dense tensors, what
``torch.save(model.state_dict(), path)`` writes) needs none of it: ``declared.py`` has
already read the file's pickle into inert records (Python's unpickler, every name it gives
replaced by a recorder), and each record says where a tensor's bytes are (its storage's zip
entry), its dtype, sizes, strides and offset. This module builds the tensors from those
records and the zip entries alone, and answers None for anything else (a checkpoint, a whole
module, new-style rebuilders, big-endian files), which torch's reader then reads as before.

Nothing from the file is imported or called: the only functions run are torch's own
``frombuffer`` and ``as_strided`` on bytes and numbers taken from the file.
"""

from __future__ import annotations

import io
import sys
import zipfile
from collections import OrderedDict
from typing import Any

from gradviz.core.modelio import declared, limits

_REBUILDER = "torch._utils._rebuild_tensor_v2"


def read_plain_state_dict(data: bytes, name: str) -> dict | None:
    """The tensors of a plain state_dict in ``data`` (a torch.save zip already checked by
    ``declared.check_torch_bytes``; an OrderedDict or a dict of names to tensors), by name in
    file order, on the CPU, as torch.load would give them (tensors sharing a storage share it
    here too); None where the file holds anything else. ``_metadata`` (layer versions, for
    load_state_dict) is not kept. GradvizError naming the entry where one of the entries
    read here is damaged (``name``: the file, for the sentence)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        names = archive.namelist()
    except (zipfile.BadZipFile, ValueError, OSError):
        return None
    pickles = [n for n in names if n.endswith(".pkl")]
    if len(pickles) != 1 or not pickles[0].endswith("/data.pkl") or sys.byteorder != "little":
        return None
    prefix = pickles[0][: -len("data.pkl")]
    if prefix + "byteorder" in names and _small(archive, prefix + "byteorder", name) != b"little":
        return None
    pickled = _small(archive, pickles[0], name)
    try:
        root = declared._DeclarationReader(pickled).load()
    except Exception:  # torch's reader gives the message for a damaged pickle
        return None
    if type(root) not in (dict, declared._Dict) or not _only_metadata(getattr(root, "state", None)):
        return None
    records = list(root.items())
    if not all(isinstance(key, str) and _plain_record(value) for key, value in records):
        return None
    try:
        tensors = _built(records, archive, data, prefix, name)
    except (KeyError, ValueError, RuntimeError):  # bytes that do not match: torch says why
        return None
    return tensors if type(root) is declared._Dict else dict(tensors)


def _only_metadata(state: Any) -> bool:
    return state is None or (isinstance(state, dict) and set(state) <= {"_metadata"})


def _plain_record(record: Any) -> bool:
    """A dense tensor as torch.save writes it: _rebuild_tensor_v2(storage, offset, size,
    stride, requires_grad, backward_hooks) with a typed storage and no hooks or state."""
    if not isinstance(record, declared._Stub) or record.name != _REBUILDER:
        return False
    args = record.args
    if record.state is not None or record.items or not isinstance(args, tuple) or len(args) != 6:
        return False
    storage, offset, size, stride, requires_grad, hooks = args
    return (
        isinstance(storage, declared._Storage)
        and _dtype_name(storage) is not None
        and isinstance(storage.numel, int)
        and isinstance(offset, int)
        and declared._ints(size)
        and declared._ints(stride)
        and len(size) == len(stride)
        and isinstance(requires_grad, bool)
        and type(hooks) is declared._Dict
        and not hooks
    )


def _dtype_name(storage: declared._Storage) -> str | None:
    short = storage.type_name.rpartition(".")[2]
    if not storage.type_name.startswith("torch."):
        return None
    return declared._TYPED_STORAGES.get(short)


def _small(archive: zipfile.ZipFile, entry: str, name: str) -> bytes:
    """A small entry (the byte order, the pickle, both already bounded by
    ``declared.check_torch_bytes``), or GradvizError naming what is damaged in it."""
    info = archive.getinfo(entry)
    return declared.read_entry(archive, info, limits.MAX_PICKLE_BYTES, name)


def _built(
    records: list, archive: zipfile.ZipFile, data: bytes, prefix: str, name: str
) -> OrderedDict:
    import torch

    entries = {info.filename: info for info in archive.infolist()}
    storages: dict[str, Any] = {}
    made: dict[int, Any] = {}  # one tensor per record: a record named twice is one tensor
    result: OrderedDict = OrderedDict()
    for key, record in records:
        tensor = made.get(id(record))
        if tensor is None:
            storage, offset, size, stride, requires_grad, _ = record.args
            dtype_name = _dtype_name(storage)
            base = storages.get(storage.key)
            if base is None:
                entry = entries[f"{prefix}data/{storage.key}"]
                raw = _entry_bytes(archive, data, entry, name)
                base = storages[storage.key] = _flat(raw, storage, dtype_name)
            if base.dtype != getattr(torch, dtype_name):  # one storage as two dtypes
                raise ValueError("storage shared across dtypes")
            tensor = base.as_strided(size, stride, offset)
            if requires_grad:
                tensor.requires_grad_(True)
            made[id(record)] = tensor
        result[key] = tensor
    return result


def _entry_bytes(
    archive: zipfile.ZipFile, data: bytes, entry: zipfile.ZipInfo, name: str
) -> bytearray:
    """A private copy of a zip entry's bytes. torch.save stores storages uncompressed: their
    bytes are sliced straight from ``data`` after the entry's local header (zipfile's own
    open and read cost 40 µs an entry); a compressed entry goes through zipfile."""
    if entry.compress_type != zipfile.ZIP_STORED:
        try:
            return _inflated(archive, entry)
        except Exception as exc:  # whatever zipfile raises on a damaged entry
            raise declared.damaged_entry(name, entry, exc) from None
    header = entry.header_offset
    if data[header : header + 4] != b"PK\x03\x04":
        raise ValueError("bad local header")
    name_length = int.from_bytes(data[header + 26 : header + 28], "little")
    extra_length = int.from_bytes(data[header + 28 : header + 30], "little")
    start = header + 30 + name_length + extra_length
    if start + entry.file_size > len(data):
        raise ValueError("entry past the end")
    return bytearray(data[start : start + entry.file_size])


def _inflated(archive: zipfile.ZipFile, entry: zipfile.ZipInfo) -> bytearray:
    """A compressed entry inflated straight into one buffer of its declared size, a chunk
    at a time: ``archive.read`` holds the chunks and their join at once, and a copy into a
    bytearray made it three times the entry (2.3 GB for 768 MiB)."""
    raw = bytearray(entry.file_size)
    view, position = memoryview(raw), 0
    with archive.open(entry) as handle:
        while position < len(raw):
            count = handle.readinto(view[position : position + (16 << 20)])
            if not count:
                raise zipfile.BadZipFile("it inflates to fewer bytes than declared")
            position += count
        if handle.read(1):
            raise zipfile.BadZipFile("it inflates to more bytes than declared")
    return raw


def _flat(raw: bytearray, storage: declared._Storage, dtype_name: str):
    """The storage's elements as one flat tensor over ``raw`` (kept alive by it)."""
    import torch

    dtype = getattr(torch, dtype_name)
    if len(raw) != storage.numel * declared.DTYPE_BYTES[dtype_name]:
        raise ValueError("storage size")
    if not raw:
        return torch.empty(0, dtype=dtype)
    return torch.frombuffer(raw, dtype=dtype)
