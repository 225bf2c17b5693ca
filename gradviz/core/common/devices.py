"""Which compute devices exist here, and what each is called."""

from __future__ import annotations

import torch

from gradviz.core.common.errors import GradvizError


def available_devices() -> list[str]:
    """Device names usable here, CPU first: ``cpu``, ``cuda:0``..., ``mps``."""
    names = ["cpu"]
    if torch.cuda.is_available():
        names += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        names.append("mps")
    return names


def describe_device(name: str) -> str:
    """A human label, e.g. ``cuda:0 (NVIDIA H200)``."""
    if name.startswith("cuda"):
        return f"{name} ({torch.cuda.get_device_name(torch.device(name))})"
    return name


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` picks CUDA, then MPS, then CPU; anything else must exist here."""
    existing = available_devices()
    if name == "auto":
        for prefix in ("cuda", "mps"):
            for candidate in existing:
                if candidate.startswith(prefix):
                    return torch.device(candidate)
        return torch.device("cpu")
    wanted = "cuda:0" if name == "cuda" else name
    if wanted not in existing:
        raise GradvizError(
            f"Device {name!r} is not available on this machine; available: "
            f"{', '.join(existing)} (or 'auto')."
        )
    return torch.device(wanted)
