"""Hostile and oversized model files, built here: each is small on disk and declares or does
something a reader must refuse before acting on it. Used by test_modelio_limits.py and by the
benchmark in tests/bench/test_bench_modelio_limits.py.

Every builder takes a folder and returns the path of the file it wrote.
"""

import builtins
import collections
import importlib
import io
import pickle
import struct
import subprocess
import zipfile
import zlib

import torch
from safetensors.torch import save_file

BOMB_BYTES = (1 << 30) + (64 << 20)  # inflates to 1.06 GiB; about 1 MB on disk


class _StorageRef:
    def __init__(self, storage_type, key, numel):
        self.storage_type, self.key, self.numel = storage_type, key, numel


class _Declared:
    """A tensor as a torch pickle declares it: storage, offset, size, stride."""

    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, size, stride, False, collections.OrderedDict())

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, self.args)


class _TorchPickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, _StorageRef):
            return ("storage", obj.storage_type, obj.key, "cpu", obj.numel)
        return None


def torch_zip(path, obj, storages, *, deflate_storage=None):
    """A torch.save-layout zip: ``archive/data.pkl`` pickling ``obj`` (with _StorageRef
    persistent ids) and ``archive/data/<key>`` for each of ``storages`` {key: bytes}.
    ``deflate_storage=(key, n)`` adds a deflated entry of n zero bytes instead."""
    buffer = io.BytesIO()
    _TorchPickler(buffer, protocol=2).dump(obj)
    with zipfile.ZipFile(path, "w", compresslevel=1) as archive:
        archive.writestr("archive/data.pkl", buffer.getvalue())
        archive.writestr("archive/byteorder", "little")
        archive.writestr("archive/version", "3\n")
        for key, data in storages.items():
            archive.writestr(f"archive/data/{key}", data)
        if deflate_storage is not None:
            key, size = deflate_storage
            info = zipfile.ZipInfo(f"archive/data/{key}")
            info.compress_type = zipfile.ZIP_DEFLATED
            chunk = bytes(64 << 20)
            with archive.open(info, "w", force_zip64=True) as entry:
                # zipfile still counts the sizes and the CRC of every byte written; only
                # the deflating is done once (if zipfile ever renames the attribute, it
                # deflates every chunk itself: slower, the same file).
                entry._compressor = _RepeatedChunkDeflate(chunk)
                for _ in range(size // len(chunk)):
                    entry.write(chunk)
    return path


class _RepeatedChunkDeflate:
    """A raw-deflate compressor for a stream made of one chunk repeated: the chunk is
    deflated once and ended with a full flush, which empties the compressor's history, so
    every repeat deflates to the same bytes and they are reused. Deflating 1.06 GiB of zeros
    chunk by chunk took 5-10 s of a test's time; the CRC that zipfile computes, under 1 s."""

    def __init__(self, chunk: bytes) -> None:
        self._chunk = chunk
        deflate = zlib.compressobj(9, zlib.DEFLATED, -15)  # 64 KB a chunk of zeros
        self._block = deflate.compress(chunk) + deflate.flush(zlib.Z_FULL_FLUSH)
        self._end = deflate.flush(zlib.Z_FINISH)

    def compress(self, data) -> bytes:
        assert data is self._chunk, "only the chunk it was made for"
        return self._block

    def flush(self) -> bytes:
        return self._end


def zip_bomb(folder):
    """A 1 MB zip whose one storage inflates to 1.06 GiB of zeros (declared as such)."""
    numel = BOMB_BYTES // 4
    storage = _StorageRef(torch.FloatStorage, "0", numel)
    obj = {"weight": _Declared(storage, 0, (numel,), (1,))}
    return torch_zip(folder / "bomb.pt", obj, {}, deflate_storage=("0", BOMB_BYTES))


def stride_zero(folder, side=40000):
    """torch.save of one stored number expanded by strides of 0 to (side, side)."""
    path = folder / f"stride0_{side}.pt"
    torch.save({"weight": torch.zeros(1).expand(side, side), "bias": torch.zeros(side)}, path)
    return path


def storage_too_small(folder):
    """A (3, 3) weight whose storage holds 2 numbers."""
    storage = _StorageRef(torch.FloatStorage, "0", 2)
    obj = {"weight": _Declared(storage, 0, (3, 3), (3, 1))}
    return torch_zip(folder / "short_storage.pt", obj, {"0": bytes(8)})


def deep_nesting(folder, depth=200_000):
    """A state_dict-like pickle whose one key is a tuple nested ``depth`` levels deep."""
    body = b"\x80\x02}K\x00" + b"\x85" * depth + b"Ns."  # {(((0,),),...): None}
    path = folder / "deep.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", body)
        archive.writestr("archive/version", "3\n")
    return path


