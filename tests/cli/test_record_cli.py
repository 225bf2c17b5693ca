"""`gradviz fit --record` and `gradviz inspect RECORDING --json`."""

from __future__ import annotations

import json

import numpy as np

from gradviz.cli import main
from gradviz.core.common.health import Health
from gradviz.core.record.reader import Reader


def inspect_json(capsys, path) -> dict:
    code = main(["inspect", str(path), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_a_recorded_naive_fit_inspects_as_a_recording_with_its_first_nan(tmp_path, capsys):
    run = tmp_path / "RUN"
    assert (
        main(["fit", "--method", "naive", "--steps", "12", "--n", "8", "--record", str(run)]) == 0
    )
    capsys.readouterr()
    summary = inspect_json(capsys, run)
    assert summary["kind"] == "recording" and summary["source"] == "fit"
    assert summary["steps"] == 12 and summary["last_step"] == 11 and summary["complete"]
    assert summary["ranks"] == [0] and summary["tensors"] == ["coords"]
    assert summary["first_nonfinite"] == {
        "step": 0,
        "tensor": "coords",
        "index": 0,
        "kind": "nan",
        "rank": 0,
        "ranks": [0],
        "before_reduction": False,
    }
    assert summary["bytes"] > 0
    stream = Reader(run).rank(0)
    step, health = stream.image("entry_health", 0)
    # The naive method's NaN diagonal, as the lab shows it.
    assert step == 0 and health.shape == (8, 8)
    assert np.all(np.diagonal(health) == Health.NAN)


def test_a_fit_stopped_on_nan_records_the_step_that_stopped_it(tmp_path, capsys):
    run = tmp_path / "RUN"
    args = ["fit", "--method", "naive", "--steps", "12", "--n", "8", "--stop-on-nan"]
    assert main([*args, "--record", str(run), "--json"]) == 0
    cli = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert cli["first_nonfinite_grad_step"] == 0 and cli["steps"] == 0
    # That step never reached the optimizer, yet it is what the recording is for.
    summary = inspect_json(capsys, run)
    assert summary["first_nonfinite"]["step"] == 0 and summary["steps"] == 1
    step, health = Reader(run).rank(0).image("entry_health", 0)
    assert step == 0 and np.all(np.diagonal(health) == Health.NAN)


def test_recorded_pictures_are_those_of_their_own_step_without_a_second_pass(tmp_path):
    from gradviz.core.lab.fit import DistanceFitRun
    from gradviz.core.record.fit_recording import FitRecording
    from gradviz.core.settings.config import FitConfig

    run = DistanceFitRun(FitConfig(n=10, steps=6, method="safe", seed=3), max_display=2048)
    recording = FitRecording(run, tmp_path / "RUN")
    distances = []
    while not run.done:
        recording.step(run)
        distances.append(run.snapshot().distances)  # what the app would show of the step
    recording.close()
    assert run.max_display == 2048  # the app's live matrices keep their size
    assert run._attempts == 6  # one forward and backward per step, none for the pictures
    stream = Reader(tmp_path / "RUN").rank(0)
    for step in stream.image_steps("distances"):
        np.testing.assert_allclose(stream.image("distances", step)[1], distances[step])


def test_a_long_fit_records_a_bounded_number_of_snapshots(tmp_path, capsys, monkeypatch):
    # The bound lowered from 200 to 10, so that a run of 45 steps is a long one (a real
    # long run takes seconds per hundred recorded steps).
    from gradviz.core.record import fit_recording

    monkeypatch.setattr(fit_recording, "MAX_SNAPSHOTS", 10)
    run = tmp_path / "RUN"
    assert main(["fit", "--steps", "45", "--n", "6", "--record", str(run)]) == 0
    stream = Reader(run).rank(0)
    steps = stream.image_steps("distances")
    assert 5 <= len(steps) <= 10
    assert steps[0] == 0 and steps[-1] >= 45 - 45 // len(steps)  # spread over the whole run
    assert stream.first_nonfinite is None and np.isfinite(stream.losses()).all()


def test_inspect_of_a_directory_that_is_not_a_recording_is_one_sentence(tmp_path, capsys):
    assert main(["inspect", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is not a gradviz recording" in err and err.count("\n") == 1


def test_large_fit_matrices_are_recorded_downsampled_keeping_the_nan_diagonal(tmp_path, capsys):
    run = tmp_path / "RUN"
    args = ["fit", "--method", "naive", "--n", "600", "--steps", "2", "--record", str(run)]
    assert main(args) == 0
    stream = Reader(run).rank(0)
    _, health = stream.image("entry_health", 0)
    _, distances = stream.image("distances", 0)
    assert health.shape == distances.shape == (300, 300)
    assert np.all(np.diagonal(health) == Health.NAN)


def test_inspect_gives_each_rank_its_own_numbers_and_never_mixes_them(tmp_path, capsys):
    from gradviz.core.record import layout as L
    from gradviz.core.record.writer import RankWriter

    rows = np.zeros((1, L.ROW_WIDTH))
    rows[0, len(L.STAT_COLUMNS) + L.ZERO_BIN] = 4  # four zero gradient entries
    bad = rows.copy()
    bad[0, len(L.STAT_COLUMNS) + L.NAN_BIN] = 1
    first = {"step": 2, "tensor": "w", "index": 3, "kind": "nan"}
    r0 = RankWriter(tmp_path / "run", source="watch", tensors=["w"], rank=0, world_size=2)
    r0.append_many([(s, 1.0, rows, None, None) for s in range(5)])
    r0.close()
    r1 = RankWriter(tmp_path / "run", source="watch", tensors=["w"], rank=1, world_size=2)
    r1.append_many([(0, 1.0, rows, None, None), (1, 1.0, rows, None, None)])
    r1.append(2, 1.0, bad, None, first)  # rank 1 went bad and was cut off
    summary = inspect_json(capsys, tmp_path / "run")
    assert summary["per_rank"] == [
        {"rank": 0, "steps": 5, "last_step": 4, "complete": True, "first_nonfinite": None},
        {"rank": 1, "steps": 3, "last_step": 2, "complete": False, "first_nonfinite": first},
    ]
    assert summary["complete"] is False and summary["first_nonfinite"]["rank"] == 1
    assert main(["inspect", str(tmp_path / "run")]) == 0
    text = capsys.readouterr().out
    assert "rank 0: 5 steps recorded, last step 4, complete" in text
    assert "rank 1: 3 steps recorded, last step 2, not complete" in text
    assert "steps recorded: 5" not in text  # no total that is one rank's count


def _recorded_norms(stream, name: str) -> np.ndarray:
    """(S,) a recorded tensor's gradient norm as the lab's run keeps it: NaN where the
    gradient held a NaN, +Inf where it held an Inf (the recording stores the finite part)."""
    series = stream.tensor(name)
    nan, inf = series.counts[:, 2], series.counts[:, 3] + series.counts[:, 4]
    return np.where(nan > 0, np.nan, np.where(inf > 0, np.inf, series.grad_norm))


def test_the_runs_gradient_norms_are_the_recorded_ones_of_the_same_step(tmp_path, capsys):
    from gradviz.core.lab.fit import DistanceFitRun
    from gradviz.core.settings.config import FitConfig

    settings = {"target": "gaussian", "n": 10, "dim": 3, "steps": 8, "seed": 5, "lr": 1e-2}
    cases = {"net": {"method": "safe", "net": "4-8-3:tanh"}, "naive": {"method": "naive"}}
    for label, case in cases.items():
        path = tmp_path / label
        flags = [f"--{k}={v}" for k, v in {**settings, **case}.items()]
        assert main(["fit", *flags, "--record", str(path), "--json"]) == 0
        cli = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        run = DistanceFitRun(FitConfig(**settings, **case))  # the same settings, unrecorded
        run.run()
        assert cli["steps"] == run.completed_steps == 8
        stream = Reader(path).rank(0)
        np.testing.assert_array_equal(stream.step_numbers(), np.arange(8))
        # Same seeds, same numbers: the losses line up step for step, and so do the norms.
        np.testing.assert_array_equal(stream.losses(), run.loss_history)
        assert tuple(stream.tensors) == run.grad_norm_names
        for t, name in enumerate(run.grad_norm_names):
            recorded = _recorded_norms(stream, name)
            np.testing.assert_allclose(run.grad_norm_history[t], recorded, rtol=1e-6)
    assert np.isnan(run.grad_norm_history).all()  # naive: NaN from step 0, kept as such
