"""Readouts follow the source in focus: a recording opened over a paused live run is shown
at once, and the status bar's verdict comes from the shown snapshot's own run."""

from __future__ import annotations

import pytest
from fixtures_app import isolated_settings, make_lab, small  # noqa: F401 - fixtures
from PySide6.QtWidgets import QApplication
from recording_fixtures import open_and_wait, write_fit_recording

from gradviz.cli import main as cli_main
from gradviz.gui.run.session import RunState

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


def _running(qtbot, build, method: str, n: int = 12):
    """A lab of ``small(method, n)`` started and seen running."""
    lab = build(small(method, n=n, steps=100_000))
    lab.start()
    qtbot.waitUntil(lambda: lab.session.state is RunState.RUNNING, timeout=WAIT_MS)
    return lab


def test_a_lab_recording_opened_over_a_paused_run_is_shown_at_once(
    qtbot,
    make_lab,  # noqa: F811 - fixture
    fit_recording,
):
    lab = _running(qtbot, make_lab, "safe")
    lab.pause()
    qtbot.waitUntil(lambda: lab.session.state is RunState.PAUSED, timeout=WAIT_MS)
    live_generation = lab.session.generation
    open_and_wait(qtbot, lab, fit_recording)
    # Every frame of the stopped live run delivered (its thread joined, what it queued
    # passed on): none may take the views back.
    qtbot.waitUntil(lambda: lab.session.state is not RunState.PAUSED, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: lab.session.workers() == [], timeout=WAIT_MS)
    QApplication.processEvents()
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


def _setup_of(lab) -> tuple:
    setup = lab.window.readouts()["setup"]
    return setup["target"], setup["n"], setup["method"], setup["differs_from_shown"]


def test_show_first_nan_of_a_run_stopped_for_a_recording_shows_that_runs_settings(
    qtbot,
    make_lab,  # noqa: F811 - fixture
    fit_recording,
):
    """Found by the agreement test: a naive run stopped by opening a safe recording, then
    Show first NaN: the naive run's pinned step beside the recording's "method safe"."""
    lab = make_lab(small("naive", n=12, steps=100_000))
    lab.start()
    qtbot.waitUntil(lambda: lab.session.pinned is not None, timeout=WAIT_MS)
    lab.form.param("lr").setValue(0.02)  # applies live: the run's rate from now on
    open_and_wait(qtbot, lab, fit_recording)
    assert _setup_of(lab) == ("gaussian", 10, "safe", [])
    lab.window.actions["first_nan"].trigger()
    shown = lab.session.shown
    assert shown is lab.session.pinned and shown.generation == lab.session.generation
    assert _setup_of(lab) == ("helix", 12, "naive", [])
    assert lab.window.readouts()["setup"]["lr"] == 0.02  # as the run runs, not as it began
    # The timeline names the live run's pinned step too, not the recording's last one.
    timeline = lab.window.readouts()["timeline"]
    assert (timeline["state"], timeline["step"]) == ("live run", shown.step)


def test_a_reset_over_a_recording_takes_the_timeline_and_the_setup_panel_with_it(
    qtbot,
    make_lab,  # noqa: F811 - fixture
    naive_recording,
):
    """Found by the agreement test: N changed over a lab recording (a reset to a live run)
    left the recording's timeline under the live step 0; scrubbing it brought the
    recording's gaussian / 10 steps back beside the form's 16."""
    lab = make_lab(small("safe", n=12, steps=100_000))
    open_and_wait(qtbot, lab, naive_recording)
    lab.form.param("n").setValue(16)
    qtbot.waitUntil(lambda: lab.session.shown is not None and lab.session.shown.generation > 0,
                    timeout=WAIT_MS)  # fmt: skip
    assert _setup_of(lab) == ("gaussian", 16, "naive", [])
    # The reset's step 0 took the timeline from the recording: it names the live run.
    timeline = lab.window.readouts()["timeline"]
    assert (timeline["state"], timeline["step"]) == ("live run", 0)
    open_and_wait(qtbot, lab, naive_recording)  # back to the recording: its settings again
    assert lab.session.shown.generation < 0
    assert _setup_of(lab) == ("gaussian", 10, "naive", [])