def huge_key(folder, size=8 << 20):
    """A state_dict whose one key is a string of ``size`` characters."""
    path = folder / "huge_key.pt"
    torch.save({"k" * size: torch.zeros(2, 2)}, path)
    return path


def float8_pt(folder):
    path = folder / "float8.pt"
    torch.save({"0.weight": torch.zeros(3, 2, dtype=torch.float8_e4m3fn)}, path)
    return path


def float8_safetensors(folder):
    path = folder / "float8.safetensors"
    save_file({"0.weight": torch.zeros(3, 2, dtype=torch.float8_e4m3fn)}, str(path))
    return path


def many_tensors_safetensors(folder, count=1_000_000):
    """A safetensors file declaring ``count`` empty tensors (a ~55 MB header)."""
    entries = ",".join(
        f'"t{i}":{{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}' for i in range(count)
    )
    header = ("{" + entries + "}").encode()
    path = folder / "many.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    return path


def many_tensors_pt(folder, count=12_000):
    """A torch zip declaring ``count`` empty tensors on one empty storage."""
    storage = _StorageRef(torch.FloatStorage, "0", 0)
    obj = {f"t{i}": _Declared(storage, 0, (0,), (1,)) for i in range(count)}
    return torch_zip(folder / f"many_{count}.pt", obj, {"0": b""})


class _Popen:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (subprocess.Popen, (["touch", self.marker],))


class _Exec(_Popen):
    def __reduce__(self):
        return (builtins.exec, (f"open({self.marker!r}, 'w').close()",))


class _Import(_Popen):
    def __reduce__(self):
        return (importlib.import_module, ("os",))


HOSTILE_PAYLOADS = {"popen": _Popen, "exec": _Exec, "import": _Import}


def payload_in_unused_key(folder, kind, marker, protocol=2):
    """A real checkpoint (a runnable state_dict) with a payload in a key nobody reads."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))
    path = folder / f"{kind}_p{protocol}.pt"
    checkpoint = {"state_dict": net.state_dict(), "extra": HOSTILE_PAYLOADS[kind](marker)}
    torch.save(checkpoint, path, pickle_protocol=protocol)
    return path


class _Pipepager(_Popen):
    def __reduce__(self):
        import pydoc

        return (pydoc.pipepager, ("", f"touch {self.marker}"))


class _ReadOutput(_Popen):
    def __reduce__(self):
        import _osx_support

        return (_osx_support._read_output, (f"touch {self.marker}",))


class _IoOpen(_Popen):
    def __reduce__(self):
        return (io.open, (self.marker, "w"))


class _Located:
    """pydoc.locate("os.system"): a callable the pickle computes at load time."""

    def __call__(self):  # pickle saves only callables as the function of a reduce
        pass

    def __reduce__(self):
        import pydoc

        return (pydoc.locate, ("os.system",))


class _Locate(_Popen):
    def __reduce__(self):
        return (_Located(), (f"touch {self.marker}",))


class _ZipFileInstance:
    """A harmless-looking zipfile.ZipFile instance (NEWOBJ, no call): puts the class in
    the pickle's memo, from where _MemoCall fetches it to call it."""

    @property
    def __class__(self):  # what the pickler checks a __newobj__ class against
        return zipfile.ZipFile

    def __reduce_ex__(self, protocol):
        import copyreg

        return (copyreg.__newobj__, (zipfile.ZipFile,))


