"""Instant edits: a change of the setup restarts the lab's run in place, without a dialog;
the runs before stay on the loss plot, faint, and Edit > Undo brings a setup back."""

from __future__ import annotations

from fixtures_app import RUN_TIMEOUT_MS, isolated_settings, make_lab, small  # noqa: F401
from PySide6.QtCore import Qt

from gradviz.gui.pages.lab.earlier_runs import KEPT
from gradviz.gui.run.session import RunState


def _running(qtbot, lab, steps: int = 3):
    lab.start()
    qtbot.waitUntil(
        lambda: lab.session.latest is not None and lab.session.latest.step >= steps,
        timeout=RUN_TIMEOUT_MS,
    )


def _frames_of_new_runs(lab) -> list:
    """The snapshots shown from now on, to check where a restarted run began."""
    shown: list = []
    lab.session.snapshotShown.connect(shown.append)
    return shown


def test_switching_a_running_masked_run_to_naive_restarts_it_and_undo_brings_masked_back(
    qtbot,
    make_lab,  # noqa: F811 - fixture
):
    lab = make_lab(small("masked", n=16))
    _running(qtbot, lab)
    old = lab.session.generation
    shown = _frames_of_new_runs(lab)
    lab.form.param("method").setValue("naive")
    session = lab.session
    assert lab.questions == [] and lab.error_dialog is None  # no dialog of any kind
    assert session.generation > old and session.config.method == "naive"
    assert session.state is RunState.RUNNING  # it goes on running, from step 0
    qtbot.waitUntil(lambda: any(s.generation == session.generation for s in shown),
                    timeout=RUN_TIMEOUT_MS)  # fmt: skip
    first = next(s for s in shown if s.generation == session.generation)
    assert (first.step, first.method) == (0, "naive")
    earlier = lab.views.readouts()["loss"]["earlier_runs"]
    assert len(earlier) == 1 and earlier[0]["label"].startswith("earlier: method=masked (")
    assert earlier[0]["losses"] >= 3 and "n=16; dim=3" in earlier[0]["details"]
    # Its curve is drawn: faint, under the current run's.
    curve = lab.views.views["loss"].widget.earlier._items[0]
    assert len(curve.getData()[0]) >= 3 and curve.curve.toolTip() == earlier[0]["details"]

    # A step of the naive run on screen: a run kept on the plot has taken one.
    naive_stepped = lambda: session.shown.generation == session.generation and session.shown.step  # noqa: E731
    qtbot.waitUntil(naive_stepped, timeout=RUN_TIMEOUT_MS)
    undo = lab.window.actions["undo"]
    assert undo.isEnabled() and "method" in undo.text()
    assert undo in lab.window.edit_menu.actions()
    lab.window.activateWindow()
    lab.window.setFocus()
    qtbot.keyClick(lab.window, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert lab.form.param("method").value() == "masked"
    assert lab.form.config() == small("masked", n=16)
    assert session.config == small("masked", n=16) and session.state is RunState.RUNNING
    # The naive run is kept in its turn, newest first; Redo goes forward to naive again.
    qtbot.waitUntil(lambda: session.latest is not None and session.latest.method == "masked",
                    timeout=RUN_TIMEOUT_MS)  # fmt: skip
    labels = [e["label"] for e in lab.views.readouts()["loss"]["earlier_runs"]]
    assert labels[0].startswith("earlier: method=naive (")
    assert labels[1].startswith("earlier: same setup (")  # the first masked run
    lab.window.actions["redo"].trigger()
    assert lab.form.config().method == "naive" == session.config.method
    assert not lab.window.actions["redo"].isEnabled()


def test_only_the_last_runs_are_kept_and_a_paused_run_restarts_paused(
    qtbot,
    make_lab,  # noqa: F811 - fixture
):
    lab = make_lab(small("safe", n=12))
    session = lab.session
    for n in (13, 14, 15, 16, 17):
        lab.step_once()
        qtbot.waitUntil(lambda: session.latest is not None and session.latest.step >= 1,
                        timeout=RUN_TIMEOUT_MS)  # fmt: skip
        lab.form.param("n").setValue(n)
        assert session.state is RunState.READY and session.config.n == n
        qtbot.waitUntil(lambda n=n: session.latest is not None and session.latest.n_points == n,
                        timeout=RUN_TIMEOUT_MS)  # fmt: skip
    earlier = lab.views.readouts()["loss"]["earlier_runs"]
    assert len(earlier) == KEPT  # the newest ones, nothing older
    assert [e["label"].split(" (")[0] for e in earlier] == [
        "earlier: n=16",
        "earlier: n=15",
        "earlier: n=14",
    ]  # named by how they differ from the run at N = 17
    for _ in range(5):  # every setup back, one at a time
        lab.window.actions["undo"].trigger()
    assert lab.form.config().n == 12 and session.config.n == 12
    assert not lab.window.actions["undo"].isEnabled()


def test_an_edit_that_cannot_start_its_run_keeps_the_last_good_views(
    qtbot,
    make_lab,  # noqa: F811 - fixture
):
    from gradviz.core.lab.fit import DistanceFitRun

    def no_seventeen(config):
        if config.n == 17:
            raise MemoryError("no room for 17 points")
        return DistanceFitRun(config)

    lab = make_lab(small("safe", n=12), run_factory=no_seventeen)
    _running(qtbot, lab, steps=2)
    lab.pause()
    good = lab.session.latest
    qtbot.waitUntil(lambda: lab.session.shown is good or lab.session.shown.step >= good.step,
                    timeout=RUN_TIMEOUT_MS)  # fmt: skip
    good = lab.session.shown
    lab.form.param("n").setValue(17)
    session = lab.session
    qtbot.waitUntil(lambda: session.state is RunState.FAILED, timeout=RUN_TIMEOUT_MS)
    assert session.shown is good and lab.views.snapshot is good
    assert lab.views.readouts()["loss"]["losses"] == len(good.loss_history)
    assert "memory" in lab.error_dialog.sentence.lower()  # what failed, in the dialog
    message = lab.window.statusBar().currentMessage()
    assert message.startswith("The new run failed:") and f"step {good.step:,}" in message
    lab.error_dialog.close()
    lab.window.actions["undo"].trigger()  # back to the setup that ran
    qtbot.waitUntil(lambda: session.latest is not None and session.latest.n_points == 12,
                    timeout=RUN_TIMEOUT_MS)  # fmt: skip
    assert lab.form.config().n == 12


def test_an_example_opened_from_the_file_menu_fills_the_form_and_runs(
    qtbot,
    make_lab,  # noqa: F811 - fixture
):
    import json
    from pathlib import Path

    from gradviz.core.settings.config import FitConfig, LiveSettings

    path = Path(__file__).resolve().parents[2] / "resources" / "experiments" / "helix-naive.json"
    data = json.loads(path.read_text())
    expected = FitConfig.from_dict(data["fit"])  # read here, apart from the app's reader
    lab = make_lab(small("safe", n=12))
    file_menu = lab.window.file_menu
    (examples,) = [a.menu() for a in file_menu.actions() if a.text() == "&Examples"]
    entries = {a.text().split("  —  ")[0]: a for a in examples.actions()}
    assert set(entries) == {p.stem for p in path.parent.glob("*.json")}
    action = entries["helix-naive"]
    assert action.text().endswith(data["description"]) and not action.icon().isNull()
    action.trigger()
    assert lab.form.config() == expected
    assert lab.form.live_settings() == LiveSettings(**data["display"])
    session = lab.session
    assert session.config == expected
    qtbot.waitUntil(lambda: session.latest is not None and session.latest.method == "naive",
                    timeout=RUN_TIMEOUT_MS)  # fmt: skip
    assert session.latest.n_points == 200
    assert "helix-naive" in lab.window.statusBar().currentMessage()
    lab.window.actions["undo"].trigger()  # the setup before the example
    assert lab.form.config() == small("safe", n=12) == session.config
