"""The names a model file's pickle may use: an allow-list, and a deny-list for the wording.

A normal unpickler imports every name a pickle gives (``GLOBAL``, ``STACK_GLOBAL``, ``INST``)
and calls what ``REDUCE``, ``INST`` and ``OBJ`` say: that is code the file runs. gradviz's
loaders accept only what they can read without running anything: torch's tensor rebuilders,
dtypes, storage types and ``OrderedDict`` (the names torch's weights-only reader accepts), a
few plain data types common in checkpoints; any other name only where the pickle makes an
instance of it without calling it (a class, which gradviz replaces by an inert stand-in) or
only holds it as a value. What a name is, is decided by how the pickle uses it, never by how
it is spelt. Nothing here imports torch.
"""

from __future__ import annotations

# Whole modules whose every callable can run a process, evaluate code or import one.
HOSTILE_MODULES = (
    "subprocess",
    "_posixsubprocess",
    "os",
    "posix",
    "nt",
    "pty",
    "runpy",
    "importlib",
    "code",
    "codeop",
    "ctypes",
    "marshal",
    "pickle",
    "_pickle",
    "shutil",
    "socket",
    "multiprocessing",
    "webbrowser",
    "sys",
    "commands",
    "popen2",
    "timeit",
    "pdb",
    "bdb",
)
# Single callables elsewhere that do the same.
HOSTILE_NAMES = frozenset(
    f"{module}.{name}"
    for module in ("builtins", "__builtin__")
    for name in (
        "exec",
        "eval",
        "compile",
        "__import__",
        "getattr",
        "setattr",
        "delattr",
        "globals",
        "locals",
        "vars",
        "open",
        "input",
        "breakpoint",
        "exit",
        "quit",
    )
) | frozenset(
    {
        "operator.attrgetter",
        "operator.methodcaller",
        "types.FunctionType",
        "types.LambdaType",
        "types.CodeType",
        "types.MethodType",
        "types.ModuleType",
        "numpy.testing._private.utils.runstring",
        "torch.load",
        "torch.jit.load",
        "torch.export.load",
        "torch.hub.load",
    }
)

# What a normal unpickler may call (REDUCE, INST, OBJ): torch's weights-only set (rebuilders,
# Parameter, Size, device, set, ...) and plain data types common in checkpoints.
ACCEPTED_CALLABLES = frozenset(
    {
        "collections.OrderedDict",
        "collections.Counter",
        "collections.defaultdict",
        "torch.nn.parameter.Parameter",
        "torch.serialization._get_layout",
        "torch.Size",
        "torch.Tensor",
        "torch.device",
        "torch._tensor._rebuild_from_type_v2",
        "torch.storage.TypedStorage",
        "torch.storage.UntypedStorage",
        "_codecs.encode",
        "builtins.bytearray",
        "builtins.set",
        "builtins.frozenset",
        "builtins.complex",
        "builtins.slice",
        "builtins.range",
        "copyreg._reconstructor",
        "types.SimpleNamespace",
        "argparse.Namespace",
        "datetime.datetime",
        "datetime.date",
        "datetime.time",
        "datetime.timedelta",
        "datetime.timezone",
        "decimal.Decimal",
        "fractions.Fraction",
        "pathlib.Path",
        "pathlib.PosixPath",
        "pathlib.WindowsPath",
        "pathlib.PurePosixPath",
        "pathlib.PureWindowsPath",
        "numpy.core.multiarray._reconstruct",
        "numpy._core.multiarray._reconstruct",
        "numpy.core.multiarray.scalar",
        "numpy._core.multiarray.scalar",
        "numpy.ndarray",
        "numpy.dtype",
        "torch.torch_version.TorchVersion",
    }
)
# Prefixes of torch's own rebuild helpers (``_rebuild_tensor_v2``, TorchScript's typed lists).
ACCEPTED_CALLABLE_PREFIXES = ("torch._utils._rebuild_", "torch.jit._pickle.")
# dtypes and quantization schemes torch's weights-only reader accepts by name.
_TORCH_VALUE_NAMES = """
    float64 float32 float16 bfloat16 complex128 complex64 complex32 int64 int32 int16 int8
    uint8 uint16 uint32 uint64 bool qint8 quint8 qint32 quint4x2 quint2x4 float8_e4m3fn
    float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz float8_e8m0fnu float4_e2m1fn_x2 bits1x8
    bits2x4 bits4x2 bits8 bits16 int1 int2 int3 int4 int5 int6 int7 uint1 uint2 uint3 uint4
    uint5 uint6 uint7 per_tensor_affine per_tensor_symmetric per_channel_affine
    per_channel_symmetric per_channel_affine_float_qparams strided sparse_coo sparse_csr
    sparse_csc sparse_bsr sparse_bsc
"""
TORCH_VALUES = frozenset(f"torch.{name}" for name in _TORCH_VALUE_NAMES.split())
# Python 2 module names a protocol 2 pickle writes (``__builtin__ set``).
PY2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg", "exceptions": "builtins"}


#: How a pickle uses a name: calls it (REDUCE, INST, OBJ), makes an instance of it without a
#: call (NEWOBJ, or ``copyreg._reconstructor`` then BUILD), or only holds it as a value.
CALL, INSTANCE, VALUE = "call", "instance", "value"
# The base class ``copyreg._reconstructor`` may be given: it calls ``base.__new__`` (and
# ``base.__init__`` for any other base), so only ``object`` makes a plain instance.
RECONSTRUCTOR = "copyreg._reconstructor"
RECONSTRUCTOR_BASES = frozenset({"builtins.object"})


def accepted(full: str, use: str) -> bool:
    """Whether gradviz's loaders accept the name ``full`` ("module.qualname") for ``use``:
    a call only for the names above; an instance or a value for any name that is not
    hostile, whatever its spelling (``net_x`` as well as ``NetX``): gradviz makes an inert
    stand-in of it that records the state the file gives it and never imports or calls it."""
    if full in ACCEPTED_CALLABLES or full.startswith(ACCEPTED_CALLABLE_PREFIXES):
        return True
    if full in TORCH_VALUES or _storage_or_tensor_type(full):
        return True
    return use != CALL and not is_hostile(full)


def _storage_or_tensor_type(full: str) -> bool:
    """``torch.FloatStorage``, ``torch.cuda.HalfTensor``, ``torch.sparse.FloatTensor``."""
    module, _, qualname = full.rpartition(".")
    return module in ("torch", "torch.cuda", "torch.sparse") and qualname.endswith(
        ("Storage", "Tensor")
    )


def is_hostile(full: str) -> bool:
    """True for a name that can run a process, evaluate code or import a module."""
    module = full.split(".", 1)[0]
    return module in HOSTILE_MODULES or full in HOSTILE_NAMES