class _MemoCall(_Popen):
    def __reduce__(self):
        return (zipfile.ZipFile, (self.marker, "w"))  # creates (or truncates) the file


# Names outside every deny-list that a normal unpickler would still call.
UNLISTED_PAYLOADS = {
    "pydoc.pipepager": _Pipepager,
    "_osx_support._read_output": _ReadOutput,
    "io.open": _IoOpen,
    "pydoc.locate": _Locate,
}


def unlisted_in_unused_key(folder, name, marker, protocol=2):
    """A runnable checkpoint with a call of ``name`` in a key nobody reads."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))
    path = folder / f"{name.replace('.', '_')}_p{protocol}.pt"
    checkpoint = {"state_dict": net.state_dict(), "extra": UNLISTED_PAYLOADS[name](marker)}
    torch.save(checkpoint, path, pickle_protocol=protocol)
    return path


def memo_fetched_call(folder, marker):
    """zipfile.ZipFile named once as a class to instantiate, then fetched from the pickle's
    memo and called with (marker, "w")."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))
    path = folder / "memo_call.pt"
    extra = {"a": _ZipFileInstance(), "b": _MemoCall(marker)}
    torch.save({"state_dict": net.state_dict(), "extra": extra}, path)
    return path


class _DeclaredV1:
    """A tensor as torch's first rebuilder declares it: storage, offset, size, stride."""

    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, size, stride)

    def __reduce__(self):
        return (torch._utils._rebuild_tensor, self.args)


def v1_memo_shared(folder, count=12_000, side=64):
    """One (side, side) tensor declared once by ``_rebuild_tensor`` (v1) and named by
    ``count`` keys through the pickle's memo."""
    storage = _StorageRef(torch.FloatStorage, "0", side * side)
    weight = _DeclaredV1(storage, 0, (side, side), (side, 1))
    obj = {f"{k}.weight": weight for k in range(count)}
    return torch_zip(folder / f"v1_memo_{count}.pt", obj, {"0": bytes(4 * side * side)})


def v1_stride_zero(folder, rows=30_000, cols=30_000):
    """One stored number declared by ``_rebuild_tensor`` (v1) as a (rows, cols) layer of
    stride 0: 900,000,000 parameters, 4 bytes on disk."""
    storage = _StorageRef(torch.FloatStorage, "0", 1)
    obj = {"0.weight": _DeclaredV1(storage, 0, (rows, cols), (0, 0))}
    return torch_zip(folder / "v1_stride0.pt", obj, {"0": bytes(4)})


def past_int64(folder, where):
    """A tensor whose sizes (``where="size"``) or strides go past int64 (it has 0 elements
    or 1, so only the numbers are wrong)."""
    big = 1 << 64
    storage = _StorageRef(torch.FloatStorage, "0", 1)
    size, stride = ((0, big), (1, 1)) if where == "size" else ((1,), (big,))
    obj = {"0.weight": _Declared(storage, 0, size, stride)}
    return torch_zip(folder / f"past_int64_{where}.pt", obj, {"0": bytes(4)})


def appended_zip(folder):
    """A torch.save file with a second one appended: Python's zipfile reads the second,
    torch's reader the first."""
    first, second = folder / "first.pt", folder / "second.pt"
    torch.save({"0.weight": torch.ones(3, 2)}, first)
    torch.save({"0.weight": torch.full((5, 2), 7.0)}, second)
    path = folder / "appended.pt"
    path.write_bytes(first.read_bytes() + second.read_bytes())
    return path


