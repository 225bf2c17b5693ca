"""Readouts follow the source in focus: a recording opened over a paused live run is shown
at once, and the status bar's verdict comes from the shown snapshot's own run."""

from __future__ import annotations

import pytest
from fixtures_app import isolated_settings, make_lab, small  # noqa: F401 - fixtures
from recording_fixtures import open_and_wait, write_fit_recording

from gradviz.cli import main as cli_main
from gradviz.gui.lab.session import RunState

WAIT_MS = 60_000


def _read_once(path):
    """zarr's I/O threads live as long as the process: start them here, before the tests
    that check no thread is left behind."""
    import zarr

    zarr.open_group(path, mode="r")["rank0/images/distances/data"][:]
    return path


@pytest.fixture(scope="module")
def fit_recording(tmp_path_factory):
    return _read_once(write_fit_recording(tmp_path_factory.mktemp("fit") / "run", steps=8))


@pytest.fixture(scope="module")
def naive_recording(tmp_path_factory):
    """``gradviz fit --method naive --record``: NaN gradients from step 0."""
    path = tmp_path_factory.mktemp("naive") / "run"
    args = ["fit", "--method", "naive", "--target", "gaussian", "--n", "10", "--steps", "6"]
    assert cli_main([*args, "--record", str(path)]) == 0
    return _read_once(path)


def test_a_lab_recording_opened_over_a_paused_run_is_shown_at_once(
    qtbot,
    make_lab,  # noqa: F811 - fixture
    fit_recording,
):
    lab = make_lab(small("safe", n=12, steps=100_000))
    lab.start()
    qtbot.waitUntil(lambda: lab.session.state is RunState.RUNNING, timeout=WAIT_MS)
    lab.pause()
    qtbot.waitUntil(lambda: lab.session.state is RunState.PAUSED, timeout=WAIT_MS)
    live_generation = lab.session.generation
    open_and_wait(qtbot, lab, fit_recording)
    # Let any late frame of the stopped live run arrive: it must not take the views back.
    qtbot.waitUntil(lambda: lab.session.state is not RunState.PAUSED, timeout=WAIT_MS)
    qtbot.wait(300)
    shown = lab.session.shown
    assert shown.generation < 0 and shown.generation != live_generation
    views = lab.views.snapshot
    assert views is shown  # every view shows the recording's step, not the live run's


def test_the_status_bar_verdict_comes_from_the_shown_recording_not_the_lab(
    qtbot,
    make_lab,  # noqa: F811 - fixture
    naive_recording,
):
    lab = make_lab()
    open_and_wait(qtbot, lab, naive_recording)
    qtbot.waitUntil(lambda: lab.session.shown is not None and lab.session.shown.generation < 0,
                    timeout=WAIT_MS)  # fmt: skip
    verdict = lab.window.status_labels["nan"].text()
    assert verdict != "gradients finite"
    assert "step 0" in verdict  # as gradviz inspect says: the first non-finite step is 0


def test_show_first_nan_moves_the_timeline_to_the_first_nan_step(
    qtbot,
    make_lab,  # noqa: F811 - fixture
):
    lab = make_lab(small("naive", n=12, steps=100_000))
    lab.start()
    timeline = lab.recordings.timeline
    qtbot.waitUntil(lambda: lab.session.pinned is not None, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: lab.session.latest.step > 20, timeout=WAIT_MS)
    lab.pause()
    qtbot.waitUntil(lambda: lab.session.state is RunState.PAUSED, timeout=WAIT_MS)
    newest = timeline.step
    lab.session.show_first_nan()
    pinned = lab.session.pinned
    assert lab.session.shown is pinned  # the first NaN stays on screen
    assert timeline.step is not None and timeline.step <= pinned.step < newest
    assert not timeline.following


def test_a_recorded_all_nan_step_reads_nan_in_the_coordinate_gradients_legend(
    qtbot,
    make_lab,  # noqa: F811 - fixture
    naive_recording,
):
    """``gradviz fit --method naive --record``: every coordinate gradient is NaN from step 0
    on; the legend said "finite 30" (the recording kept no coordinate gradients and the
    lab drew zeros as finite)."""
    lab = make_lab()
    data = open_and_wait(qtbot, lab, naive_recording)
    config = data.meta["config"]
    lab.recordings.timeline.select_index(0)
    coord = lab.window.readouts()["views"]["coord_grads"]
    assert coord["recorded"]
    assert coord["legend"]["NaN"] == config["n"] * config["dim"]
    assert coord["legend"]["finite"] == 0


def test_the_setup_panel_shows_a_lab_recordings_settings_and_start_runs_them(
    qtbot,
    make_lab,  # noqa: F811 - fixture
    naive_recording,
):
    """The Setup panel still showed helix / 200 / masked beside a gaussian / 10 / naive
    recording; Start then resumed the lab's waiting run of other settings."""
    lab = make_lab(small("masked", n=24, steps=100_000))
    open_and_wait(qtbot, lab, naive_recording)
    setup = lab.window.readouts()["setup"]
    assert (setup["target"], setup["n"], setup["method"]) == ("gaussian", 10, "naive")
    lab.start()
    qtbot.waitUntil(lambda: lab.session.shown.generation == lab.session.generation,
                    timeout=WAIT_MS)  # fmt: skip
    shown = lab.session.shown
    assert (shown.n_points, shown.method) == (10, "naive")
    assert (lab.session.config.target, lab.session.config.n) == ("gaussian", 10)


def test_a_recording_opened_while_torch_loads_stays_on_screen_once_it_has_loaded(
    qtbot,
    make_lab,  # noqa: F811 - fixture
    naive_recording,
):
    """``gradviz gui RECORDING``: the recording opens at once, torch loads behind it; step 0
    of a new run took the views ("0 steps done") while the timeline said "step 5"."""
    lab = make_lab()
    open_and_wait(qtbot, lab, naive_recording)
    # The order of ``gradviz gui RECORDING`` on a cold start, made certain: the recording is
    # on screen first, then the loader says torch is ready.
    lab.loader.ready.emit([("cpu", "cpu")])
    qtbot.waitUntil(lambda: lab.window.actions["start"].isEnabled(), timeout=WAIT_MS)
    shown = lab.session.shown
    assert shown is not None and shown.generation < 0  # still the recording
    readouts = lab.window.readouts()
    assert readouts["status"]["step"] == shown.step == readouts["timeline"]["step"] + 1
    assert {view["generation"] for view in readouts["views"].values()} == {shown.generation}


def test_opening_the_same_lab_recording_again_shows_its_settings_again(
    qtbot,
    make_lab,  # noqa: F811 - fixture
    naive_recording,
):
    """Found by the agreement test: a recording opened a second time, after the form had
    changed, kept the form's helix / 12 / safe beside its gaussian / 10 / naive steps."""
    lab = make_lab(small("safe", n=12, steps=100_000))
    open_and_wait(qtbot, lab, naive_recording)
    lab.form.set_config(small("safe", n=12, steps=100_000))
    lab.reset()
    qtbot.waitUntil(lambda: lab.session.shown is not None and lab.session.shown.generation > 0,
                    timeout=WAIT_MS)  # fmt: skip
    open_and_wait(qtbot, lab, naive_recording)
    setup = lab.window.readouts()["setup"]
    assert (setup["target"], setup["n"], setup["method"]) == ("gaussian", 10, "naive")
