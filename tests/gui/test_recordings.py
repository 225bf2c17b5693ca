"""Recordings in the app: opening, the timeline, the Model health page, following a writer."""
# The shared fixtures are imported by name, which pyflakes reads as a redefinition:
# ruff: noqa: F811

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from fixtures_app import isolated_settings, lab, make_lab  # noqa: F401 - fixtures
from PySide6.QtCore import Qt
from recording_fixtures import (
    WriterThread,
    open_and_wait,
    run_writer,
    watch_small_model,
    write_fit_recording,
    write_recording,
)

from gradviz.core.common.health import Health
from gradviz.core.record import layout as L
from gradviz.core.record.reader import Reader

WAIT_MS = 60_000  # reading off the GUI thread on a busy machine: be generous


@pytest.fixture(scope="module")
def watch_recording(tmp_path_factory):
    """12 steps of a small watched model; the loss is NaN at step 7."""
    return write_recording(tmp_path_factory.mktemp("rec") / "run", steps=12, nan_at=7)


@pytest.fixture(scope="module", autouse=True)
def zarr_started(watch_recording):
    """zarr starts its own I/O threads on first use, for the life of the process: start
    them before the tests that check no thread of theirs is left behind. Its pool grows with
    the chunks one read fetches at once: read the array with the most (an image per step)."""
    import zarr

    Reader(watch_recording).rank(0).losses()
    zarr.open_group(watch_recording, mode="r")["rank0/images/hidden/data"][:]


@pytest.fixture(scope="module")
def fit_recording(tmp_path_factory):
    return write_fit_recording(tmp_path_factory.mktemp("fit") / "run", steps=8)


def test_a_watch_recording_opens_in_the_model_health_page(qtbot, lab, watch_recording):
    assert not lab.recordings.health_page.is_built  # made when first shown or used
    lab.window.pages.show_page(lab.recordings.page_index)
    page = lab.recordings.page
    # Empty, it shows no step cursor and its step axes no SI prefix ("step (x0.001)").
    plots = (page.health, page.loss)
    assert not any(p.cursor.isVisible() for p in plots)
    assert all("(x" not in p.axis.labelString() for p in plots)
    data = open_and_wait(qtbot, lab, watch_recording)
    assert all(p.cursor.isVisible() for p in plots)
    assert lab.window.pages.current() == lab.recordings.page_index
    assert page.health.tensors == ("0.weight", "0.bias", "2.weight", "2.bias", "hidden")
    worst = page.health.worst
    assert worst.shape == (5, 12)
    assert (worst[:, 7] == Health.NAN).all() and (worst[:, :7] == Health.FINITE).all()
    # The first non-finite gradient is one click away: timeline, histogram and image follow.
    assert "step 7" in page.first_bad.text()
    # Where it began (watch's module-level origin): the loss, made NaN outside every module,
    # which a recording's "" does not tell from the model's own code: the cause does.
    assert "began in the forward, no submodule" in page.first_bad.text()
    shown = page.origin.values()
    assert page.origin.isVisible() and shown["phase"] == "forward (step 7)"
    assert shown["module"].startswith("(none") and shown["op"] == "-"
    assert shown["cause"].startswith("The loss was NaN though every module's output was finite")
    qtbot.mouseClick(page.first_bad, Qt.MouseButton.LeftButton)
    assert page.timeline.step == 7
    hist = page.histogram.histogram
    assert hist[L.NAN_BIN] == 32 and hist.sum() == 32  # 0.weight: 8 x 4 entries, all NaN
    assert "NaN 32" in page.histogram.title.text()
    assert page.image_choice.currentText() == "hidden"
    assert page.images_box.isVisible()
    assert page.entry_health.counts()[Health.NAN] == 16 * 8
    assert data.complete and page.timeline.state_label.text() == "complete"
    # Without rec.tensor matrices there is no per-entry map, and so no legend saying "NaN 0"
    # beside a recording whose gradients are NaN.
    page.set_data(dataclasses.replace(data, images={}))
    assert not page.images_box.isVisible() and not page.entry_health.isVisible()


def test_the_origin_panel_shows_a_traced_origin_with_a_selectable_source_line(qtbot):
    from gradviz.gui.pages.recordings.origin_panel import OriginPanel

    panel = OriginPanel()
    qtbot.addWidget(panel)
    panel.show_origin(None)
    assert not panel.isVisibleTo(None)
    origin = {"phase": "backward", "module": "enc.attn", "op": "aten.div.Tensor",
              "source": "train.py:42", "cause": "sqrt at 0 in the backward.", "count": 6,
              "numel": 36, "indices": [[0, 0], [1, 1]]}  # fmt: skip
    panel.show_origin(origin)
    shown = panel.values()
    assert shown["module"] == "enc.attn" and shown["op"] == "aten.div.Tensor"
    assert shown["entries"] == "6 of 36; first (0, 0), (1, 1)"
    source = panel.fields["source"]
    source.selectAll()
    assert source.selectedText() == "train.py:42" and source.isReadOnly()
    # A cause of several sentences is there whole, scrolled to where the panel has no room.
    long_cause = " ".join(["log of 0 is -Inf (a domain edge, not an overflow)."] * 8)
    panel.show_origin({**origin, "cause": long_cause})
    panel.resize(300, 250)
    cause = panel.fields["cause"]
    qtbot.waitUntil(lambda: cause.verticalScrollBar().maximum() > 0)
    assert panel.values()["cause"] == long_cause and cause.isReadOnly()


