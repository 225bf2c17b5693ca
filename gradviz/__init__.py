"""gradviz: see gradients of distance matrices and per-input Jacobians, live.

The library face: ``pairwise_distances``, ``stop_gradient``, ``per_input_jacobians``,
``watch`` (a recorder for your own training loop, with ``wrap_comm_hook`` for DDP models
that have their own communication hook), and ``trace_nonfinite`` / ``find_origin`` (where a
NaN or Inf started: operation, module, source line and cause). They are imported on first
use, so ``import gradviz`` stays light (no torch until one is used, never Qt).
"""

__version__ = "0.1.0"

#: Public name -> module that defines it (imported on first attribute access).
_LAZY = {
    "pairwise_distances": "gradviz.core.ops",
    "stop_gradient": "gradviz.core.ops",
    "per_input_jacobians": "gradviz.core.ops",
    "watch": "gradviz.core.record.recorder",
    "Recorder": "gradviz.core.record.recorder",
    "Reader": "gradviz.core.record.reader",
    "wrap_comm_hook": "gradviz.core.record.ddp",
    "trace_nonfinite": "gradviz.core.origin.tracer",
    "find_origin": "gradviz.core.origin.tracer",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gradviz' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