def test_a_change_kept_for_the_next_run_is_said_under_the_form(
    qtbot,
    make_lab,  # noqa: F811 - fixture
    fit_recording,
    monkeypatch,
):
    """A change that cannot run now (it would not fit in memory) keeps the going run: the
    form holds the next run's N, and says so."""
    monkeypatch.setenv("GRADVIZ_MEMORY_LIMIT", "50M")  # N = 12 fits; N = 20,000 does not
    lab = _running(qtbot, make_lab, "safe")
    generation = lab.session.generation
    lab.form.param("n").setValue(20_000)
    assert "only 52 MB is available" in lab.error_dialog.sentence  # why it kept the run
    lab.error_dialog.close()
    assert lab.session.state is RunState.RUNNING and lab.session.config.n == 12
    assert lab.session.generation == generation
    setup = lab.window.readouts()["setup"]
    assert (setup["n"], setup["differs_from_shown"]) == (20_000, ["n"])
    assert "N points" in setup["next_run_note"] and lab.form.next_run.isVisible()
    assert "Reset uses it." in setup["next_run_note"]  # Start resumes the run as it is
    lab.form.param("n").setValue(12)  # back to the run's own: nothing differs
    assert lab.window.readouts()["setup"]["differs_from_shown"] == []
    assert not lab.form.next_run.isVisible()


def test_back_to_live_view_puts_the_timeline_back_on_the_newest_step(
    qtbot,
    make_lab,  # noqa: F811 - fixture
):
    """Found by the agreement test: Show first NaN, then Back to live view: the views showed
    the newest step while the timeline stayed on the first NaN's."""
    lab = make_lab(small("naive", n=12, steps=100_000))
    session, timeline = lab.session, lab.recordings.timeline
    for wanted in (1, 2):
        lab.step_once()
        qtbot.waitUntil(lambda w=wanted: session.shown is not None and session.shown.step >= w,
                        timeout=WAIT_MS)  # fmt: skip
    lab.window.actions["first_nan"].trigger()
    assert session.shown is session.pinned and timeline.step == session.pinned.step
    lab.window.actions["live"].trigger()
    shown = session.shown
    assert shown is session.latest and shown.step > session.pinned.step
    assert timeline.readouts()["step"] == shown.step and timeline.following


def _views_and_timeline_on(qtbot, lab, step: int) -> None:
    """The live timeline's cursor and every drawn view are on ``step``."""
    qtbot.waitUntil(
        lambda: (
            {r["step"] for r in lab.views.readouts().values() if r["step"] is not None} == {step}
        ),
        timeout=WAIT_MS,
    )
    assert lab.recordings.timeline.readouts()["step"] == step


def test_start_after_scrubbing_back_puts_the_newest_step_on_screen_with_the_cursor(
    qtbot,
    make_lab,  # noqa: F811 - fixture
):
    """Found by the agreement test: Step, choose step 0 on the timeline, Start. The
    timeline's cursor went to the newest step at once, while the views stayed on step 0
    until the run's next frame."""
    lab = make_lab(small("safe", n=12, steps=100_000))
    lab.step_once()
    qtbot.waitUntil(lambda: lab.session.latest.step == 1, timeout=WAIT_MS)
    timeline = lab.recordings.timeline
    qtbot.waitUntil(lambda: timeline.readouts()["count"] == 2, timeout=WAIT_MS)
    timeline.select_index(0)
    _views_and_timeline_on(qtbot, lab, 0)
    lab.start()
    # Before any event is processed (no new frame can have arrived): one step everywhere.
    newest = lab.session.latest
    assert lab.session.shown is newest
    assert timeline.readouts()["step"] == newest.step == 1
    assert {r["step"] for r in lab.views.readouts().values() if r["step"] is not None} == {1}


def test_back_to_live_view_returns_from_a_step_chosen_on_the_timeline(
    qtbot,
    make_lab,  # noqa: F811 - fixture
):
    """Run > Back to live view (Follow the run again) was greyed after scrubbing back: only
    Follow on the timeline went back."""
    lab = _running(qtbot, make_lab, "safe")
    timeline, live = lab.recordings.timeline, lab.window.actions["live"]
    qtbot.waitUntil(lambda: timeline.readouts()["count"] >= 3, timeout=WAIT_MS)
    assert not live.isEnabled()  # following the run already
    timeline.select_index(0)
    _views_and_timeline_on(qtbot, lab, 0)
    assert live.isEnabled()
    live.trigger()
    newest = lab.session.latest
    assert lab.session.shown is newest and timeline.follow.isChecked()
    _views_and_timeline_on(qtbot, lab, newest.step)
    assert not live.isEnabled()