def test_moving_the_slider_shows_that_steps_histogram(qtbot, lab, watch_recording):
    open_and_wait(qtbot, lab, watch_recording)
    page = lab.recordings.page
    page.select_cell(2, 0)  # 2.weight
    expected = Reader(watch_recording).rank(0).tensor("2.weight").histogram
    page.timeline.slider.setFocus()
    for index in (3, 4, 5):
        page.timeline.select_index(index - 1)
        qtbot.keyClick(page.timeline.slider, Qt.Key.Key_Right)  # arrow keys step
        assert page.timeline.index == index
        np.testing.assert_array_equal(page.histogram.histogram, expected[index])
    assert page.health.cursor.value() == 5.5 and page.loss.cursor.value() == 5.5


def test_hovering_a_cell_reads_its_numbers_and_clicking_shows_its_histogram(
    qtbot, lab, watch_recording
):
    from PySide6.QtCore import QPointF

    open_and_wait(qtbot, lab, watch_recording)
    page = lab.recordings.page
    health = page.health
    assert health.describe(0, 7).startswith("0.weight @ step 7: NaN")
    # The norm of a gradient holding NaN is NaN, as the Runs page draws it; the recorder's
    # norm of its finite entries (none here) is said as such.
    assert ", |grad| nan (finite entries 0" in health.describe(0, 7)
    assert health.describe(0, 3).split(", ")[1].startswith("|grad| ")
    assert "finite entries" not in health.describe(0, 3)
    vb = health.plot.getPlotItem().vb
    cell = health.plot.mapFromScene(vb.mapViewToScene(QPointF(3.5, 2.5)))  # 2.weight, step 3
    qtbot.mouseMove(health.plot.viewport(), cell)
    qtbot.waitUntil(lambda: health.readout.text().startswith("2.weight @ step 3"), timeout=WAIT_MS)
    qtbot.mouseClick(health.plot.viewport(), Qt.MouseButton.LeftButton, pos=cell)
    qtbot.waitUntil(lambda: page.timeline.index == 3, timeout=WAIT_MS)
    expected = Reader(watch_recording).rank(0).tensor("2.weight").histogram[3]
    np.testing.assert_array_equal(page.histogram.histogram, expected)
    assert page.histogram.title.text().startswith("2.weight @ step 3")


def test_a_fit_recording_opens_in_the_lab_views_and_the_slider_moves_them(
    qtbot, lab, fit_recording
):
    open_and_wait(qtbot, lab, fit_recording)
    stream = Reader(fit_recording).rank(0)
    timeline = lab.recordings.timeline
    assert lab.window.pages.current() == 0 and lab.recordings.dock.isVisible()
    assert len(stream.image_steps("distances")) == 8
    drawn = lab.views.views["distances"].widget
    for k in (0, 5, 2):
        timeline.select_index(k)
        step, distances = stream.image("distances", k)
        _, health = stream.image("entry_health", k)
        shown = lab.views.snapshot
        assert shown.step == step + 1
        np.testing.assert_array_equal(shown.distances, distances)
        np.testing.assert_array_equal(shown.entry_health, health)
        qtbot.waitUntil(lambda d=distances: _drawn_equals(drawn, d), timeout=WAIT_MS)


def _drawn_equals(widget, matrix) -> bool:
    image = widget.displayed_image()
    return image is not None and np.allclose(image, matrix, equal_nan=True)


def test_a_recording_being_written_is_followed(qtbot, lab, tmp_path):
    path = tmp_path / "live"
    gate = tmp_path / "go"
    writer = WriterThread(watch_small_model, path, 20, 0.12, -1, False, gate)
    try:
        qtbot.waitUntil(lambda: _recorded_steps(path) >= 2, timeout=WAIT_MS)
        page = lab.recordings.page
        lab.recordings.open(str(path))
        qtbot.waitUntil(lambda: page.data is not None, timeout=WAIT_MS)
        first = page.data.n_steps
        qtbot.waitUntil(lambda: page.timeline.state_label.text() == "following", timeout=WAIT_MS)
        gate.touch()  # the writer goes on only now that the page follows it
        qtbot.waitUntil(lambda: page.data.n_steps > first, timeout=WAIT_MS)  # new steps arrive
        assert page.timeline.following and page.timeline.index == page.data.n_steps - 1
        page.timeline.select_index(0)  # scrubbing back ends following
        assert not page.timeline.following
        qtbot.waitUntil(lambda: page.data.complete, timeout=WAIT_MS)
        assert page.data.n_steps == 20 and page.timeline.state_label.text() == "complete"
        assert page.timeline.index == 0  # not following: the selection stayed
    finally:
        gate.touch()
        writer.finish()


