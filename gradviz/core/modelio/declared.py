"""Judge a torch file by what it declares, before torch reads it.

``check_torch_bytes`` runs on every torch file (torch.save zips and legacy pickles,
TorchScript, .pt2) before it is read whole (through the opened file: a zip's central
directory, then its pickle entries):

1. zip archives: entry count and declared uncompressed sizes (a deflated 4 GiB entry in a
   4 MB file is refused by its declared size, never inflated);
2. each pickle: ``pickle_scan.scan_pickle`` (nesting, sizes, counts, names outside the
   allow-list; a legacy whole module is named as such);
3. the tensors the pickle declares, read by unpickling into inert stand-ins (Python's own
   unpickler with every class and function replaced by a recorder, storages by their key and
   size): the dtype must be one gradviz checks, every storage must hold what each tensor's
   sizes, strides and offset address and match its zip entry, and all tensors together,
   each counted at full size and once for every name that refers to it, must stay under
   ``limits.MAX_TENSOR_BYTES`` (and their count under ``limits.MAX_TENSORS``); sparse
   tensors are refused here.

Nothing from the file is imported or called; torch is not imported here.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from dataclasses import dataclass
from typing import Any, BinaryIO

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio import limits
from gradviz.core.modelio.limits import human_bytes, quoted
from gradviz.core.modelio.pickle_scan import scan_pickle
from gradviz.core.modelio.sniff import as_stream

# Element sizes of the dtypes gradviz checks (floating point for weights; integers and bool
# for buffers such as BatchNorm's num_batches_tracked).
DTYPE_BYTES = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}
_TYPED_STORAGES = {
    "DoubleStorage": "float64",
    "FloatStorage": "float32",
    "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16",
    "LongStorage": "int64",
    "IntStorage": "int32",
    "ShortStorage": "int16",
    "CharStorage": "int8",
    "ByteStorage": "uint8",
    "BoolStorage": "bool",
}
# Every rebuilder of a dense tensor torch reads (v1 takes the same first four arguments).
_REBUILDERS = (
    "torch._utils._rebuild_tensor",
    "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_tensor_v3",
)
#: Sizes, strides and offsets are int64 in torch: larger ones are refused, not overflowed.
_INT64_MAX = (1 << 63) - 1


def check_torch_bytes(data: bytes | BinaryIO, name: str, *, is_zip: bool) -> None:
    """GradvizError with one sentence if the file declares more than gradviz's limits
    allow, names something not accepted, or uses a dtype gradviz cannot check.

    ``data`` is the file's bytes or the file opened for reading: a zip is then judged from
    its central directory and its pickle entries (streamed), a legacy file from its pickles,
    never read whole (a 1 GiB file of storages is judged by its first kilobytes)."""
    if not is_zip:
        _check_legacy(as_stream(data), name)
        return
    archive = _open_zip(data, name)  # its central directory is read once (10,000 entries)
    with archive:
        entries = check_entries(archive.infolist(), name)
        for info in entries:
            if info.filename.endswith(".pkl"):
                pickled = read_entry(archive, info, limits.MAX_PICKLE_BYTES, name)
                scan_pickle(pickled, name)
                records = _storage_records(info.filename, entries)
                _check_tensors(_declared(pickled, name), name, records)


def _storage_records(pickle_entry: str, entries: list[zipfile.ZipInfo]) -> dict[str, int] | None:
    """Declared sizes of the storages of ``x/data.pkl`` (kept as ``x/data/<key>``), by key;
    None for other pickles (TorchScript's ``traced_inputs.pkl`` names storages it does not
    keep), whose tensors are still counted at full size."""
    if not pickle_entry.endswith("data.pkl"):
        return None
    folder = pickle_entry[: -len(".pkl")] + "/"
    return {
        i.filename[len(folder) :]: i.file_size for i in entries if i.filename.startswith(folder)
    }


def check_zip(data: bytes | BinaryIO, name: str) -> list[zipfile.ZipInfo]:
    """The archive's entries, after checking their count and declared sizes."""
    with _open_zip(data, name) as archive:
        return check_entries(archive.infolist(), name)


