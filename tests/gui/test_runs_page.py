"""The Runs page: any scalar of several runs, followed as they grow, by step or time,
smoothed as TensorBoard does, NaN and Inf marked at the edge, and read back as data."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from fixtures_app import isolated_settings, make_lab  # noqa: F401 - fixtures
from recording_fixtures import WriterThread, watch_small_model

from gradviz.core.record import layout as L
from gradviz.core.record.reader import Reader, is_recording
from gradviz.core.record.run_series import GRAD_NORM_ALL, debiased_ema, scalar_key
from gradviz.core.record.writer import RankWriter
from gradviz.gui.widgets.plot_export import export_plot

WAIT_MS = 60_000


def write_scalars_recording(path: Path) -> Path:
    """10 logged steps of a watched Linear(3, 1) (gradients every 2nd): loss NaN from step 6
    on, accuracy NaN, +Inf and -Inf at steps 3, 4, 5; an lr halving every step. Written in
    this process (a fresh interpreter paid 5-8 s of torch import), the global RNG restored."""
    import torch

    import gradviz

    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        x = torch.randn(8, 3)
        with gradviz.watch(model, path, every=2) as rec:
            for step in range(10):
                model.zero_grad()
                loss = model(x).pow(2).mean()
                if step >= 6:
                    loss = loss * float("nan")  # NaN gradients and loss from step 6 on
                loss.backward()
                accuracy = {3: math.nan, 4: math.inf, 5: -math.inf}.get(step, 0.1 * step + 0.05)
                rec.log(loss=loss, lr=0.1 * 0.5**step, accuracy=accuracy)
    return path


@pytest.fixture(scope="module")
def scalars_recording(tmp_path_factory):
    """10 logged steps (gradients every 2nd): loss NaN at step 6, accuracy NaN, +Inf and
    -Inf at steps 3, 4, 5; an lr halving every step."""
    return write_scalars_recording(tmp_path_factory.mktemp("runs") / "scalars")


@pytest.fixture(scope="module")
def old_recording(tmp_path_factory):
    """A recording written before scalars and wall times were recorded: losses only, from
    1e18 down to 1e-19 (a log axis must not rescale them)."""
    path = tmp_path_factory.mktemp("runs") / "old"
    writer = RankWriter(path, source="watch", tensors=["w"])
    rows = np.zeros((1, L.ROW_WIDTH))
    writer.append_many([(s, 10.0 ** (18 - s), rows, None, None) for s in range(38)])
    del writer.meta["scalars"]
    writer.close()
    return path


@pytest.fixture(scope="module", autouse=True)
def zarr_started(scalars_recording, old_recording):
    """zarr starts its I/O threads on first use, for the life of the process: start them
    before the tests that check no thread of theirs is left behind (as the page reads)."""
    import zarr

    from gradviz.core.record.run_series import read_runs

    for path in (scalars_recording, old_recording):
        read_runs(Reader(path))
    # Its pool grows with the chunks one read fetches at once (a recording's images).
    many = zarr.create_array(
        scalars_recording.parent / "chunks", shape=(64,), chunks=(1,), dtype="f8"
    )
    many[:] = 1.0
    assert many[:].sum() == 64


@pytest.fixture
def page(show_widget):
    from gradviz.gui.pages.runs.overlay import RunsOverlay

    return show_widget(RunsOverlay(), 900, 500)


def add_and_wait(qtbot, page, path, until=lambda run: run.state == "complete"):
    run = page.add_recording(str(path))
    qtbot.waitUntil(lambda: run.series is not None and until(run), timeout=WAIT_MS)
    return run


def pick(page, key: str) -> None:
    index = page.quantity.findData(key)
    assert index >= 0, f"{key} not offered"
    page.quantity.setCurrentIndex(index)


def test_any_scalar_or_gradient_norm_of_every_run_is_drawn_and_read_back(
    qtbot, page, scalars_recording, old_recording
):
    add_and_wait(qtbot, page, scalars_recording)
    add_and_wait(qtbot, page, old_recording)
    page.smoothing.setValue(0)
    page.log_y.setChecked(False)
    stream = Reader(scalars_recording).rank(0)
    lr = stream.scalar("lr")
    pick(page, scalar_key("lr"))
    x, y = page.runs[str(scalars_recording)].curve.getOriginalDataset()
    np.testing.assert_array_equal(x, lr.steps)
    np.testing.assert_array_equal(y, lr.values)
    # The old recording has no lr: said, not drawn.
    assert f"{old_recording}: has no lr" in page.note.text()
    assert page.readouts()["runs"][1]["points"] == 0
    # One tensor's gradient norm: NaN where its gradient held a NaN (steps 6 and 8).
    pick(page, "grad_norm:weight")
    weight = stream.tensor("weight")
    _, _, raw, _ = page.runs[str(scalars_recording)].drawn
    expected = np.where(weight.counts[:, 2] > 0, np.nan, weight.grad_norm)
    np.testing.assert_array_equal(raw, expected)
    assert np.isnan(raw[-2:]).all() and np.isfinite(raw[:3]).all()
    # readouts() says what is drawn, in the Reader's numbers.
    pick(page, scalar_key("accuracy"))
    accuracy = stream.scalar("accuracy")
    (first, old) = page.readouts()["runs"]
    assert first["name"] == str(scalars_recording) and first["source"] == "watch"
    assert first["scalar"] == "accuracy" and first["x_axis"] == "step"
    assert first["points"] == len(accuracy.values) == 10
    assert first["last_step"] == int(accuracy.steps[-1]) == 9
    assert first["last_value"] == pytest.approx(accuracy.values[-1])
    assert first["nonfinite"] == int(np.count_nonzero(~np.isfinite(accuracy.values))) == 3
    assert first["smoothing"] == 0.0 and first["state"] == "complete"
    pick(page, scalar_key("loss"))
    first = page.readouts()["runs"][0]
    assert first["last_value"] is None  # NaN is None, never a number
    assert first["nonfinite"] == 4  # steps 6-9
    assert page.readouts()["runs"][1]["points"] == 38


def test_nan_and_inf_are_marks_at_the_edge_and_the_hover_readout_names_every_run(
    qtbot, page, scalars_recording, old_recording
):
    add_and_wait(qtbot, page, scalars_recording)
    add_and_wait(qtbot, page, old_recording)
    pick(page, scalar_key("accuracy"))
    page.log_y.setChecked(False)
    marks = page.runs[str(scalars_recording)].marks
    assert marks.counts() == {"nan": 1, "+inf": 1, "-inf": 1}
    (_, _), (y0, y1) = page.plot.getPlotItem().getViewBox().viewRange()
    for kind, step, edge in (("nan", 3, y1), ("+inf", 4, y1), ("-inf", 5, y0)):
        x, y = marks.positions(kind)
        assert x.tolist() == [step] and abs(y[0] - edge) < 0.1 * (y1 - y0)
    assert marks.items["nan"].opts["symbol"] != marks.items["+inf"].opts["symbol"]
    # The hover readout at step 3 lists both runs; the NaN says nan.
    pick(page, scalar_key("loss"))
    text = page.hover_text(6.0)
    assert f"{scalars_recording}: step 6 = nan" in text
    assert f"{old_recording}: step 6 = 1e+12 (smoothed " in text  # both, as TensorBoard
    # A log axis over 1e18 ... 1e-19: no SI prefix, ticks as powers of ten.
    page.log_y.setChecked(True)
    axis = page.plot.getPlotItem().getAxis("left")
    assert "x1e" not in axis.labelString() and axis.autoSIPrefixScale == 1.0
    assert axis.tickStrings([-19.0, 0.0, 18.0], axis.autoSIPrefixScale, 1.0) == [
        "10⁻¹⁹",
        "1",
        "10¹⁸",
    ]


def test_smoothing_is_tensorboards_debiased_ema_with_the_raw_curve_faint_behind(
    qtbot, page, scalars_recording
):
    values = np.array([1.0, 3.0, math.nan, 2.0, math.inf, 5.0])
    w = 0.7
    # Independent float64 reference: the weighted mean of the finite values so far.
    finite = [v for v in values if math.isfinite(v)]
    reference, k = [], 0
    for v in values:
        if not math.isfinite(v):
            reference.append(v)
            continue
        k += 1
        weights = [(1 - w) * w ** (k - 1 - i) for i in range(k)]
        reference.append(sum(a * b for a, b in zip(weights, finite[:k])) / sum(weights))
    np.testing.assert_allclose(debiased_ema(values, w), reference, rtol=1e-12)
    assert debiased_ema(values, 0.0).tolist()[:2] == [1.0, 3.0]
    add_and_wait(qtbot, page, scalars_recording)
    page.log_y.setChecked(False)
    pick(page, scalar_key("lr"))
    page.smoothing.setValue(90)
    run = page.runs[str(scalars_recording)]
    lr = Reader(scalars_recording).rank(0).scalar("lr").values
    np.testing.assert_allclose(run.curve.getOriginalDataset()[1], debiased_ema(lr, 0.9))
    np.testing.assert_array_equal(run.raw.getOriginalDataset()[1], lr)
    assert run.raw.isVisible() and run.raw.opts["pen"].color().alpha() < 128
    assert page.readouts()["runs"][0]["smoothing"] == 0.9


def test_x_by_wall_or_relative_time_and_an_older_recording_says_step_only(
    qtbot, page, scalars_recording, old_recording
):
    add_and_wait(qtbot, page, scalars_recording)
    add_and_wait(qtbot, page, old_recording)
    page.smoothing.setValue(0)
    times = Reader(scalars_recording).rank(0).wall_times()
    page.x_axis.setCurrentIndex(page.x_axis.findData("relative"))
    x, _ = page.runs[str(scalars_recording)].curve.getOriginalDataset()
    np.testing.assert_allclose(x, times.values - times.values[0])
    page.x_axis.setCurrentIndex(page.x_axis.findData("wall"))
    x, _ = page.runs[str(scalars_recording)].curve.getOriginalDataset()
    np.testing.assert_allclose(x, times.values)
    assert page.time_axis.tickStrings([times.values[0]], 1.0, 1.0)[0].count(":") == 2
    # The old recording has no wall times: not drawn over time, and the page says so.
    assert len(page.runs[str(old_recording)].curve.getOriginalDataset()[0] or []) == 0
    assert f"{old_recording}: step only: recorded without wall times" in page.note.text()
    assert page.readouts()["runs"][0]["x_axis"] == "wall"


def test_a_recording_being_written_grows_and_csv_writes_what_is_drawn(qtbot, page, tmp_path):
    path, gate = tmp_path / "growing", tmp_path / "go"
    writer = WriterThread(watch_small_model, path, 12, 0.0, 7, False, gate)
    try:
        qtbot.waitUntil(lambda: is_recording(path), timeout=WAIT_MS)
        run = add_and_wait(qtbot, page, path, until=lambda r: len(r.drawn[0]) >= 2)
        assert run.state in ("following", "incomplete (writer stopped)")
        page.smoothing.setValue(0)
        page.write_csv(str(tmp_path / "early.csv"))
        gate.touch()  # the writer goes on: the page follows
        qtbot.waitUntil(
            lambda: run.state == "complete" and len(run.drawn[0]) == 12, timeout=WAIT_MS
        )
    finally:
        gate.touch()
        writer.finish()
    assert page.readouts()["runs"][0]["last_step"] == 11
    with open(tmp_path / "early.csv") as f:
        assert 2 <= len(list(csv.reader(f))) - 1 < 12  # what was drawn then
    export_plot(page.plot, str(tmp_path / "now.csv"))  # the plot's Export data as CSV…
    with open(tmp_path / "now.csv") as f:
        header, *rows = list(csv.reader(f))
    assert header == ["run", "step", "step", "loss", "smoothed"]
    assert [int(r[1]) for r in rows] == list(range(12))
    assert rows[7][3] == "nan" and rows[7][4] == "nan"  # written as such, not dropped
    loss = Reader(path).rank(0).scalar("loss").values
    np.testing.assert_array_equal([float(r[3]) for r in rows], loss)
    np.testing.assert_array_equal(page.arrays()["run0.values"], loss)  # File > Export view data


def test_the_live_run_grows_with_the_run_at_the_lab_loss_plots_steps(qtbot, make_lab):  # noqa: F811
    from fixtures_app import RUN_TIMEOUT_MS, small

    from gradviz.gui.run.session import RunState

    controller = make_lab(small(steps=40))
    runs = controller.runs
    runs.add_live_run()  # at step 0, before the run goes
    (run,) = runs.overlay.runs.values()
    runs.overlay.smoothing.setValue(0)
    controller.start()
    qtbot.waitUntil(lambda: controller.session.state is RunState.FINISHED, timeout=RUN_TIMEOUT_MS)
    qtbot.waitUntil(lambda: len(run.drawn[0]) == 40, timeout=RUN_TIMEOUT_MS)
    np.testing.assert_array_equal(run.drawn[0], np.arange(40))
    lab_x, lab_y = controller.views.views["loss"].widget.curve.getOriginalDataset()
    x, y = run.curve.getOriginalDataset()
    np.testing.assert_array_equal(x, lab_x)  # the same steps as the lab's loss plot
    np.testing.assert_allclose(y, lab_y)
    readout = runs.overlay.readouts()["runs"][0]
    assert readout["source"] == "live" and readout["last_step"] == 39
    # Its gradient norm too, step k's from step k's own backward pass: the numbers of the
    # same settings run outside the app (as `gradviz fit --record` records them).
    from gradviz.core.lab.fit import DistanceFitRun

    reference = DistanceFitRun(small(steps=40))
    reference.run()
    for key in (GRAD_NORM_ALL, "grad_norm:coords"):
        pick(runs.overlay, key)
        x, _, raw, _ = run.drawn
        np.testing.assert_array_equal(x, np.arange(40))
        expected = np.sqrt(np.sum(reference.grad_norm_history**2, axis=0))
        np.testing.assert_allclose(raw, expected, rtol=1e-6)
    assert runs.overlay.readouts()["runs"][0]["points"] == 40


def test_a_long_live_run_is_thinned_alike_in_the_lab_and_on_the_runs_page(
    qtbot,
    make_lab,  # noqa: F811
    monkeypatch,
):
    """The lab bounds a run's history (worker.HISTORY_ROWS rows): past it the Runs page's
    live run keeps the same steps as the lab's loss plot, a wall time for each, and the
    newest step."""
    from fixtures_app import RUN_TIMEOUT_MS, small

    from gradviz.gui.run import worker
    from gradviz.gui.run.session import RunState

    monkeypatch.setattr(worker, "HISTORY_ROWS", 16)
    controller = make_lab(small(steps=200))
    runs = controller.runs
    runs.add_live_run()
    (run,) = runs.overlay.runs.values()
    runs.overlay.smoothing.setValue(0)
    controller.start()
    qtbot.waitUntil(lambda: controller.session.state is RunState.FINISHED, timeout=RUN_TIMEOUT_MS)
    qtbot.waitUntil(lambda: len(run.drawn[0]) and run.drawn[0][-1] == 199, timeout=RUN_TIMEOUT_MS)
    lab_steps = controller.views.views["loss"].widget.steps
    assert len(lab_steps) <= 16 and lab_steps[0] == 0 and lab_steps[-1] == 199
    np.testing.assert_array_equal(run.drawn[0], lab_steps)
    series = run.series
    assert len(series.times[0]) == len(series.times[1]) == len(lab_steps)
    assert np.all(np.diff(series.times[1]) >= 0)  # a wall time per kept step, in order


def test_the_lab_loss_plot_marks_nonfinite_losses_as_the_runs_page_does(qtbot):
    from gradviz.gui.widgets.loss import LossView
    from gradviz.gui.widgets.nonfinite_marks import NonfiniteMarks

    view = LossView()
    qtbot.addWidget(view)
    view.show()
    view.set_history(np.array([1.0, 0.5, math.nan, math.inf, 0.25, -math.inf]))
    assert isinstance(view.marks, NonfiniteMarks)
    assert view.marks.counts() == {"nan": 1, "+inf": 1, "-inf": 1}
    (_, _), (y0, y1) = view.plot.getViewBox().viewRange()
    assert view.marks.positions("nan")[0].tolist() == [2]
    assert view.marks.positions("+inf")[1][0] > y1 - 0.1 * (y1 - y0)  # top edge
    assert view.marks.positions("-inf")[1][0] < y0 + 0.1 * (y1 - y0)  # bottom edge
    assert "NaN at step 2" in str(view.marks.items["nan"].data["data"][0])


def test_total_gradient_norm_is_nan_once_any_tensor_went_nan(qtbot, page, scalars_recording):
    add_and_wait(qtbot, page, scalars_recording)
    pick(page, GRAD_NORM_ALL)
    stream = Reader(scalars_recording).rank(0)
    norms = np.stack([stream.tensor(t).grad_norm for t in stream.tensors])
    nan = np.stack([stream.tensor(t).counts[:, 2] > 0 for t in stream.tensors]).any(axis=0)
    _, _, raw, _ = page.runs[str(scalars_recording)].drawn
    np.testing.assert_allclose(raw[~nan], np.sqrt((norms[:, ~nan] ** 2).sum(axis=0)))
    assert np.isnan(raw[nan]).all() and nan.any()
