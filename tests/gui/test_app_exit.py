"""The app as a script sees it: what `gradviz gui --screenshot` prints, and closing the window
while a step is still computing (a real process each: an abort only shows as its exit code)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _python(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO),
        QT_QPA_PLATFORM="offscreen",
        GRADVIZ_SETTINGS_FILE=str(tmp_path / "s.ini"),
        GRADVIZ_LOG_FILE=str(tmp_path / "gradviz.log"),
    )
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          timeout=180, cwd=REPO)  # fmt: skip


@pytest.mark.slow
def test_a_screenshot_prints_the_file_its_size_and_the_runs_state_and_step(tmp_path):
    from gradviz.core.settings.config import FitConfig
    from gradviz.core.settings.experiment import save_experiment
    from gradviz.gui.widgets.settings_form import LiveSettings

    experiment = tmp_path / "small.json"
    config = FitConfig(target="helix", n=32, dim=3, lr=0.01, steps=100_000, seed=1)
    save_experiment(str(experiment), config, LiveSettings())
    out = tmp_path / "shot.png"
    proc = _python(["-m", "gradviz", "gui", "--experiment", str(experiment),
                    "--screenshot", str(out), "--run-for", "0.3"], tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout
    match = re.fullmatch(rf"saved {re.escape(str(out))} \((\d+)x(\d+)\); run running at step (\d+)"
                         r"; page Distance-fit lab; status: running \| .+", lines[0])  # fmt: skip
    assert match is not None, lines[0]
    assert (int(match[1]), int(match[2])) == (1440, 900)
    assert int(match[3]) >= 0  # the step on screen (0 when the first update is not drawn yet)
    assert out.stat().st_size > 0


@pytest.mark.slow
def test_a_screenshot_of_an_experiment_that_cannot_run_says_failed_and_why(tmp_path):
    out = tmp_path / "shot.png"
    proc = _python(["-m", "gradviz", "gui", "--experiment", "helix;n=32;net=8-16-5:tanh",
                    "--screenshot", str(out), "--run-for", "0.3"], tmp_path)  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    (line,) = proc.stdout.strip().splitlines()
    assert line.startswith(f"saved {out} (1440x900); run failed: The network's last width is 5")
    assert "make them equal (e.g. 8-64-3:tanh); page Distance-fit lab" in line
    assert out.stat().st_size > 0


SLOW_STEP_SCRIPT = textwrap.dedent(
    """
    import threading
    from PySide6.QtCore import QTimer
    from gradviz.core.lab import fit
    from gradviz.core.settings.config import FitConfig
    from gradviz.gui.shell.app import build_controller, create_application

    real_step = fit.DistanceFitRun.step
    in_slow_step = threading.Event()
    stop_wait_over = threading.Event()

    def slow_step(self, *args, **kwargs):
        if self.completed_steps >= 1:  # step 0 is quick: the run gets going first
            in_slow_step.set()
            stop_wait_over.wait(60)  # still in the step when the stop wait below ends
        return real_step(self, *args, **kwargs)

    fit.DistanceFitRun.step = slow_step
    app = create_application()
    lab = build_controller(FitConfig(target="helix", n=24, dim=3, steps=100_000, seed=1))
    lab.window.show()
    lab.start_loading()

    def poll():
        if lab.torch_ready and lab.session.latest is not None and lab.session.worker:
            if lab.session.state.label == "ready":
                lab.start()
        if in_slow_step.is_set():
            lab.shutdown(timeout_s=0.2)  # a stop wait shorter than the step in flight
            stop_wait_over.set()
            lab.window.close()
            app.quit()
            return
        QTimer.singleShot(20, poll)

    QTimer.singleShot(0, poll)
    app.exec()
    print("threads left:", lab.thread_count, flush=True)
    """
)


@pytest.mark.slow
def test_closing_the_window_during_a_slow_step_waits_for_it_and_exits_cleanly(tmp_path):
    proc = _python(["-c", SLOW_STEP_SCRIPT], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "QThread: Destroyed" not in proc.stderr
    assert proc.stdout.strip() == "threads left: 0"