def _recorded_steps(path) -> int:
    from gradviz.core.record.reader import is_recording

    if not is_recording(path):
        return 0
    reader = Reader(path)  # the root group is written before rank 0's: it may have no rank yet
    return reader.rank(0).steps if 0 in reader.ranks else 0


def _as_a_killed_writer_leaves_it(path: Path) -> None:
    """The recording at ``path`` as a writer killed after its last step leaves it: every
    step on disk, never marked complete (what ``test_record_processes`` checks of SIGKILL)."""
    import zarr

    group = zarr.open_group(path / "rank0", mode="r+")
    meta = dict(group.attrs[L.MARKER])
    meta.update(complete=False, ended=None)
    group.attrs[L.MARKER] = meta


@pytest.mark.parametrize("writer", ["files left by a killed writer", pytest.param(
    "a writer process killed", marks=pytest.mark.slow)])  # fmt: skip
def test_a_recording_whose_writer_died_shows_as_incomplete(
    qtbot, lab, tmp_path, monkeypatch, writer
):
    from gradviz.gui.run import follower

    monkeypatch.setattr(follower, "STALL_S", 0.5)
    path = tmp_path / "died"
    if writer == "a writer process killed":
        process = run_writer(path, steps=5, delay_s=0.0, die=True)
        try:
            # Every logged step reaches the disk, the last one too, with no close().
            qtbot.waitUntil(lambda: _recorded_steps(path) == 5, timeout=WAIT_MS)
        finally:
            process.kill()  # killed with SIGKILL, never closed
            process.wait()
    else:
        write_recording(path, steps=5)
        _as_a_killed_writer_leaves_it(path)
    data = open_and_wait(qtbot, lab, path)
    assert not data.complete and data.n_steps == 5
    state = lab.recordings.page.timeline.state_label
    qtbot.waitUntil(lambda: state.text().startswith("incomplete"), timeout=WAIT_MS)
    assert lab.error_dialog is None


def test_a_directory_that_is_not_a_recording_is_named_in_one_sentence(qtbot, lab, tmp_path):
    assert not lab.recordings.open(str(tmp_path))
    assert "is not a gradviz recording" in lab.error_dialog.sentence


def test_the_runs_pages_add_button_also_names_a_directory_that_is_not_a_recording(
    qtbot, lab, tmp_path
):
    # The open runs inside the Runs page's signal: its error is still said.
    lab.error_dialog = None
    lab.recordings.choose_path = lambda: str(tmp_path)
    lab.runs.overlay.addRecordingRequested.emit()
    assert lab.error_dialog is not None
    assert "is not a gradviz recording" in lab.error_dialog.sentence


def test_the_timeline_plays_and_stops_at_the_end(qtbot):
    from gradviz.gui.widgets.timeline import Timeline

    timeline = Timeline()
    qtbot.addWidget(timeline)
    assert not timeline.play.isEnabled()  # nothing to play yet (an empty Model health page)
    timeline.set_steps(np.array([0]))
    assert not timeline.play.isEnabled()
    seen = []
    timeline.indexChanged.connect(seen.append)
    timeline.set_steps(np.arange(0, 50, 10))
    assert timeline.play.isEnabled()
    timeline.speed.setCurrentIndex(timeline.speed.count() - 1)  # fastest
    timeline.play.setChecked(True)
    qtbot.waitUntil(lambda: not timeline.play.isChecked(), timeout=WAIT_MS)
    assert timeline.step == 40 and seen[-5:] == [0, 1, 2, 3, 4]
    timeline.play.setChecked(True)
    timeline.set_steps(np.zeros(0, dtype=np.int64))  # a reset while playing: it stops
    assert not timeline.play.isChecked() and not timeline.play.isEnabled()


def test_health_colours_tell_the_categories_apart_and_norms_set_brightness():
    from gradviz.gui.pages.recordings.health_plots import health_rgba

    worst = np.array([[Health.FINITE, Health.FINITE, Health.ZERO, Health.NAN, Health.POS_INF]])
    norms = np.array([[1e-6, 1.0, 0.0, 0.0, 0.0]])
    rgba = health_rgba(worst.astype(np.uint8), norms).astype(int)
    colours = {tuple(c) for c in rgba[0, 1:]}
    assert len(colours) == 4  # finite, zero, NaN, +Inf: all different
    assert rgba[0, 0, :3].sum() < rgba[0, 1, :3].sum()  # a small norm is darker


