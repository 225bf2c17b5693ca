"""gradviz: see gradients of distance matrices and per-input Jacobians, live."""

__version__ = "0.1.0"
