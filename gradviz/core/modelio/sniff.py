"""Which kind of model file this is, decided by its bytes, never by its extension.

``open_model_file`` checks that the path is a readable regular file under the size limit and
opens it; the file is judged from its parts through that handle (``detect_format`` reads its
first bytes and, for a zip, the central directory; the pickle checks read the pickle entry),
and only then read whole, once, from the same handle (``read_checked``: every later step
reads these bytes, so the file cannot change between the checks and the load).
``read_model_bytes`` does both without the checks in between. ``detect_format`` looks at the
bytes:

- a zip archive holding ``constants.pkl``: TorchScript (``torch.jit.save``);
- a zip archive holding ``archive_format`` or ``models/*.json``: a torch.export program (.pt2);
- a zip archive holding ``data.pkl``: ``torch.save`` (a state_dict, a checkpoint or a whole
  module; which one is known only after reading it);
- an 8-byte little-endian header length followed by ``{``: safetensors;
- ``\\x93NUMPY``: a NumPy array; a pickle protocol opcode: a plain (or legacy torch) pickle.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import struct
import zipfile
from typing import BinaryIO

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio import limits

MAX_MODEL_BYTES = limits.MAX_FILE_BYTES

# Containers returned by detect_format: how the bytes are laid out. The model formats
# (``formats.FORMATS``) say which containers each comes in and how they are told apart.
TORCH_ZIP = "torch_zip"
TORCHSCRIPT = "torchscript"
EXPORTED_PROGRAM = "pt2"
SAFETENSORS = "safetensors"
NUMPY = "numpy"
PICKLE = "pickle"
# Containers torch reads (a pickle inside, judged from its parts before torch reads it).
TORCH_CONTAINERS = (TORCH_ZIP, TORCHSCRIPT, EXPORTED_PROGRAM, PICKLE)

NUMPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"
SAFETENSORS_MAX_HEADER = limits.MAX_SAFETENSORS_HEADER_BYTES


def read_model_bytes(path: str | os.PathLike, max_bytes: int = MAX_MODEL_BYTES) -> bytes:
    """The file's bytes, after checking that it exists, is a regular readable file and is at
    most ``max_bytes`` long (default 1 GiB)."""
    with open_model_file(path, max_bytes) as handle:
        return read_checked(handle, path, max_bytes)


def open_model_file(path: str | os.PathLike, max_bytes: int = MAX_MODEL_BYTES) -> BinaryIO:
    """The file opened for reading, after checking that it exists, is a regular readable
    file, is not empty and is at most ``max_bytes`` long (default 1 GiB)."""
    name = os.fspath(path)
    _check_path(name)
    if not os.path.isfile(name):
        raise GradvizError(f"{name} is not a regular file; give the path of a model file.")
    if not os.access(name, os.R_OK):
        raise GradvizError(f"{name} cannot be read (no read permission).")
    try:
        handle = open(name, "rb")  # noqa: SIM115 (the caller closes it)
        size = os.fstat(handle.fileno()).st_size
    except OSError as exc:
        raise GradvizError(f"{name} cannot be read: {exc.strerror or exc}.") from None
    if size > max_bytes:
        handle.close()
        raise GradvizError(
            f"{name} is {size / 2**20:,.0f} MiB, over gradviz's model size limit of "
            f"{max_bytes / 2**20:,.0f} MiB."
        )
    if size == 0:
        handle.close()
        raise GradvizError(f"{name} is empty (0 bytes); it holds no model.")
    return handle


def read_checked(handle: BinaryIO, path: str | os.PathLike, max_bytes: int) -> bytes:
    """All of an opened model file's bytes, read from the handle its checks used; refused
    if it changed size since it was opened."""
    name = os.fspath(path)
    try:
        size = os.fstat(handle.fileno()).st_size
        handle.seek(0)
        data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise GradvizError(f"{name} cannot be read: {exc.strerror or exc}.") from None
    if len(data) > max_bytes:  # grew after the size check
        raise GradvizError(f"{name} is over gradviz's model size limit of {max_bytes:,} bytes.")
    if len(data) != size:
        raise GradvizError(f"{name} changed while gradviz was reading it; try again.")
    if not data:
        raise GradvizError(f"{name} is empty (0 bytes); it holds no model.")
    return data


def _check_path(name: str) -> None:
    """GradvizError saying what is wrong with a path that cannot be opened as a file."""
    try:
        mode = os.stat(name).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise GradvizError(f"{name} is a loop of symbolic links; give a model file.") from None
        if exc.errno == errno.ENOENT and os.path.islink(name):
            raise GradvizError(
                f"{name} is a symbolic link to a file that does not exist."
            ) from None
        if exc.errno == errno.ENOENT:
            raise GradvizError(f"{name} does not exist.") from None
        raise GradvizError(f"{name} cannot be read: {exc.strerror or exc}.") from None
    if stat.S_ISDIR(mode):
        raise GradvizError(f"{name} is a directory; give the path of a model file.")


def detect_format(data: bytes | BinaryIO, name: str = "the file") -> str:
    """The kind of file ``data`` (its bytes, or a file opened for reading: only its first
    bytes and a zip's central directory are read) holds: one of the kinds above, or
    GradvizError."""
    if not isinstance(data, bytes):
        data.seek(0)
        head = data.read(16)
        if head.startswith(ZIP_MAGIC):
            return _zip_kind(data, name)
        return detect_format(head, name)
    if data.startswith(ZIP_MAGIC):
        return _zip_kind(data, name)
    if data.startswith(NUMPY_MAGIC):
        return NUMPY
    if _looks_like_safetensors(data):
        return SAFETENSORS
    if len(data) >= 2 and data[0] == 0x80 and 2 <= data[1] <= 5:
        return PICKLE
    raise GradvizError(
        f"{name} is not a model file gradviz knows: it is neither a PyTorch file (torch.save, "
        "TorchScript, .pt2) nor safetensors."
    )


def as_stream(data: bytes | BinaryIO) -> BinaryIO:
    """A seekable stream over a file's bytes, or the opened file itself."""
    return io.BytesIO(data) if isinstance(data, bytes) else data


def zip_entries(data: bytes | BinaryIO, name: str) -> list[str]:
    """Entry names of a zip archive, or GradvizError if it is truncated or damaged, or if
    its end record belongs to an archive that does not start at the file's first byte."""
    try:
        with zipfile.ZipFile(as_stream(data)) as archive:
            entries = archive.infolist()
    except (
        zipfile.BadZipFile,
        EOFError,
        ValueError,
        OSError,
        struct.error,
        NotImplementedError,
        UnicodeDecodeError,
    ):
        raise GradvizError(
            f"{name} is a damaged or truncated zip archive; save the model again."
        ) from None
    # Python's zipfile reads the archive whose end record ends the file, wherever it starts;
    # torch's reader, the one that starts it: with a second archive appended the two read
    # different models, so neither is read.
    if entries and min(info.header_offset for info in entries) != 0:
        raise GradvizError(
            f"{name} holds a second zip archive after its first (its end record does not "
            "belong to the archive the file starts with); torch and gradviz would read "
            "different models from it, so gradviz refuses it."
        )
    return [info.filename for info in entries]


def _zip_kind(data: bytes | BinaryIO, name: str) -> str:
    entries = zip_entries(data, name)
    # torch archives put everything under one top-level folder named after the file.
    inner = {entry.split("/", 1)[1] if "/" in entry else entry for entry in entries}
    if "constants.pkl" in inner:
        return TORCHSCRIPT
    if "archive_format" in inner or any(
        entry.startswith("models/") and entry.endswith(".json") for entry in inner
    ):
        return EXPORTED_PROGRAM
    if "data.pkl" in inner:
        return TORCH_ZIP
    raise GradvizError(
        f"{name} is a zip archive but not a PyTorch file (no data.pkl, constants.pkl or .pt2 "
        "layout inside)."
    )


def _looks_like_safetensors(data: bytes) -> bool:
    # 8-byte little-endian header length, then a JSON object. Lengths are checked later,
    # where a wrong one gets its own message.
    return len(data) >= 9 and data[8:9] == b"{"
