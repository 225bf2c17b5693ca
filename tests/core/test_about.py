"""Help > About: versions from package metadata (no Qt import in the core) and the devices."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import torch

import gradviz
from gradviz.core.common import about
from gradviz.core.common.devices import available_devices


def test_versions_name_gradviz_python_and_each_library_in_display_order():
    found = about.versions()
    assert list(found)[:2] == ["gradviz", "Python"]
    assert found["gradviz"] == gradviz.__version__
    assert found["Python"] == ".".join(str(part) for part in sys.version_info[:3])
    assert found["torch"] == torch.__version__
    assert found["numpy"] == np.__version__
    assert found["pyqtgraph"] == metadata.version("pyqtgraph")
    assert {"PySide6", "safetensors"} <= set(found)


def test_qt_binding_version_comes_from_the_essentials_wheel_when_that_is_installed():
    try:
        expected = metadata.version("PySide6-Essentials")
    except metadata.PackageNotFoundError:
        pytest.skip("PySide6-Essentials is not installed here")
    assert about.versions()["PySide6"] == expected


def test_missing_library_is_reported_as_not_installed(monkeypatch):
    monkeypatch.setitem(about._DISTRIBUTIONS, "pyqtgraph", ("no-such-distribution-xyz",))
    assert about.versions()["pyqtgraph"] is None
    assert "pyqtgraph not installed" in about.about_text()


def test_about_imports_no_qt_and_no_pyqtgraph():
    code = (
        "import sys; from gradviz.core.common import about; "
        "about.versions(); about.devices_seen(); "
        "bad = [m for m in ('PySide6', 'shiboken6', 'pyqtgraph', 'superqt') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=Path(__file__).resolve().parents[2],  # the repository root: this gradviz
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_devices_seen_lists_cpu_first_and_every_available_device():
    seen = about.devices_seen()
    assert seen[0] == "cpu"
    assert len(seen) == len(available_devices())
    assert [label.split(" ")[0] for label in seen] == available_devices()


def test_about_text_has_one_line_per_version_and_the_devices():
    text = about.about_text().splitlines()
    assert text[0] == f"gradviz {gradviz.__version__}"
    assert text[-1].startswith("Devices: cpu")
    assert len(text) == len(about.versions()) + 1
