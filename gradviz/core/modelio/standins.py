"""Read ``torch.save`` pickles without running code from them.

torch's weights-only unpickler refuses every class and function it does not know. gradviz
lists the names a file uses without loading it (``get_unsafe_globals_in_checkpoint``, a
static pass over the pickle), then maps each of them to a fresh ``InertObject`` subclass of
its own: the file's classes are never imported and its functions never called. A whole
pickled module comes back as a tree of inert objects holding the module's saved state
(``_modules``, ``_parameters``, attributes), which ``tree.py`` reads.
"""

from __future__ import annotations

import io
import pickle
import re
import threading
from typing import Any

from gradviz.core.common.errors import GradvizError

# torch keeps the allowed names in one process-wide set; reads on two threads (the desktop
# app reads a model off the GUI thread for its panel and for the Graph page at once) must not
# add or remove each other's stand-ins mid-load, nor list a file's names while another
# thread's stand-ins count as allowed: that listing came back empty, and the load failed.
_SAFE_GLOBALS_LOCK = threading.Lock()


class InertObject:
    """Stands in for a class or function named in a pickle. Creating, calling or restoring
    one only records its arguments and state; ``qualname`` is the name in the file."""

    qualname = ""
    # An instance made as copyreg._reconstructor makes it (object.__new__) has these too.
    pickled_args: tuple = ()
    pickled_state: Any = None

    def __new__(cls, *args: Any, **kwargs: Any) -> InertObject:
        obj = object.__new__(cls)
        object.__setattr__(obj, "pickled_args", args)
        object.__setattr__(obj, "pickled_state", None)
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        object.__setattr__(self, "pickled_state", state)

    def __repr__(self) -> str:
        return f"<inert {self.qualname}>"


class _Reconstructor(InertObject):
    """Stands in for ``copyreg._reconstructor(cls, object, None)``, with which protocol 0
    and 1 pickles make an instance without calling its class: an instance of ``cls``'s own
    stand-in (the pickle check let ``cls`` through only with ``object`` as its base)."""

    qualname = "copyreg._reconstructor"

    def __new__(cls, *args: Any, **kwargs: Any) -> InertObject:
        made = args[0] if args else None
        if isinstance(made, type) and issubclass(made, InertObject):
            return made.__new__(made)
        return super().__new__(cls, *args, **kwargs)


def standins_for(names: list[str]) -> list[tuple[type, str]]:
    """One inert class per name, as ``(class, "module.Name")`` pairs for safe_globals."""
    return [(_standin(name), name) for name in names]


def _standin(name: str) -> type:
    if name == _Reconstructor.qualname:
        return type("Inert", (_Reconstructor,), {})
    return type("Inert", (InertObject,), {"qualname": name})


def read_torch_pickle(data: bytes, name: str, *, zip_format: bool) -> tuple[Any, list[str]]:
    """The object a ``torch.save`` file holds and the class/function names it uses beyond
    torch's tensor rebuilders, read on the CPU with ``weights_only=True`` (always passed
    explicitly: an environment variable can flip the default) inside sparse-invariant checks
    (sparse tensors are refused before, from what the file declares: ``declared.py``).

    Plain (non-zip) pickles get no stand-ins: a static listing of their names is not
    available, so any class or function in them is refused."""
    import torch

    names: list[str] = []
    if zip_format:
        from gradviz.core.modelio.plain_state_dict import read_plain_state_dict

        # A plain state_dict is built from its declarations directly (torch's reader costs
        # 60 µs a tensor); anything else is read by torch's weights-only reader.
        plain = read_plain_state_dict(data, name)
        if plain is not None:
            return plain, names
    with _SAFE_GLOBALS_LOCK:  # the listing too: what torch allows is process-wide
        if zip_format:
            names = _names_beyond_torchs(data, name)
        try:
            with (
                torch.serialization.safe_globals(standins_for(names)),
                torch.sparse.check_sparse_tensor_invariants(),
            ):
                obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as exc:
            raise GradvizError(_unpickling_message(name, str(exc))) from None
        except Exception as exc:
            raise GradvizError(_load_failure_message(name, exc)) from None
    return obj, names


def _names_beyond_torchs(data: bytes, name: str) -> list[str]:
    """The globals a zip ``torch.save`` pickle names that torch does not allow by itself."""
    import torch

    try:
        return sorted(torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data)))
    except Exception as exc:  # a damaged pickle fails here first
        raise GradvizError(f"{name} is a damaged torch.save file ({_first_line(exc)}).") from None


def _unpickling_message(name: str, text: str) -> str:
    found = re.search(r"GLOBAL ([\w.]+)", text)
    if found:
        return (
            f"{name} names {found.group(1)}, which gradviz will not load: it never runs code "
            "from model files (save the model with torch.save(model.state_dict(), path))."
        )
    if _mentions_sparse(text):
        return f"{name} holds an invalid sparse tensor ({_first_line_text(text)})."
    return f"{name} cannot be read safely: {_first_line_text(text)}."


def _load_failure_message(name: str, exc: Exception) -> str:
    text = _first_line(exc)
    if _mentions_sparse(str(exc)):
        return f"{name} holds an invalid sparse tensor ({text})."
    return f"{name} is damaged or truncated and cannot be read ({text})."


def _mentions_sparse(text: str) -> bool:
    # The sparse-invariant checks report indices out of range, bad nnz or a bad layout.
    text = text.lower()
    return any(word in text for word in ("sparse", "invariant", "indices", "nnz"))


def _first_line(exc: BaseException) -> str:
    return _first_line_text(str(exc)) or type(exc).__name__


def _first_line_text(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    # torch's weights-only errors start with a generic paragraph; keep the specific line.
    for line in lines:
        if "GLOBAL" in line or "Unsupported" in line or "sparse" in line.lower():
            return line.rstrip(".")[:300]
    # torch's paragraph suggests weights_only=False (running the file's code): never pass
    # that on; its own reason is the line after "WeightsUnpickler error".
    specific = [
        line
        for line in lines
        if "weights_only" not in line and "torch.load" not in line and "file an issue" not in line
    ]
    return (specific[0].rstrip(".")[:300]) if specific else "it is not a file torch reads safely"