def test_follow_on_the_live_timeline_holds_and_returns_with_the_views(
    qtbot,
    make_lab,  # noqa: F811 - fixture
):
    lab = _running(qtbot, make_lab, "safe")
    timeline = lab.recordings.timeline
    qtbot.waitUntil(lambda: timeline.readouts()["count"] >= 3, timeout=WAIT_MS)
    assert timeline.follow.isChecked()
    # Unticked: the step on screen stays, the run pauses, and Follow stays unticked after
    # the frame the run makes as it pauses (it was ticked again by the next frame).
    worker = lab.session.worker
    timeline.follow.click()
    qtbot.waitUntil(lambda: lab.session.state is RunState.PAUSED, timeout=WAIT_MS)
    # The frame the run makes as it pauses has arrived: the loop sits idle and the newest
    # step shown is the last it took.
    qtbot.waitUntil(
        lambda: worker.idle.is_set() and lab.session.latest.step == worker.steps_taken,
        timeout=WAIT_MS,
    )
    QApplication.processEvents()
    assert not timeline.follow.isChecked() and not timeline.readouts()["following"]
    assert lab.session.shown is lab.session.latest
    _views_and_timeline_on(qtbot, lab, lab.session.latest.step)
    # An older step chosen, then Follow ticked: the newest step is on screen again (the
    # cursor went there while the views stayed on the older step).
    timeline.select_index(0)
    _views_and_timeline_on(qtbot, lab, 0)
    timeline.follow.click()
    assert timeline.follow.isChecked()
    _views_and_timeline_on(qtbot, lab, lab.session.latest.step)
    # Going again follows the run.
    held = lab.session.latest.step
    lab.start()
    qtbot.waitUntil(lambda: lab.session.latest.step > held + 50, timeout=WAIT_MS)
    assert timeline.readouts()["following"] and timeline.follow.isChecked()


def test_a_lab_recording_opened_over_a_running_run_asks_first_and_no_keeps_the_run(
    qtbot,
    make_lab,  # noqa: F811 - fixture
    fit_recording,
):
    from gradviz.gui.pages.recordings.live_history import LIVE_RUN_LABEL
    from gradviz.gui.pages.recordings.opening import STOP_RUN_TITLE

    lab = _running(qtbot, make_lab, "safe")
    lab.answer = False
    assert lab.recordings.open(str(fit_recording))
    qtbot.waitUntil(lambda: bool(lab.questions), timeout=WAIT_MS)
    assert lab.questions == [STOP_RUN_TITLE]
    step = lab.session.latest.step
    qtbot.waitUntil(lambda: lab.session.latest.step > step, timeout=WAIT_MS)  # still going
    assert lab.session.state is RunState.RUNNING and lab.recordings.source is None
    assert lab.session.shown.generation >= 0  # the views show the live run
    # The declined recording was closed (its reading joined): whatever it had queued, its
    # last reading state included, is delivered by the next events.
    QApplication.processEvents()
    assert lab.recordings.timeline.state_label.text() == LIVE_RUN_LABEL

    lab.answer = True
    open_and_wait(qtbot, lab, fit_recording)
    assert lab.questions == [STOP_RUN_TITLE, STOP_RUN_TITLE]
    assert lab.session.state is RunState.STOPPED
    qtbot.waitUntil(lambda: lab.session.shown.generation < 0, timeout=WAIT_MS)

    # A live run started afterwards takes the views back; a re-read of the recording (as
    # a growing one is re-read) neither asks nor ends it (a long run, paused, so that it
    # is still going when the re-read comes).
    source_step = lab.session.shown  # the recording's step, until the live run draws
    lab.form.param("steps").setValue(100_000)
    lab.start()
    qtbot.waitUntil(lambda: lab.session.state is RunState.RUNNING, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: (lab.session.shown or source_step).generation >= 0, timeout=WAIT_MS)
    lab.pause()
    qtbot.waitUntil(lambda: lab.session.state is RunState.PAUSED, timeout=WAIT_MS)
    source = lab.recordings.source
    handled = []
    source.loaded.connect(handled.append)  # called after the recordings' own slot
    source.loaded.emit(source.data)  # same thread: handled before emit returns
    assert handled == [source.data]
    QApplication.processEvents()  # and nothing it queued (a question, a reset) changes that
    assert lab.session.state is RunState.PAUSED and lab.session.shown.generation >= 0
    assert lab.questions == [STOP_RUN_TITLE, STOP_RUN_TITLE]