def test_every_plot_exports_png_svg_and_csv_from_its_right_click_menu(
    qtbot, lab, watch_recording, tmp_path
):
    from PySide6.QtGui import QImage

    data = open_and_wait(qtbot, lab, watch_recording)
    written = []

    def choose(_parent, suffix):
        written.append(str(tmp_path / f"plot{len(written)}{suffix}"))
        return written[-1]

    lab.exports.choose_path = choose
    for name, actions in lab.exports.plot_actions.items():
        assert [a.text() for a in actions] == [
            "Export PNG…", "Export SVG…", "Export data as CSV…"
        ], name  # fmt: skip
        for action in actions:
            action.trigger()
        png, svg, csv = written[-3:]
        assert QImage(png).width() > 0, name
        assert "<svg" in Path(svg).read_text(encoding="utf-8"), name
        assert Path(csv).is_file(), name
    # The loss on the health page's step axis reads back as (column centre, loss) pairs,
    # every logged step's: the NaN loss of step 7 as "nan", and no column of its mark.
    csv = written[3 * list(lab.exports.plot_actions).index("step_loss") + 2]
    assert Path(csv).read_text().splitlines()[0] == "loss_x,loss_y"
    table = np.loadtxt(csv, delimiter=",", skiprows=1)
    assert np.isnan(data.losses[7])
    np.testing.assert_allclose(table[:, 1], data.losses, rtol=1e-9)  # NaN == NaN here
    np.testing.assert_allclose(table[:, 0], np.arange(data.n_steps) + 0.5)


def test_view_data_is_written_to_the_one_file_named_and_the_window_as_an_image(
    qtbot, lab, watch_recording, tmp_path
):
    from PySide6.QtGui import QImage

    data = open_and_wait(qtbot, lab, watch_recording)
    out = tmp_path / "out"
    out.mkdir()
    asked = []

    def choose(_parent, suffix, count):
        asked.append((suffix, count))
        return str(out / "view.npy")  # the user's name, whatever the dialog suggested

    lab.exports.choose_data_path = choose
    arrays = lab.recordings.arrays()  # Model health's, on screen
    assert len(arrays) > 1
    assert lab.exports.export_data() == str(out / "view.npy")
    assert asked == [(".npz", len(arrays))]  # the dialog offers one archive of them all
    assert sorted(p.name for p in out.iterdir()) == ["view.npy"]  # that file, and only it
    with np.load(out / "view.npy") as archive:
        assert sorted(archive.files) == sorted(arrays)
        np.testing.assert_array_equal(archive["grad_norm"], data.grad_norm)
        np.testing.assert_array_equal(archive["histograms"], data.histograms)
    said = lab.window.statusBar().currentMessage()
    assert str(out / "view.npy") in said and f"{len(arrays)} arrays" in said
    lab.exports.choose_path = lambda _parent, suffix: str(out / f"window{suffix}")
    lab.exports.save_image_action.trigger()
    image = QImage(str(out / "window.png"))
    assert (image.width(), image.height()) == (lab.window.width(), lab.window.height())


def test_view_data_of_one_array_is_an_npy_file_and_of_several_an_npz_under_the_name_given(
    tmp_path,
):
    from gradviz.gui.shell.view_export import save_view_data

    loss = np.array([1.0, np.nan, 0.5])
    save_view_data(str(tmp_path / "loss.npy"), {"loss": loss})
    np.testing.assert_array_equal(np.load(tmp_path / "loss.npy"), loss)
    both = {"loss": loss, "codes": np.arange(6, dtype=np.uint8).reshape(2, 3)}
    said = save_view_data(str(tmp_path / "both.data"), both)  # no suffix added or changed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["both.data", "loss.npy"]
    with np.load(tmp_path / "both.data") as archive:
        assert archive.files == ["loss", "codes"]
        np.testing.assert_array_equal(archive["loss"], loss)
        np.testing.assert_array_equal(archive["codes"], both["codes"])
    assert said.startswith("Wrote 2 arrays to") and "loss, codes" in said


def _gui(tmp_path, *args):
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(repo), QT_QPA_PLATFORM="offscreen",
               GRADVIZ_SETTINGS_FILE=str(tmp_path / "s.ini"))  # fmt: skip
    return subprocess.run([sys.executable, "-m", "gradviz", "gui", *args], capture_output=True,
                          text=True, env=env, timeout=300, cwd=repo)  # fmt: skip