def _open_zip(data: bytes | BinaryIO, name: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(as_stream(data))
    except Exception:
        raise GradvizError(
            f"{name} is a damaged or truncated zip archive; save it again."
        ) from None


def check_entries(entries: list[zipfile.ZipInfo], name: str) -> list[zipfile.ZipInfo]:
    """``entries``, after checking their count and declared sizes."""
    if len(entries) > limits.MAX_ZIP_ENTRIES:
        raise GradvizError(
            f"{name} is a zip archive of {len(entries):,} entries, over gradviz's limit of "
            f"{limits.MAX_ZIP_ENTRIES:,}."
        )
    total = 0
    for info in entries:
        total += info.file_size
        if total > limits.MAX_ZIP_CONTENT_BYTES:
            raise GradvizError(
                f"{name} declares {human_bytes(total)} or more of content once unpacked "
                f"(entry {quoted(info.filename)}), over gradviz's limit of "
                f"{human_bytes(limits.MAX_ZIP_CONTENT_BYTES)}; it is refused unread."
            )
    return entries


def read_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo, cap: int, name: str) -> bytes:
    """An entry's bytes, refused if its declared size is over ``cap``; inflation stops at
    the declared size, and an entry that inflates to more or less is damaged."""
    if info.file_size > cap:
        raise GradvizError(
            f"{name} holds entry {quoted(info.filename)} of {human_bytes(info.file_size)}, "
            f"over gradviz's limit of {human_bytes(cap)} for it."
        )
    try:
        with archive.open(info) as handle:
            chunks, size = [], 0
            while size <= info.file_size:
                chunk = handle.read(min(1 << 20, info.file_size + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
    except Exception as exc:
        raise damaged_entry(name, info, exc) from None
    if size != info.file_size:
        raise GradvizError(
            f"{name} has a zip entry {quoted(info.filename)} whose content does not match "
            "its declared size; the file is damaged."
        )
    return b"".join(chunks)


def damaged_entry(name: str, info: zipfile.ZipInfo, exc: BaseException) -> GradvizError:
    """The error for a zip entry that Python's zipfile fails to read, naming what is wrong
    with it: a damaged archive raises BadZipFile (a CRC or a local header that does not
    match the directory), zlib.error, NotImplementedError (a compression method it does not
    know), RuntimeError (an entry marked encrypted) or UnicodeDecodeError (a name flagged
    UTF-8 that is not)."""
    if isinstance(exc, UnicodeDecodeError):
        cause = "its name in the local header is not valid UTF-8"
    elif isinstance(exc, RuntimeError) and "encrypted" in str(exc):
        cause = "it is marked as encrypted"
    else:
        text = str(exc).strip().splitlines()
        cause = (text[0] if text else type(exc).__name__).rstrip(".")[:200]
    return GradvizError(
        f"{name} has a damaged zip entry {quoted(info.filename)} ({cause}); save it again."
    )


def _check_legacy(stream: BinaryIO, name: str) -> None:
    """A non-zip file: a plain pickle, or torch's legacy format (several pickles in a row,
    the main one third, then raw storage bytes), read pickle by pickle from ``stream``."""
    position = 0
    for _ in range(5):
        stream.seek(position)
        if stream.read(1) != b"\x80":
            break
        scan = scan_pickle(stream, name, start=position)
        if scan.legacy_modules:
            raise GradvizError(_legacy_module(name, scan.legacy_modules))
        if scan.end - position > limits.MAX_PICKLE_BYTES:
            raise GradvizError(
                f"{name} holds a pickle of {human_bytes(scan.end - position)}, over "
                f"gradviz's limit of {human_bytes(limits.MAX_PICKLE_BYTES)}."
            )
        stream.seek(position)
        pickled = stream.read(scan.end - position)
        _check_tensors(_declared(pickled, name), name, records=None)
        position = scan.end


def _legacy_module(name: str, classes: list[str]) -> str:
    return (
        f"{name} is a whole module ({quoted(classes[0])}) saved in torch's legacy (non-zip) "
        "format, which gradviz reads for weights only (it names each class by its source "
        "code); load it where its class is defined and save its weights with "
        "torch.save(model.state_dict(), path), or save it again with a current torch."
    )


# ---- reading declarations -------------------------------------------------------------------
@dataclass(frozen=True)
class _Storage:
    """A storage as a persistent id names it: its type's name, key and element count."""

    type_name: str
    key: str
    numel: Any


class _Stub:
    """Stands in for any class or function a pickle names: records what it was given."""

    name = ""

    def __new__(cls, *args: Any, **kwargs: Any) -> _Stub:
        # NEWOBJ calls __new__ without __init__: record everything here.
        obj = object.__new__(cls)
        obj.args, obj.state, obj.items = args, None, []
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __setitem__(self, key: Any, value: Any) -> None:
        self.items.append((key, value))

    def append(self, value: Any) -> None:
        self.items.append(value)

    def extend(self, values: Any) -> None:
        self.items.extend(values)


class _Dict(dict):
    """collections.OrderedDict as a plain dict that accepts a state (torch's state_dicts
    carry ``_metadata``)."""

    def __setstate__(self, state: Any) -> None:
        self.state = state


class _DeclarationReader(pickle.Unpickler):
    """Python's unpickler with every global replaced by a _Stub subclass: nothing named in
    the file is imported or called. Storages become _Storage records."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self._stubs: dict[str, type] = {}

    def find_class(self, module: str, qualname: str) -> Any:
        full = f"{module}.{qualname}"
        if full == "collections.OrderedDict":
            return _Dict
        if full not in self._stubs:
            self._stubs[full] = type("Stub", (_Stub,), {"name": full})
        return self._stubs[full]

    def persistent_load(self, pid: Any) -> Any:
        if isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage":
            type_name = getattr(pid[1], "name", str(pid[1]))
            return _Storage(type_name, str(pid[2]), pid[4])
        return None


def _declared(data: bytes, name: str) -> list[tuple[str, tuple, int]]:
    """(rebuilder name, its arguments, references) for every tensor the pickle declares.

    ``references`` counts the ways the object tree reaches the tensor: one tensor stored
    once and named by 5,000 keys through the pickle's memo is 5,000 tensors to whoever reads
    the keys (a rebuilt chain builds 5,000 layers from it), so it is counted 5,000 times."""
    try:
        root = _DeclarationReader(data).load()
    except Exception:
        raise GradvizError(f"{name} holds a damaged pickle and cannot be read.") from None
    order, edges = _walk(root)
    references = {id(root): 1}
    for obj in reversed(order):  # parents before children (reverse post-order)
        count = references.get(id(obj), 0)
        for child in edges.get(id(obj), ()):
            # Capped: only comparisons with the limits matter, and doubling lists of lists
            # would otherwise make numbers of any size.
            references[id(child)] = min(references.get(id(child), 0) + count, _REFERENCE_CAP)
    return [
        (obj.name, obj.args, references.get(id(obj), 1))
        for obj in order
        if isinstance(obj, _Stub)
        and (obj.name.startswith("torch._utils._rebuild") or "nested" in obj.name)
    ]


_REFERENCE_CAP = 1 << 40
_LEAF_TYPES = frozenset({str, bytes, int, float, bool, type(None), complex, _Storage})


def _walk(root: Any) -> tuple[list, dict[int, list]]:
    """The containers and stubs under ``root`` in post-order, and each one's children
    (edges back to an object still being walked, a cycle, are left out). A tensor's own
    storage, sizes and strides are not walked (they hold no tensors; torch would rebuild
    any tensor in its hooks or metadata, so those are). Iterative:
    depth is bounded by the scan, but stay off the C stack."""
    order: list = []
    edges: dict[int, list] = {}
    finished: dict[int, bool] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        obj, done = stack.pop()
        if done:
            finished[id(obj)] = True
            order.append(obj)
            continue
        if type(obj) in _LEAF_TYPES or id(obj) in finished:
            continue
        finished[id(obj)] = False
        children = [c for c in _children(obj) if type(c) not in _LEAF_TYPES]
        edges[id(obj)] = [c for c in children if finished.get(id(c)) is not False]
        stack.append((obj, True))
        stack.extend((c, False) for c in children if id(c) not in finished)
    return order, edges


def _children(obj: Any) -> list:
    if isinstance(obj, _Stub):
        if obj.name in _REBUILDERS:  # storage, offset, sizes, strides: checked, not walked
            return list(obj.args[4:]) if isinstance(obj.args, tuple) else [obj.args]
        return [obj.args, obj.state, obj.items]
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values(), getattr(obj, "state", None)]
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(obj)
    return []


# ---- checking declarations ------------------------------------------------------------------
def _check_tensors(
    declared: list[tuple[str, tuple, int]], name: str, records: dict[str, int] | None
) -> None:
    """Tensors are counted by reference: once for every name that reaches them."""
    for kind, args, _ in declared:
        if "sparse" in kind:  # found here, from the declarations: torch's refusals vary
            raise GradvizError(
                f"{name} holds a sparse tensor ({_layout(args)}); gradviz reads dense tensors only "
                "(save the weights with tensor.to_dense())."
            )
    tensors = [d for d in declared if d[0] in _REBUILDERS or _special(d[0])]
    count = sum(references for _, _, references in tensors)
    if count > limits.MAX_TENSORS:
        shared = (
            " (counting a tensor once for each name that refers to it)"
            if len(tensors) < count
            else ""
        )
        raise GradvizError(
            f"{name} declares {count:,} tensors{shared}, over gradviz's limit of "
            f"{limits.MAX_TENSORS:,}."
        )
    total = 0
    for kind, args, references in tensors:
        unsupported = _special(kind)
        if unsupported:
            raise GradvizError(
                f"{name} holds {unsupported} tensors, which gradviz cannot check; save the "
                "model's weights as dense floating-point tensors."
            )
        total += _check_one(kind, args, name, records) * references
        if total > limits.MAX_TENSOR_BYTES:
            raise GradvizError(
                f"{name} declares tensors of {human_bytes(total)} or more at full size, over "
                f"gradviz's limit of {human_bytes(limits.MAX_TENSOR_BYTES)} (a tensor's full "
                "size counts even where it is stored once and repeated by a stride of 0, and "
                "once for each name that refers to it)."
            )


def _layout(args: Any) -> str:
    """The layout a sparse rebuilder is given: ``_get_layout("torch.sparse_coo")``."""
    layout = args[0] if isinstance(args, tuple) and args else None
    given = getattr(layout, "args", None)
    if isinstance(given, tuple) and given and isinstance(given[0], str):
        return given[0][:40]
    return getattr(layout, "name", "a sparse layout")


def _special(kind: str) -> str | None:
    if "qtensor" in kind:
        return "quantized"
    if "nested" in kind:
        return "nested"
    return None


def _check_one(kind: str, args: tuple, name: str, records: dict[str, int] | None) -> int:
    """Bytes of one tensor at full size, after checking its storage holds what it addresses."""
    damaged = GradvizError(f"{name} declares a tensor with damaged sizes or strides.")
    if len(args) < 4 or not isinstance(args[0], _Storage):
        raise damaged
    storage, offset, size, stride = args[:4]
    if not (_ints(size) and _ints(stride) and len(size) == len(stride)):
        raise damaged
    if not (_ints((offset,)) and _ints((storage.numel,))):
        raise damaged
    dtype = _dtype(kind, args, storage, name)
    itemsize = DTYPE_BYTES[dtype]
    untyped = storage.type_name.endswith("UntypedStorage")
    storage_bytes = storage.numel if untyped else storage.numel * itemsize
    if records is not None:
        declared = records.get(storage.key)
        if declared is None or declared != storage_bytes:
            raise GradvizError(
                f"{name} declares a storage of {storage_bytes:,} bytes that its archive does "
                "not hold; the file is damaged."
            )
    numel = 1
    for s in size:
        numel *= s
    if numel > 0:
        last = offset + sum((s - 1) * st for s, st in zip(size, stride))
        if (last + 1) * itemsize > storage_bytes:
            raise GradvizError(
                f"{name} declares a tensor of shape {tuple(size)[:8]} that addresses element "
                f"{last:,} of a storage of {storage_bytes // itemsize:,}; the file is damaged."
            )
    return numel * itemsize


def _dtype(kind: str, args: tuple, storage: _Storage, name: str) -> str:
    if kind.endswith("_v3") and len(args) >= 7:
        dtype = getattr(args[6], "name", str(args[6])).removeprefix("torch.")
    else:
        short = storage.type_name.rpartition(".")[2]
        if short.startswith(("Q", "QU")) and short.endswith("Storage") and "Int" in short:
            raise GradvizError(
                f"{name} holds quantized tensors, which gradviz cannot check; save the "
                "model's weights as dense floating-point tensors."
            )
        dtype = _TYPED_STORAGES.get(short, short)
    if dtype not in DTYPE_BYTES:
        raise GradvizError(
            f"{name} holds tensors of dtype {quoted(dtype)}, which gradviz cannot check (it "
            "reads float16, bfloat16, float32 and float64 weights); convert them first."
        )
    return dtype


def _ints(values: Any) -> bool:
    return isinstance(values, tuple) and all(
        isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= _INT64_MAX for v in values
    )
