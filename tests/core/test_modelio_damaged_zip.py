"""A torch.save zip damaged where Python's zipfile reads it: each way the fuzz test found
(an entry's CRC, its local header's name, a name flagged UTF-8 that is not, an unknown
compression method, an entry marked encrypted, deflated data that does not inflate) is one
sentence naming the entry and what is wrong with it (exit 2), never a traceback."""

import io
import zipfile
import zlib

import pytest
import torch

from gradviz.cli import main
from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio import inspect_model, load_model


def saved_state_dict() -> bytes:
    torch.manual_seed(0)
    buffer = io.BytesIO()
    torch.save(torch.nn.Linear(2, 3).state_dict(), buffer)
    return buffer.getvalue()


def entry_offsets(data: bytes, name: str) -> tuple[int, int]:
    """(local header offset, central directory header offset) of entry ``name``."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        local = archive.getinfo(name).header_offset
    central = data.index(b"PK\x01\x02")
    while data[central + 46 : central + 46 + len(name)] != name.encode():
        central = data.index(b"PK\x01\x02", central + 4)
    return local, central


def with_flag(data: bytearray, central: int, flag: int) -> None:
    flags = int.from_bytes(data[central + 8 : central + 10], "little") | flag
    data[central + 8 : central + 10] = flags.to_bytes(2, "little")


def damaged(kind: str) -> tuple[bytes, str]:
    """A state_dict saved by torch.save, damaged one way: (its bytes, the damaged entry)."""
    data = saved_state_dict()
    name = next(n for n in zipfile.ZipFile(io.BytesIO(data)).namelist() if n.endswith("byteorder"))
    if kind == "deflated":
        return deflated_storage_cut(data)
    out = bytearray(data)
    local, central = entry_offsets(data, name)
    name_at = local + 30
    if kind == "crc":  # the content no longer matches the directory's CRC-32
        start = data.index(b"little", name_at)
        out[start : start + 6] = b"LITTLE"
    elif kind == "local_name":  # the local header names another entry
        out[name_at] ^= 0x20
    elif kind == "utf8_name":  # flagged UTF-8 in the directory, not UTF-8 in the header
        with_flag(out, central, 0x800)
        out[name_at + len(name) - 1] = 0xFF
    elif kind == "compression":  # a compression method zipfile does not know
        out[central + 10 : central + 12] = (99).to_bytes(2, "little")
    elif kind == "encrypted":
        with_flag(out, central, 0x1)
    return bytes(out), name


def deflated_storage_cut(data: bytes) -> tuple[bytes, str]:
    """The same archive with its weight storage deflated, and the deflated bytes damaged."""
    source = zipfile.ZipFile(io.BytesIO(data))
    storage = next(n for n in source.namelist() if n.endswith("/data/0"))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for info in source.infolist():
            kind = zipfile.ZIP_DEFLATED if info.filename == storage else zipfile.ZIP_STORED
            archive.writestr(info.filename, source.read(info), compress_type=kind)
    out = bytearray(buffer.getvalue())
    local, _ = entry_offsets(bytes(out), storage)
    start = local + 30 + int.from_bytes(out[local + 26 : local + 28], "little")
    start += int.from_bytes(out[local + 28 : local + 30], "little")
    out[start] = 0xFF  # a deflate block of the reserved type 3
    with pytest.raises(zlib.error):
        zlib.decompress(bytes(out[start : start + 32]), -15)
    return bytes(out), storage


CAUSES = {
    "crc": "Bad CRC-32",
    "local_name": "header",
    "utf8_name": "not valid UTF-8",
    "compression": "compression method",
    "encrypted": "marked as encrypted",
    "deflated": "decompressing",
}


@pytest.mark.parametrize("kind", sorted(CAUSES))
def test_a_damaged_zip_entry_is_one_sentence_naming_the_entry_and_the_damage(
    tmp_path, capsys, kind
):
    data, entry = damaged(kind)
    path = tmp_path / "damaged.pt"
    path.write_bytes(data)
    for call in (inspect_model, load_model):
        with pytest.raises(GradvizError) as caught:
            call(path)
        text = str(caught.value)
        assert f"damaged zip entry {entry!r}" in text and CAUSES[kind] in text, text
        assert "\n" not in text and text.endswith("save it again.")
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"damaged zip entry {entry!r}" in err[0], err
