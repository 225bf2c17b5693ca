"""What Help > About shows: the versions of gradviz and the libraries it runs on, and the
compute devices this machine offers.

Versions are read from the installed distributions' metadata (``importlib.metadata``), so
asking for the Qt binding's or pyqtgraph's version imports neither; the core never imports
Qt. torch is the exception: its own ``torch.__version__`` carries the build's local label
(``2.14.1+cu130``, ``2.13.0+cpu``) that the wheel's metadata may drop, and that label is what
tells a CPU build from a CUDA one. ``devices_seen`` imports torch too.
"""

from __future__ import annotations

import platform
from importlib import metadata

import gradviz

#: Shown name -> distributions that provide it, first installed one wins. The Qt binding is
#: published both as the full ``PySide6`` and as the add-on-free ``PySide6-Essentials``.
_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "torch": ("torch",),
    "numpy": ("numpy",),
    "PySide6": ("PySide6-Essentials", "PySide6"),
    "pyqtgraph": ("pyqtgraph",),
    "safetensors": ("safetensors",),
}


def versions() -> dict[str, str | None]:
    """Name -> version string, in display order: gradviz, Python, then the libraries.

    A library that is not installed maps to None (e.g. a headless install without Qt).
    """
    found: dict[str, str | None] = {
        "gradviz": gradviz.__version__,
        "Python": platform.python_version(),
    }
    for name, candidates in _DISTRIBUTIONS.items():
        found[name] = _first_installed(candidates)
    if found.get("torch") is not None:
        found["torch"] = _torch_build_version()
    return found


def devices_seen() -> list[str]:
    """Human labels of the devices torch can use here, CPU first, e.g.
    ``["cpu", "cuda:0 (NVIDIA H200)"]``."""
    from gradviz.core.common.devices import available_devices, describe_device

    return [describe_device(name) for name in available_devices()]


def about_text() -> str:
    """The About box as plain text: one ``name version`` line each, then the devices."""
    lines = [f"{name} {version or 'not installed'}" for name, version in versions().items()]
    lines.append("Devices: " + ", ".join(devices_seen()))
    return "\n".join(lines)


def _torch_build_version() -> str:
    import torch

    return str(torch.__version__)


def _first_installed(candidates: tuple[str, ...]) -> str | None:
    for distribution in candidates:
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return None
