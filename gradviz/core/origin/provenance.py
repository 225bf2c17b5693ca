"""Where an operation runs: the module, the user's source line and, in the backward, the
forward call that created the running autograd node.

Modules are followed with torch's global module forward hooks (every ``nn.Module`` call in
the process, which is why they are installed only while a trace is armed); names are the
dotted paths from the outermost module being run. The source line is the innermost frame
of the Python stack that lies outside torch and gradviz.
"""

from __future__ import annotations

import functools
import os
import sys
import threading

import torch
from torch import nn
from torch.nn.modules.module import (
    register_module_forward_hook,
    register_module_forward_pre_hook,
)

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_GRADVIZ_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
_FUNCTION_PY = os.path.join(_TORCH_DIR, "autograd", "function.py")
#: gradviz's own machinery, passed over even where gradviz's other code counts as the user's.
_MACHINERY = tuple(
    os.path.join(_GRADVIZ_DIR, *part)
    for part in (("core", "origin"), ("core", "record"), ("commands",))
)
#: code -> whether its frames are passed over, one table per value of ``skip_gradviz`` (the
#: walk below looks each frame up in it: the tracer walks the stack for every forward
#: operation that makes an autograd node, so it is kept to one lookup a frame).
_internal: dict[bool, dict[object, bool]] = {True: {}, False: {}}


def _is_internal(code, skip_gradviz: bool) -> bool:
    path = os.path.abspath(code.co_filename)
    inside = (_TORCH_DIR, _GRADVIZ_DIR) if skip_gradviz else (_TORCH_DIR, *_MACHINERY)
    known = path.startswith(inside) or code.co_filename.startswith(("<frozen", "<string>"))
    _internal[skip_gradviz][code] = known
    return known


def user_source(skip_gradviz: bool = True) -> tuple[str, str]:
    """(``"path/to/file.py:LINE"``, function name) of the innermost frame outside torch
    and gradviz (empty when every frame is inside them; ``skip_gradviz=False`` counts
    gradviz's own computations, such as the lab's distance methods, as the user's). The
    forward of a custom ``autograd.Function`` is passed over for the line that called its
    ``apply``."""
    known = _internal[skip_gradviz]
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        inside = known.get(code)
        if inside is None:
            inside = _is_internal(code, skip_gradviz)
        if not inside:
            caller = frame.f_back
            if caller is not None and _in_function_forward(frame, caller, skip_gradviz):
                frame = caller  # inside Function.forward: report the apply call
                continue
            return f"{_short(code.co_filename)}:{frame.f_lineno}", code.co_name
        frame = frame.f_back
    return "", ""


def _in_function_forward(frame, caller, skip_gradviz: bool) -> bool:
    """Whether ``frame`` runs a custom ``autograd.Function``'s forward: called from
    function.py (torch 2.13), or straight from torch's C++ apply (2.14: the caller is then
    the user's own line or torch's), with the Function's context as its first argument."""
    if caller.f_code.co_filename == _FUNCTION_PY:
        return True
    code = frame.f_code
    if code.co_name != "forward" or not code.co_argcount:
        return False
    ctx = frame.f_locals.get(code.co_varnames[0])
    return isinstance(ctx, torch.autograd.function.FunctionCtx)