def deflated_under_limit(folder, size=768 << 20):
    """A state_dict whose one (size / 8, 2) weight is deflated: under 1 MB on disk, ``size``
    bytes declared and inflated (under every limit)."""
    numel = size // 4
    storage = _StorageRef(torch.FloatStorage, "0", numel)
    obj = {"0.weight": _Declared(storage, 0, (numel // 2, 2), (2, 1))}
    return torch_zip(folder / "deflated.pt", obj, {}, deflate_storage=("0", size))


def memo_shared(folder, count=5_000, side=1024):
    """One (side, side) tensor stored once and named by ``count`` keys (the pickle's memo):
    4 MiB on disk, ``count`` layers of side x side parameters to whoever builds them."""
    weight = torch.zeros(side, side)
    path = folder / f"memo_shared_{count}.pt"
    torch.save({f"{k}.weight": weight for k in range(count)}, path)
    return path


def deep_json_header(folder, depth=200_000):
    """A safetensors file whose header nests a list ``depth`` levels deep."""
    header = ('{"__metadata__":{},"x":' + "[" * depth + "]" * depth + "}").encode()
    path = folder / "deep_header.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    return path


def deep_spec_metadata(folder, depth=200_000):
    """A valid safetensors file whose ``gradviz.spec`` metadata nests ``depth`` levels."""
    path = folder / "deep_spec.safetensors"
    spec = "[" * depth + "]" * depth
    save_file({"0.weight": torch.zeros(2, 2)}, str(path), metadata={"gradviz.spec": spec})
    return path


def large_file(folder, size=1000 << 20):
    """A torch.save-layout zip of ``size`` bytes (one stored, uncompressed storage of
    zeros) whose pickle also calls io.open: refusable from its first kilobytes."""
    numel = size // 4
    storage = _StorageRef(torch.FloatStorage, "0", numel)
    obj = {"0.weight": _Declared(storage, 0, (numel,), (1,)), "extra": _IoOpen("unused")}
    buffer = io.BytesIO()
    _TorchPickler(buffer, protocol=2).dump(obj)
    path = folder / f"large_{size >> 20}MiB.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", buffer.getvalue())
        archive.writestr("archive/version", "3\n")
        info = zipfile.ZipInfo("archive/data/0")
        with archive.open(info, "w", force_zip64=True) as entry:
            chunk = bytes(16 << 20)
            for start in range(0, numel * 4, len(chunk)):
                entry.write(chunk[: min(len(chunk), numel * 4 - start)])
    return path


def linear_chain(folder, count=10_000):
    """The state_dict of an nn.Sequential of ``count`` Linear(1, 1) layers without bias."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Linear(1, 1, bias=False) for _ in range(count)])
    path = folder / f"linear_{count}.pt"
    torch.save(net.state_dict(), path)
    return path


def all_hostile(folder, marker):
    """name -> path of every refused file above (for the benchmark)."""
    files = {
        "zip bomb": zip_bomb(folder),
        "stride 0 (40000, 40000)": stride_zero(folder),
        "stride 0 (100000, 100000)": stride_zero(folder, 100_000),
        "storage too small": storage_too_small(folder),
        "deep nesting": deep_nesting(folder),
        "huge key": huge_key(folder, 50 << 20),
        "float8 .pt": float8_pt(folder),
        "float8 safetensors": float8_safetensors(folder),
        "1,000,000 tensors safetensors": many_tensors_safetensors(folder),
        "12,000 tensors .pt": many_tensors_pt(folder),
        "60,000 tensors .pt": many_tensors_pt(folder, 60_000),
        "1 tensor named by 5,000 keys": memo_shared(folder),
        "1 v1 tensor named by 12,000 keys": v1_memo_shared(folder),
        "v1 stride 0 (30000, 30000)": v1_stride_zero(folder),
        "size past int64": past_int64(folder, "size"),
        "stride past int64": past_int64(folder, "stride"),
        "zip with a zip appended": appended_zip(folder),
        "JSON header 200,000 deep": deep_json_header(folder),
        "gradviz.spec 200,000 deep": deep_spec_metadata(folder),
        "1,000 MiB file": large_file(folder),
    }
    for kind in HOSTILE_PAYLOADS:
        files[f"{kind} in an unused key"] = payload_in_unused_key(folder, kind, marker)
    return files
