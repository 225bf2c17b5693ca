"""The core runs where no Qt is installed: a fit in a process that cannot import Qt."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import importlib.abc
    import pkgutil
    import sys

    BLOCKED = ("PySide6", "shiboken6", "pyqtgraph", "superqt", "gradviz.gui")

    class NoQt(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ImportError(f"{name} is blocked in this test")
            return None

    sys.meta_path.insert(0, NoQt())

    import gradviz.core
    from gradviz.core.settings.config import FitConfig
    from gradviz.core.lab.fit import DistanceFitRun

    # Every core module imports without Qt.
    for info in pkgutil.iter_modules(gradviz.core.__path__, "gradviz.core."):
        __import__(info.name)

    run = DistanceFitRun(FitConfig(target="gaussian", n=8, steps=5, net="4-8-3:tanh"))
    run.run()
    snap = run.snapshot()
    assert snap.step == 5 and snap.jacobians.shape == (8, 3, 4)
    run = DistanceFitRun(FitConfig(target="gaussian", n=8, steps=5, method="naive"))
    run.run()
    assert run.first_nonfinite_grad_step == 0
    loaded = [m for m in sys.modules if any(m == b or m.startswith(b + ".") for b in BLOCKED)]
    assert not loaded, loaded
    print("core ok without Qt")
    """
)


def test_a_fit_runs_with_qt_made_unimportable():
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "core ok without Qt" in done.stdout


def test_the_blocker_really_blocks_qt():
    probe = SCRIPT.split("import gradviz.core")[0] + "import PySide6\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "PySide6 is blocked" in done.stderr