def test_gui_recording_screenshot_saves_the_model_health_page(tmp_path, watch_recording):
    from PySide6.QtGui import QImage

    shot = tmp_path / "shot.png"
    proc = _gui(tmp_path, str(watch_recording), "--screenshot", str(shot),
                "--window-size", "1024x700", "--run-for", "0.2")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # One line a script can read: the file, its size, the page shown and the status bar.
    (line,) = [t for t in proc.stdout.splitlines() if t.startswith("saved ")]
    assert line.startswith(f"saved {shot} (1024x700); ")
    assert "; page Model health; status: " in line
    image = QImage(str(shot))
    assert (image.width(), image.height()) == (1024, 700)
    # The page's yellow NaN columns are on the picture (the heatmap was read and drawn).
    row = [image.pixelColor(x, image.height() // 3) for x in range(image.width())]
    assert any(c.red() > 200 and c.green() > 200 and c.blue() < 120 for c in row)


def test_gui_with_a_directory_that_is_not_a_recording_exits_2(tmp_path):
    proc = _gui(tmp_path, str(tmp_path))
    assert proc.returncode == 2
    assert "is not a gradviz recording" in proc.stderr and "Traceback" not in proc.stderr


def test_several_runs_overlay_on_one_plot_with_legend_toggles_and_log_axis(
    qtbot, lab, watch_recording, fit_recording
):
    overlay = lab.runs.overlay
    open_and_wait(qtbot, lab, watch_recording)
    open_and_wait(qtbot, lab, fit_recording)
    assert list(overlay.runs) == [str(watch_recording), str(fit_recording)]
    qtbot.waitUntil(lambda: all(r.series is not None for r in overlay.runs.values()))
    assert [label.text for _, label in overlay.legend.items] == list(overlay.runs)
    overlay.smoothing.setValue(0)  # the raw values
    stream = Reader(fit_recording).rank(0)
    x, y = overlay.runs[str(fit_recording)].curve.getData()
    loss = stream.scalar("loss")
    np.testing.assert_array_equal(x, loss.steps)
    np.testing.assert_allclose(10**y, loss.values)  # log axis: the curve holds log10
    # Total gradient norm: the L2 norm over every watched tensor.
    overlay.quantity.setCurrentIndex(overlay.quantity.findData("grad_norm:"))
    overlay.log_y.setChecked(False)
    norms = [stream.tensor(t).grad_norm for t in stream.tensors]
    _, y = overlay.runs[str(fit_recording)].curve.getData()
    np.testing.assert_allclose(y, np.sqrt(np.sum(np.square(norms), axis=0)))
    overlay.list.item(0).setCheckState(Qt.CheckState.Unchecked)  # toggled off
    assert overlay.visible_runs() == [str(fit_recording)]


def test_the_live_history_is_thinned_like_a_recording_and_bounded(make_snapshot):
    import dataclasses

    from gradviz.gui.pages.recordings.live_history import LiveHistory, snapshot_bytes

    base = make_snapshot(n=16)
    history = LiveHistory(max_snapshots=8, budget_bytes=10 * snapshot_bytes(base))
    for step in range(100):
        history.add(dataclasses.replace(base, step=step))
    assert len(history.snapshots) <= 8 and history.interval == 16
    steps = history.steps()
    assert steps[0] == 0 and (np.diff(steps) == 16).all()  # evenly thinned, whole run
    small = LiveHistory(max_snapshots=200, budget_bytes=3 * snapshot_bytes(base))
    for step in range(50):
        small.add(dataclasses.replace(base, step=step))
    assert len(small.snapshots) <= 3  # the byte budget bounds it too
    assert not history.add(dataclasses.replace(base, step=5))  # older: not kept


def test_the_live_runs_history_is_on_the_timeline_and_scrubbing_back_shows_it(qtbot, make_lab):  # noqa: F811
    from fixtures_app import RUN_TIMEOUT_MS, small

    from gradviz.gui.run.session import RunState

    controller = make_lab(small(steps=60))
    timeline = controller.recordings.timeline
    controller.start()
    qtbot.waitUntil(lambda: controller.session.state is RunState.FINISHED, timeout=RUN_TIMEOUT_MS)
    assert controller.recordings.dock.isVisible() and timeline.following
    qtbot.waitUntil(lambda: timeline.step == 60, timeout=RUN_TIMEOUT_MS)
    kept = controller.recordings.live.history.snapshots
    timeline.select_index(1)  # scrub back
    assert not timeline.following
    assert controller.views.snapshot is kept[1] and kept[1].step < 60


def test_recorded_points_are_placed_with_the_recorded_distances():
    """Classical MDS by subspace iteration against the exact distances of 3-D points
    (float64 reference: the pairwise distances of the points it was given)."""
    from gradviz.core.lab.mds import classical_mds_of_distances as classical_mds

    points = np.random.default_rng(3).standard_normal((120, 3)) * [3.0, 2.0, 1.0]
    distances = np.sqrt(((points[:, None] - points[None]) ** 2).sum(-1))
    placed = classical_mds(distances, 3).astype(np.float64)
    again = np.sqrt(((placed[:, None] - placed[None]) ** 2).sum(-1))
    np.testing.assert_allclose(again, distances, atol=1e-3)


def test_open_recording_recent_and_drop_all_open_it(qtbot, lab, watch_recording):
    recordings = lab.recordings
    shown = []
    recordings.shown.connect(shown.append)
    recordings.choose_path = lambda: str(watch_recording)
    assert recordings.open_action in lab.window.menuBar().actions()[0].menu().actions()
    recordings.open_action.trigger()  # File > Open recording…
    qtbot.waitUntil(lambda: len(shown) == 1, timeout=WAIT_MS)
    recent = recordings.recent_menu.actions()
    assert [a.text() for a in recent] == [str(watch_recording.resolve())]
    recent[0].trigger()  # File > Recent recordings
    qtbot.waitUntil(lambda: len(shown) == 2, timeout=WAIT_MS)
    lab.window.fileDropped.emit(str(watch_recording))  # dropped on the window
    qtbot.waitUntil(lambda: len(shown) == 3, timeout=WAIT_MS)
    assert lab.error_dialog is None  # the model opener left the directory alone


def test_the_rank_selector_shows_another_ranks_stream(qtbot, lab, watch_recording, tmp_path):
    import shutil

    from gradviz.core.record.writer import RankWriter

    path = tmp_path / "two-ranks"
    shutil.copytree(watch_recording, path)
    writer = RankWriter(path, source="watch", tensors=["w"], rank=1, world_size=2)
    for step in range(3):
        rows = np.zeros((1, L.ROW_WIDTH))
        rows[0, len(L.STAT_COLUMNS) + (L.NAN_BIN if step == 2 else L.ZERO_BIN)] = 4
        writer.append(step, 1.0, rows)
    writer.close()
    open_and_wait(qtbot, lab, path)
    page = lab.recordings.page
    assert page.rank.isEnabled() and page.rank.count() == 2
    page.rank.setCurrentIndex(1)
    page.rank.activated.emit(1)  # as a choice in the box does
    qtbot.waitUntil(lambda: page.data.rank == 1, timeout=WAIT_MS)
    assert page.health.tensors == ("w",)
    assert list(page.health.worst[0]) == [Health.ZERO, Health.ZERO, Health.NAN]


def test_record_runs_writes_the_lab_run_as_a_recording_that_opens(
    qtbot,
    make_lab,  # noqa: F811
    tmp_path,
):
    from fixtures_app import RUN_TIMEOUT_MS, small

    from gradviz.gui.run.session import RunState

    controller = make_lab(small(steps=30))
    record = controller.lab.record
    record.choose_folder = lambda: str(tmp_path)
    record.action.setChecked(True)  # Run > Record runs…
    controller.reset()  # the next run is recorded
    controller.start()
    qtbot.waitUntil(lambda: controller.session.state is RunState.FINISHED, timeout=RUN_TIMEOUT_MS)
    assert len(record.made) == 1
    qtbot.waitUntil(lambda: Reader(record.made[0]).rank(0).complete, timeout=RUN_TIMEOUT_MS)
    stream = Reader(record.made[0]).rank(0)
    assert stream.meta["source"] == "fit" and stream.steps == 30
    latest = controller.session.latest
    np.testing.assert_allclose(stream.losses(), latest.loss_history)  # the run's own losses
    open_and_wait(qtbot, controller, record.made[0])
    assert controller.recordings.timeline.step == 29  # the last recorded matrices


def test_the_health_over_time_example_goes_bad_as_its_docstring_says(tmp_path, monkeypatch):
    import importlib.util
    import sys

    example = Path(__file__).resolve().parents[2] / "resources/examples/health_over_time.py"
    spec = importlib.util.spec_from_file_location("health_over_time", example)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", ["health_over_time.py", str(tmp_path / "run")])
    module.main()
    stream = Reader(tmp_path / "run").rank(0)
    assert stream.complete and stream.steps == 80 and "hidden" in stream.image_names()
    first = stream.first_nonfinite
    assert first is not None and 10 < first["step"] < 80  # finite for a while, then not
    counts = np.stack([stream.tensor(t).counts for t in stream.tensors])
    assert counts[:, : first["step"], 2:].sum() == 0  # nothing non-finite before it
    assert counts[:, :, 3:].sum() > 0  # Inf on the way


def test_a_recording_with_unreadable_array_metadata_opens_and_names_the_damage(
    qtbot, lab, watch_recording, tmp_path
):
    import shutil

    path = tmp_path / "damaged"
    shutil.copytree(watch_recording, path)
    (path / "rank0" / "stats" / "zarr.json").write_text("{not json", encoding="utf-8")
    data = open_and_wait(qtbot, lab, path)
    assert data.missing_cells().all() and not data.complete
    page = lab.recordings.page
    assert page.damage_label.isVisible()
    assert page.damage_label.text() == "Damaged recording: rank 0 stats: steps 0-11 lost"
    assert page.timeline.state_label.text() == "damaged: steps 0-11 lost"
    assert lab.error_dialog is None


def test_another_recording_is_another_run_and_its_target_is_placed_once(
    qtbot, fit_recording, monkeypatch
):
    import dataclasses

    from gradviz.core.record.reader import Reader
    from gradviz.core.record.recording_data import read_recording
    from gradviz.gui.run import recorded_run

    data = read_recording(Reader(fit_recording))
    run = recorded_run.RecordedRun()
    placed = []
    real = recorded_run.target_of
    monkeypatch.setattr(recorded_run, "target_of", lambda *a: placed.append(1) or real(*a))
    run.set_data(data)
    run.show_index(0)
    first = run.shown
    run.set_data(read_recording(Reader(fit_recording)))  # followed: the same recording again
    run.show_index(1)
    assert run.shown.generation == first.generation
    assert run.shown.target_coords is first.target_coords and len(placed) == 1
    other = dataclasses.replace(data.summary, path=data.path + "-other")
    run.set_data(dataclasses.replace(data, summary=other))
    run.show_index(0)
    assert run.shown.generation != first.generation  # the views start afresh
    assert len(placed) == 2


def test_model_health_step_ticks_stand_under_the_cursor_and_the_loss_of_their_step(qtbot):
    """With ``every=5`` the loss curve and the cursor sat half an interval right of the tick
    of their step: ticks stood at the columns' left edges, values at their centres."""
    import numpy as np

    from gradviz.gui.pages.recordings.health_plots import StepLoss

    loss = StepLoss()
    qtbot.addWidget(loss)
    loss.resize(500, 200)
    loss.show()
    qtbot.waitExposed(loss)
    steps = np.arange(0, 50, 5)
    loss.set_data(steps, np.linspace(1.0, 0.1, len(steps)))
    loss.plot.setXRange(0, len(steps), padding=0)
    loss.set_cursor(3)  # step 15
    ticks = dict((label, x) for x, label in loss.axis.tick_positions())
    assert ticks, "no step ticks drawn"
    readouts = loss.readouts()
    assert readouts["cursor_step"] == "15"
    assert readouts["point_steps"] == [str(s) for s in steps]
    x, _ = loss.curve.getData()
    for k, step in enumerate(steps):
        if str(step) in ticks:
            assert ticks[str(step)] == x[k]  # the tick of step s stands at its loss point
    if "15" in ticks:
        assert ticks["15"] == loss.cursor.value()


def test_scrubbing_back_from_a_growing_recording_no_longer_reads_following(qtbot):
    """After scrubbing back, the timeline still said "following" while it stayed put."""
    import numpy as np

    from gradviz.gui.widgets.timeline import NOT_FOLLOWING, Timeline

    timeline = Timeline()
    qtbot.addWidget(timeline)
    timeline.set_following(True)
    timeline.set_state_text("following", growing=True)
    timeline.set_steps(np.arange(10))
    assert timeline.readouts()["state"] == "following" and timeline.step == 9
    timeline.select_index(3)
    assert not timeline.following
    assert timeline.readouts()["state"] == NOT_FOLLOWING
    timeline.set_following(True)  # the Follow button: the newest step again
    assert timeline.readouts()["state"] == "following" and timeline.step == 9
    timeline.set_state_text("complete")  # the writer finished
    timeline.select_index(0)
    assert timeline.readouts()["state"] == "complete"


def log_scalars_between_steps(path, gates) -> None:
    """Gradients at step 0 only, the loss and a learning rate at every step; step k waits
    for the file ``gates/k`` (however busy the machine is), ``gates/stop`` closes."""
    import time

    import torch

    import gradviz

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    x = torch.randn(8, 3)
    rec = gradviz.watch(model, path, every=1000)
    for step in range(1000):
        while not (gates / str(step)).exists():
            if (gates / "stop").exists():
                rec.close()
                return
            time.sleep(0.02)
        model.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        rec.log(loss=loss, lr=0.1)  # scalars at every step, between recorded steps


def test_a_writer_logging_scalars_between_recorded_steps_is_still_writing(
    qtbot, lab, tmp_path, monkeypatch
):
    import types

    from gradviz.gui.run import follower

    # The follower's clock is the test's: each scalar arrives 0.6 STALL_S after the last,
    # so a follower that counts recorded steps only finds the writer stalled.
    clock = [0.0]
    monkeypatch.setattr(follower, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    path, gates = tmp_path / "scalars", tmp_path / "gates"
    gates.mkdir()
    (gates / "0").touch()
    writer = WriterThread(log_scalars_between_steps, path, gates)
    try:
        qtbot.waitUntil(lambda: _logged_scalars(path) == 1, timeout=WAIT_MS)
        open_and_wait(qtbot, lab, path)
        source, state = lab.recordings.source, lab.recordings.page.timeline.state_label
        qtbot.waitUntil(lambda: state.text() == "following", timeout=WAIT_MS)
        seen = []
        source.stateChanged.connect(lambda s: seen.append(s.label))

        def logged() -> int:  # lr values the follower has read
            return source.data.meta.get("scalars", {}).get("lr", {}).get("count", 0)

        for step in range(1, 5):
            (gates / str(step)).touch()
            qtbot.waitUntil(lambda n=step: logged() == n + 1, timeout=WAIT_MS)
            assert state.text() == "following", f"after the scalars of step {step}"
            clock[0] += 0.6 * follower.STALL_S
        assert source.data.n_steps == 1  # the recorded steps did not grow: the scalars did
        assert "incomplete (writer stopped)" not in seen
        (gates / "stop").touch()
        qtbot.waitUntil(lambda: state.text() == "complete", timeout=WAIT_MS)
    finally:
        (gates / "stop").touch()
        writer.finish()


def _logged_scalars(path) -> int:
    from gradviz.core.record.reader import is_recording

    if not is_recording(path):
        return 0
    stream = Reader(path).rank(0)
    return len(stream.scalar("lr").values) if "lr" in stream.scalar_names() else 0


def test_a_recording_that_could_not_say_where_its_nan_began_says_so(qtbot, lab, tmp_path):
    # A forward drawing noise from a generator that is not the model's is not the same when
    # replayed: the watch names no origin and keeps why; the page says it is not known, and
    # why, instead of nothing.
    import torch
    from torch import nn

    import gradviz

    noise = torch.Generator()  # not the model's own: the watch cannot see it drawn from

    class Noisy(nn.Module):
        """Noise, then (from step 2) sqrt at 0 in the backward: 0 x Inf."""

        def __init__(self):
            super().__init__()
            self.lin, self.kink = nn.Linear(3, 3), False

        def forward(self, x):
            y = self.lin(x) + torch.rand(x.shape, generator=noise)
            return y + torch.sqrt((y - y.detach()).square()) if self.kink else y

    torch.manual_seed(0)
    model = nn.Sequential(Noisy(), nn.Linear(3, 1))
    with gradviz.watch(model, tmp_path / "run") as rec:
        for step in range(3):
            model[0].kink = step == 2  # set between the steps: not a change of the forward's
            model(torch.randn(4, 3)).sum().backward()
            rec.log()
    lab.window.pages.show_page(lab.recordings.page_index)
    open_and_wait(qtbot, lab, tmp_path / "run")
    page = lab.recordings.page
    assert "step 2" in page.first_bad.text()
    assert page.first_bad.text().endswith(" · where it began is not known")
    assert "could not be run again" in page.first_bad.toolTip()
    assert not page.origin.isVisible()


def test_a_step_axis_whose_interval_changes_says_its_columns_are_not_to_scale(qtbot, lab, tmp_path):
    """watch(every=10) records every step once the gradients go NaN (step 153): 16 columns
    for steps 0-150 and 3 for 151-155, under an axis that read "step" as if to scale."""
    import torch

    from gradviz.core.record.recorder import watch

    path = tmp_path / "run"
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        x = torch.randn(8, 3)
        with watch(model, path, every=10) as rec:
            for step in range(156):
                model.zero_grad()
                loss = model(x).pow(2).mean() * (float("nan") if step == 153 else 1.0)
                loss.backward()
                rec.log(loss=loss)
                with torch.no_grad():
                    for p in model.parameters():
                        p -= 0.01 * p.grad
    open_and_wait(qtbot, lab, path)
    page = lab.recordings.page
    health, loss = page.health.readouts(), page.loss.readouts()
    label = (
        "recorded step, one column each: not to scale (every 10 steps to step 150, "
        "then every 3 steps to step 153, then every step to step 155)"
    )
    assert health["axis_label"] == loss["axis_label"] == label
    # The x of a step is its column's: step 150 is the 16th column, step 153 the 17th.
    axis = page.health.axis
    assert axis.x_of_step(150) == 15.5 and axis.x_of_step(153) == 16.5
    assert axis.x_of_step(151) is None  # not recorded: no column
    assert axis.step_of(16.5) == "153" and page.loss.axis.step_of(16.5) == "153"
    # A recording at one interval is to scale: its axis is labelled "step".
    even = tmp_path / "even"
    write_recording(even, steps=12)
    open_and_wait(qtbot, lab, even)
    assert page.health.readouts()["axis_label"] == page.loss.readouts()["axis_label"] == "step"


def test_a_step_axis_label_counts_the_interval_changes_it_does_not_name():
    from gradviz.gui.pages.recordings.health_plots import step_axis_label

    assert step_axis_label(np.array([0, 5, 10])) == step_axis_label(np.array([7])) == "step"
    assert step_axis_label(np.array([0, 1, 3, 6, 10, 15])) == (
        "recorded step, one column each: not to scale "
        "(the interval between recorded steps changes 4 times)"
    )
