"""Importing torch on a background thread without stopping the others for seconds.

Python holds the GIL while it loads a shared library (``ctypes.CDLL`` and the import of an
extension module both call ``dlopen`` with it held), and loading torch's libraries runs
their static initialisers: about 1.7 s for ``libtorch_cpu.so`` here, and more on a CUDA
build, which loads cuDNN, cuBLAS and the others through ``ctypes.CDLL`` first. Any other
thread, the app's GUI thread included, stands still all that time however idle the
importing thread's own core is (a black or frozen window on a busy machine).

``import_torch()`` imports torch with every one of those loads done first by ``dlopen``
called as a foreign function (ctypes releases the GIL around foreign calls), so that
torch's own load of the same file only finds it loaded. The same files are opened in the
same order with the same flags as torch opens them, so nothing about which library is
found changes. Only the C++ libraries are loaded this way, never torch's Python extension
(``torch._C``), whose initialisers may use the Python API and so need the GIL.

Where the platform has no ``dlopen`` (Windows) or anything about this fails, torch is
imported as usual.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.machinery
import os
import sys
import threading
from collections.abc import Iterator

#: The C++ library behind ``torch._C`` (CPU, and the CUDA one it links, on a CUDA build).
_LIBTORCH = "libtorch.dylib" if sys.platform == "darwin" else "libtorch.so"
_lock = threading.Lock()


def import_torch():
    """``import torch``, its shared libraries loaded without holding the GIL; returns it."""
    if "torch" in sys.modules or not hasattr(os, "RTLD_NOW"):
        import torch

        return torch
    with _lock, _loading_without_gil():
        import torch
    return torch


def _dlopen_function():
    """libc's ``dlopen`` as a ctypes foreign function (called without the GIL), or None."""
    try:
        dlopen = ctypes.CDLL(None).dlopen
    except (OSError, AttributeError):
        return None
    dlopen.argtypes = (ctypes.c_char_p, ctypes.c_int)
    dlopen.restype = ctypes.c_void_p
    return dlopen


@contextlib.contextmanager
def _loading_without_gil() -> Iterator[None]:
    """While the block runs, ``ctypes.CDLL(path)`` and the import of ``torch._C`` find
    their C++ libraries already loaded by a ``dlopen`` made without the GIL."""
    dlopen = _dlopen_function()
    if dlopen is None:
        yield
        return

    def preload(path: str, mode: int) -> None:
        # The handle is not kept or closed: the library stays for the process's life, as
        # torch's own load keeps it. A failure (NULL) changes nothing: torch's load reports.
        dlopen(os.fsencode(path), mode | os.RTLD_NOW)

    original = ctypes.CDLL

    class PreloadingCDLL(original):
        def __init__(self, name, mode=ctypes.DEFAULT_MODE, *args, **kwargs):
            if isinstance(name, (str, bytes, os.PathLike)) and os.path.isabs(os.fsdecode(name)):
                preload(os.fsdecode(name), mode)
            super().__init__(name, mode, *args, **kwargs)

    finder = _LibtorchFirst(preload)
    ctypes.CDLL = PreloadingCDLL
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        ctypes.CDLL = original
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)


class _LibtorchFirst:
    """A meta-path finder that finds nothing: on the way to ``torch._C`` it loads the C++
    library that extension links (torch's ``lib/libtorch``), and lets the import go on."""

    def __init__(self, preload) -> None:
        self._preload = preload

    def find_spec(self, fullname: str, path=None, target=None):
        if fullname == "torch._C" and path:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is not None and spec.origin:
                lib = os.path.join(os.path.dirname(spec.origin), "lib", _LIBTORCH)
                if os.path.exists(lib):
                    self._preload(lib, sys.getdlopenflags())
        return None

    def invalidate_caches(self) -> None:
        pass
