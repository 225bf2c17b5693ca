"""A damaged recording in the app: lost steps named and drawn as lost, never as data."""
# The shared fixtures are imported by name, which pyflakes reads as a redefinition:
# ruff: noqa: F811

from __future__ import annotations

import shutil

import numpy as np
import pytest
from fixtures_app import isolated_settings, lab  # noqa: F401 - fixtures
from recording_fixtures import open_and_wait, write_recording

from gradviz.core.common.health import Health
from gradviz.gui.pages.recordings.health_plots import MISSING_COLOUR, health_rgba
from gradviz.gui.widgets.palette import OKABE_ITO

WAIT_MS = 60_000


@pytest.fixture(scope="module")
def long_recording(tmp_path_factory):
    """40 steps (three chunks of 16) of a small watched model."""
    return write_recording(tmp_path_factory.mktemp("rec") / "run", steps=40)


@pytest.fixture(scope="module", autouse=True)
def zarr_started(long_recording):
    """zarr's I/O threads live as long as the process: start them (and grow its pool with
    a read of many chunks) before the tests that check no thread is left behind."""
    import zarr

    from gradviz.core.record.reader import Reader

    Reader(long_recording).rank(0).losses()
    zarr.open_group(long_recording, mode="r")["rank0/images/hidden/data"][:]


@pytest.fixture
def damaged(long_recording, tmp_path):
    """A copy of the recording; the test deletes what it damages."""
    path = tmp_path / "damaged"
    shutil.copytree(long_recording, path)
    return path


def test_missing_steps_are_drawn_in_their_own_colour_and_named_in_one_line(qtbot, lab, damaged):
    (damaged / "rank0" / "stats" / "c" / "1" / "0" / "0").unlink()  # steps 16-31
    data = open_and_wait(qtbot, lab, damaged)
    page = lab.recordings.page
    assert page.damage_label.text() == "Damaged recording: rank 0 stats: steps 16-31 lost"
    qtbot.waitUntil(
        lambda: page.timeline.state_label.text() == "damaged: steps 16-31 lost",
        timeout=WAIT_MS,
    )
    drawn = page.health.image.image  # (T, S, 4) as drawn
    assert (drawn[:, 16:32] == MISSING_COLOUR).all()
    assert not (drawn[:, :16] == MISSING_COLOUR).all(axis=-1).any()
    # Hovering a lost cell, and the histogram header at that step, say "lost", as the Graph
    # page and `gradviz inspect` do.
    assert "lost" in page.health.describe(0, 20)
    page.select_cell(0, 20)
    assert "lost" in page.histogram.title.text()
    assert page.arrays()["missing"][:, 16:32].all()
    assert lab.error_dialog is None
    assert data.n_steps == 40


def test_a_lost_index_chunk_never_shows_a_negative_step(qtbot, lab, damaged):
    (damaged / "rank0" / "index" / "c" / "1" / "0").unlink()
    data = open_and_wait(qtbot, lab, damaged)
    assert data.n_steps == 24 and (data.steps >= 0).all()
    timeline = lab.recordings.page.timeline
    for index in (15, 16, 23):
        timeline.select_index(index)
        assert "-" not in timeline.step_label.text().split("(")[0]
    assert lab.recordings.page.health.axis.steps.min() >= 0
    assert "steps 16-31 lost" in lab.recordings.page.damage_label.text()


def test_a_missing_array_folder_opens_without_a_dialog_and_is_not_reading_forever(
    qtbot, lab, damaged
):
    shutil.rmtree(damaged / "rank0" / "stats")
    data = open_and_wait(qtbot, lab, damaged)
    assert data.missing_cells().all()
    state = lab.recordings.page.timeline.state_label
    qtbot.waitUntil(lambda: state.text() == "damaged: steps 0-39 lost", timeout=WAIT_MS)
    assert lab.error_dialog is None


def test_missing_cells_never_take_the_finite_colour():
    worst = np.full((1, 3), Health.FINITE, np.uint8)
    rgba = health_rgba(worst, np.ones((1, 3)), np.array([[False, True, False]]))
    finite = tuple(int(OKABE_ITO[Health.FINITE][k : k + 2], 16) for k in (1, 3, 5))
    assert tuple(rgba[0, 1]) == MISSING_COLOUR and tuple(rgba[0, 1, :3]) != finite


def test_opening_a_second_recording_clears_the_readout_of_the_first(
    qtbot, lab, long_recording, damaged
):
    from gradviz.gui.pages.recordings.health_plots import READOUT_HINT

    open_and_wait(qtbot, lab, long_recording)
    health = lab.recordings.page.health
    health.readout.setText(health.describe(0, 3))  # as hovering cell (0, 3) does
    (damaged / "rank0" / "stats" / "c" / "1" / "0" / "0").unlink()
    open_and_wait(qtbot, lab, damaged)  # another recording
    assert health.readout.text() == READOUT_HINT