@functools.lru_cache(maxsize=4096)
def _short(path: str) -> str:
    """A path relative to the working directory when it lies below it, else as given."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if rel.startswith("..") else rel


class ModuleTracker:
    """The stack of modules running now, as dotted names from the outermost one.

    ``install()`` registers the global forward pre/post hooks; ``remove()`` takes them away.
    ``current`` is the innermost module's name ("" outside any module). Parameters and
    buffers of every module seen are named too (``tensor_name``), so a non-finite value
    that enters from outside can be called ``fc1.weight``.
    """

    def __init__(self) -> None:
        self._thread = threading.get_ident()  # the global hooks fire in every thread: follow one
        self._stack: list[str] = []
        self._names: dict[int, str] = {}  # id(module) -> dotted name, for the roots seen
        self._roots: list[nn.Module] = []  # kept alive so that the ids stay theirs
        self._tensors: dict[int, str] = {}  # storage data_ptr -> parameter/buffer name
        self._parameters: set[int] = set()  # storage data_ptr of the parameters among them
        self._handles: list = []

    @property
    def current(self) -> str:
        return self._stack[-1] if self._stack else ""

    def place(self, skip_gradviz: bool) -> tuple[str, bool, str, str]:
        """(module, in_model, source, function) of the forward operation running now:
        ``in_model`` with ``current`` "" is the root's own code, not code outside it."""
        return (self.current, bool(self._stack), *user_source(skip_gradviz))

    def install(self) -> None:
        self._thread = threading.get_ident()
        self._handles = [
            register_module_forward_pre_hook(self._on_pre),
            register_module_forward_hook(self._on_post, always_call=True),
        ]

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._stack.clear()

    def tensor_name(self, t: torch.Tensor) -> str | None:
        """``"fc1.weight"`` where ``t`` shares storage with a parameter or buffer seen."""
        return self._tensors.get(storage_key(t))

    def is_parameter(self, t: torch.Tensor) -> bool:
        """Whether ``t`` shares storage with a parameter of a module seen."""
        return storage_key(t) in self._parameters

    def _on_pre(self, module: nn.Module, _args) -> None:
        if threading.get_ident() != self._thread:
            return
        name = self._names.get(id(module))
        if name is None:
            if self._stack:  # a module outside the root's tree, called from inside it
                name = f"{self._stack[-1]}.{type(module).__name__}".lstrip(".")
            else:
                self._add_root(module)
                name = self._names[id(module)]
        self._stack.append(name)

    def _on_post(self, _module: nn.Module, _args, _output) -> None:
        if self._stack and threading.get_ident() == self._thread:
            self._stack.pop()

    def _add_root(self, root: nn.Module) -> None:
        self._roots.append(root)
        for name, m in root.named_modules(remove_duplicate=False):
            self._names.setdefault(id(m), name)
        for name, t in [*root.named_parameters(), *root.named_buffers()]:
            self._tensors.setdefault(storage_key(t), name)
        self._parameters.update(storage_key(p) for p in root.parameters())


def storage_key(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # a tensor without storage (meta, sparse)
        return -id(t)


class NodeMap:
    """Autograd node -> (module, source, function) of the forward operation that created it.

    Inside a dispatch mode the node of the running forward operation does not exist yet
    on the output (autograd sets ``grad_fn`` after the mode returns), but it has been
    made: autograd numbers nodes in creation order (``_sequence_nr``), and an operation
    dispatched while the next free number is ``s + 1`` belongs to node ``s`` (the node of
    a custom ``autograd.Function`` is made before its forward runs, so the same holds).
    So each forward operation that finds a new next number records where it runs, and a
    node ``s`` of the backward looks up ``s + 1``.
    """

    #: Forget the oldest entries beyond this many (a long trace over many steps).
    LIMIT = 1_000_000

    def __init__(self) -> None:
        self._where: dict[int, tuple[str, str, str]] = {}
        self._last = -1

    def changed(self) -> int | None:
        """The next node number if it changed since the last call (record there), else None."""
        number = _next_node_number()
        if number == self._last:
            return None
        self._last = number
        return number

    def remember(self, number: int, where: tuple[str, bool, str, str]) -> None:
        if len(self._where) >= self.LIMIT:
            self._where.clear()
        self._where.setdefault(number, where)

    def lookup(self, node) -> tuple[str, bool, str, str]:
        """(module, in_model, source, function) of the forward call that made ``node``
        (empty if unseen)."""
        unseen = ("", False, "", "")
        try:
            number = node._sequence_nr()
        except (AttributeError, RuntimeError):
            return unseen
        return self._where.get(number + 1, unseen)

    def clear(self) -> None:
        self._where.clear()
        self._last = -1


_next_node_number = torch._C._autograd._get_sequence_nr
