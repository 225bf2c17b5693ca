"""The app under a real X server: `gradviz gui --screenshot` opens the window, runs the
default experiment and saves a PNG of the whole window (skipped where Xvfb is missing).

Marked slow (a second interpreter, torch, an X server: ~9 s on two cores); the default
run's fast case is the offscreen ``gradviz gui RECORDING --screenshot`` of
``test_recordings.py``, and ``.ci/run`` runs this one on every change."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtGui import QImage

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("xvfb-run") is None, reason="xvfb-run is not installed")
def test_app_under_a_real_x_server_saves_a_screenshot_of_a_running_fit(tmp_path):
    out = tmp_path / "shot.png"
    env = dict(os.environ)
    env.update(
        QT_QPA_PLATFORM="xcb",
        GRADVIZ_SETTINGS_FILE=str(tmp_path / "settings.ini"),
        GRADVIZ_LOG_FILE=str(tmp_path / "gradviz.log"),
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
    )
    command = [
        "xvfb-run", "-a", "-s", "-screen 0 1920x1080x24",
        sys.executable, "-m", "gradviz", "gui", "--screenshot", str(out), "--run-for", "2",
    ]  # fmt: skip
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "QThread: Destroyed" not in proc.stderr
    image = QImage(str(out))
    assert image.width() >= 1280 and image.height() >= 800
    # A real picture, not an empty window: many distinct colours (heatmaps, curves, text).
    image = image.convertToFormat(QImage.Format.Format_RGB32)
    pixels = np.frombuffer(image.constBits(), np.uint32, image.width() * image.height())
    assert len(np.unique(pixels)) > 500
