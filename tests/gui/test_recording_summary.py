"""One summary of a recording: ``gradviz inspect --json`` prints a ``RecordingSummary`` and
Model health and Runs show the one their read made, for a two-rank recording with a NaN step
on rank 0 and rank 1's records ending before it (so no first rank and step is claimed)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from gradviz.cli import main
from gradviz.core.record import layout as L
from gradviz.core.record import reader as reader_module
from gradviz.core.record.reader import Reader
from gradviz.core.record.recording_data import read_recording
from gradviz.core.record.run_series import GRAD_NORM_ALL
from gradviz.core.record.writer import RankWriter

WAIT_MS = 60_000
TENSOR = "0.weight"
LAST, NAN_STEP, RANK1_LAST = 40, 30, 20


def _rows(bad: bool) -> np.ndarray:
    """(1, ROW_WIDTH) statistics of one tensor: four zero entries, and one NaN if ``bad``."""
    out = np.zeros((1, L.ROW_WIDTH))
    out[0, len(L.STAT_COLUMNS) + L.ZERO_BIN] = 4
    out[0, len(L.STAT_COLUMNS) + L.NAN_BIN] = 1 if bad else 0
    return out


def _write_rank(path, rank: int, last: int, nan_from: int | None, close: bool) -> None:
    """Rank ``rank``'s stream as a two-rank watch writes it: steps 0..``last``, NaN from
    ``nan_from``; an unclosed stream is a rank killed while its writer ran."""
    writer = RankWriter(path, source="watch", tensors=[TENSOR], rank=rank, world_size=2)
    items = []
    for step in range(last + 1):
        bad = nan_from is not None and step >= nan_from
        first = {"step": step, "tensor": TENSOR, "index": 0, "kind": "nan"}
        loss = float("nan") if bad else 1.0 / (step + 1)
        items.append((step, loss, _rows(bad), None, first if step == nan_from else None))
    writer.append_many(items)
    if close:
        writer.close()


def _two_ranks(path):
    """Rank 0: steps 0-40, NaN from 30, closed; rank 1: steps 0-20, never closed."""
    _write_rank(path, 0, LAST, NAN_STEP, close=True)
    _write_rank(path, 1, RANK1_LAST, None, close=False)
    return path


@pytest.fixture(scope="module", autouse=True)
def zarr_started(tmp_path_factory):
    """zarr starts its I/O threads on first use, for the life of the process: start them
    before the tests that check no thread of theirs is left behind. Its pool grows with the
    chunks one read fetches at once."""
    import zarr

    folder = tmp_path_factory.mktemp("zarr")
    read_recording(Reader(_two_ranks(folder / "run")))
    many = zarr.create_array(folder / "chunks", shape=(64,), chunks=(1,), dtype="f8")
    many[:] = 1.0
    assert many[:].sum() == 64


@pytest.fixture
def recording(tmp_path):
    return _two_ranks(tmp_path / "run")


@pytest.fixture
def summaries(monkeypatch) -> list:
    """Every RecordingSummary made (by any thread), in order."""
    made = []
    real = reader_module.summarise
    monkeypatch.setattr(reader_module, "summarise", lambda *a: made.append(real(*a)) or made[-1])
    return made


def _as_a_page_reads(printed: dict, rank: int) -> dict:
    """``inspect --json`` as a page's summary of ``rank`` says it: the same, but for what a
    page does not read: the size on disk, and whether another rank that its writer closed
    lost data (not known: None)."""
    expected = json.loads(json.dumps(printed))
    expected["bytes"] = None
    for entry in expected["per_rank"]:
        if entry["rank"] != rank and entry["complete"]:
            entry["complete"] = None
    if expected["complete"] and len(expected["per_rank"]) > 1:
        expected["complete"] = None
    return expected


def _inspect_json(capsys, path) -> dict:
    code = main(["inspect", str(path), "--json"])
    assert code == 1  # a rank's records end early: the recording cannot answer everything
    return json.loads(capsys.readouterr().out)


def test_inspect_prints_the_summary_and_says_what_is_not_known(capsys, recording, summaries):
    printed = _inspect_json(capsys, recording)
    (summary,) = summaries
    assert printed == json.loads(json.dumps(summary.to_dict()))
    assert printed["first_nonfinite"]["step"] is None  # rank 1's records end before it
    assert (
        summary.first_not_known
        == "rank 1's records end at step 20; from step 21 on only rank 0 is known"
    )
    assert printed["ranks_known"] == summary.first_not_known
    assert [r["first_nonfinite"] and r["first_nonfinite"]["step"] for r in printed["per_rank"]] == [
        NAN_STEP,
        None,
    ]
    assert [r["complete"] for r in printed["per_rank"]] == [True, False]


def test_model_health_shows_the_summary_its_read_made(qtbot, capsys, recording, summaries):
    from gradviz.gui.pages.recordings.health_page import ModelHealthPage

    printed = _inspect_json(capsys, recording)
    page = ModelHealthPage()
    qtbot.addWidget(page)
    page.resize(1000, 700)
    page.show()
    for rank in (0, 1):
        data = read_recording(Reader(recording), rank)
        assert data.summary is summaries[-1]  # the read made one summary, and kept it
        assert json.loads(json.dumps(data.summary.to_dict())) == _as_a_page_reads(printed, rank)
        page.set_data(data)
        r = page.readouts()
        first = printed["per_rank"][rank]["first_nonfinite"]
        assert r["first_nonfinite_step"] == (None if first is None else first["step"])
        assert printed["ranks_known"] in r["first_nonfinite_why"]
        assert f"Incomplete recording: {printed['ranks_known']}." in r["damage"]
        assert (r["path"], r["rank"]) == (printed["path"], rank)
        assert data.complete is printed["per_rank"][rank]["complete"]
        if rank == 1:  # rank 0's writer closed it; its data is not read for rank 1's page
            assert data.summary.rank(0).complete is None and data.summary.bytes is None
    # The page reads what the summary says, not the recording again: a summary that says
    # otherwise is shown as it says.
    other = dataclasses.replace(data.summary, ranks_known="rank 1 recorded no step")
    page.set_data(dataclasses.replace(data, summary=other))
    assert "Incomplete recording: rank 1 recorded no step." in page.readouts()["damage"]


def test_runs_shows_the_summary_its_read_made(qtbot, show_widget, capsys, recording, summaries):
    from gradviz.gui.pages.runs.overlay import RunsOverlay

    printed = _inspect_json(capsys, recording)
    page = show_widget(RunsOverlay(), 900, 500)
    run = page.add_recording(str(recording))
    qtbot.waitUntil(lambda: run.series is not None and run.state == "complete", timeout=WAIT_MS)
    series = run.series
    assert any(series.summary is made for made in summaries[1:])  # made by the page's read
    assert json.loads(json.dumps(series.summary.to_dict())) == _as_a_page_reads(printed, 0)
    (readout,) = page.readouts()["runs"]
    assert (readout["path"], readout["source"], readout["rank"]) == (
        printed["path"],
        printed["source"],
        0,
    )
    assert readout["name"] == f"{printed['path']} (rank 0)"  # two ranks: the rank is named
    assert series.complete is printed["per_rank"][0]["complete"] is True
    page.quantity.setCurrentIndex(page.quantity.findData(GRAD_NORM_ALL))
    (readout,) = page.readouts()["runs"]
    assert readout["nonfinite"] == LAST - NAN_STEP + 1  # rank 0's NaN gradients
