"""`gradviz fit` from the command line: JSON summary, saved runs, and one-sentence errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_runner import run_cli

from gradviz.cli import main
from gradviz.core.lab.pointsets import generate, save_points

REPO = Path(__file__).resolve().parents[2]


def _strict_json(line: str) -> dict:
    """Parse as real JSON: NaN and Infinity are not JSON and must not appear."""

    def refuse(name):
        raise ValueError(f"{name} is not valid JSON")

    return json.loads(line, parse_constant=refuse)


#: A small, fast run (the shared defaults are the app's 200 points for 2000 steps); the
#: options a test gives come later and win.
SMALL = ("--target", "gaussian", "--n", "10", "--lr", "1e-3", "--steps", "500")


def _fit_json(capsys, *args) -> dict:
    code = main(["fit", "--json", *SMALL, *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return _strict_json(out.strip().splitlines()[-1])


def test_naive_json_reports_the_classic_failure_as_a_result():
    done = run_cli(
        "fit", "--method", "naive", "--json", "--threads", "1", "--steps", "50", "--n", "20"
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no progress bar when stderr is not a terminal
    summary = _strict_json(done.stdout.strip().splitlines()[-1])
    assert summary["first_nonfinite_grad_step"] == 0
    assert summary["first_nonfinite_loss_step"] == 1
    assert summary["final_loss"] is None  # NaN becomes null
    assert summary["steps"] == 50 and summary["method"] == "naive"
    assert set(summary) == {
        "method", "steps", "initial_loss", "final_loss", "first_nonfinite_loss_step",
        "first_nonfinite_grad_step", "steps_per_second", "device", "reference_loss", "threads",
    }  # fmt: skip
    assert summary["threads"]["count"] == 1 and summary["threads"]["auto"] is False


def test_unset_threads_mean_auto_which_runs_a_small_step_on_one_thread(capsys):
    threads = _fit_json(capsys, "--steps", "5")["threads"]
    assert threads["count"] == 1 and threads["auto"] is True
    assert "10 points" in threads["why"] and threads["measured_steps_per_second"] == {}
    main(["fit", *SMALL, "--steps", "5"])
    readable = capsys.readouterr().out
    assert "torch CPU threads: 1 thread (auto: a step of 10 points is too small" in readable


def test_a_thread_count_given_is_the_one_reported(capsys):
    threads = _fit_json(capsys, "--steps", "5", "--threads", "2")["threads"]
    assert threads == {
        "count": 2, "auto": False, "why": "set by the run's settings",
        "measured_steps_per_second": {}, "timings": 0,
    }  # fmt: skip


def test_help_says_what_unset_threads_do(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--threads N torch CPU threads of the run's steps" in text
    assert "(default: auto: 1 thread for a step of under 200 points or on a GPU;" in text
    assert "under 1,000 points only while nothing else runs on the machine" in text


@pytest.mark.parametrize("method", ["masked", "clamp", "safe", "cdist"])
def test_fixed_methods_report_finite_decreasing_loss(capsys, method):
    summary = _fit_json(capsys, "--method", method)
    assert summary["steps"] == 500
    assert summary["final_loss"] < summary["initial_loss"]
    assert summary["first_nonfinite_grad_step"] is None
    assert summary["first_nonfinite_loss_step"] is None
    assert summary["steps_per_second"] > 0 and summary["device"] == "cpu"
    assert 0 <= summary["reference_loss"] < 1e-20


def test_stop_on_nan_exits_0_with_the_last_finite_loss(capsys):
    summary = _fit_json(capsys, "--method", "naive", "--stop-on-nan")
    assert summary["steps"] == 0 and summary["first_nonfinite_grad_step"] == 0
    assert summary["final_loss"] == summary["initial_loss"]


def test_out_saves_losses_coordinates_and_distances(capsys, tmp_path):
    out = tmp_path / "run.npz"
    summary = _fit_json(capsys, "--steps", "25", "--n", "7", "--dim", "2", "--out", str(out))
    with np.load(out, allow_pickle=False) as run:
        assert set(run.files) == {
            "loss", "coords", "target_coords", "distances", "target_distances",
        }  # fmt: skip
        assert run["loss"].shape == (25,) and run["coords"].shape == (7, 2)
        assert run["target_coords"].shape == (7, 2)
        assert run["distances"].shape == run["target_distances"].shape == (7, 7)
        assert run["loss"][0] == pytest.approx(summary["initial_loss"])
        diff = run["coords"][:, None] - run["coords"][None]
        np.testing.assert_allclose(run["distances"], np.sqrt((diff**2).sum(-1)), atol=1e-5)


def test_target_file_sets_n_and_d(capsys, tmp_path):
    path = tmp_path / "target.csv"
    save_points(path, generate("helix", 12, 3, seed=0))
    out = tmp_path / "run.npz"
    _fit_json(capsys, "--target", f"file:{path}", "--steps", "3", "--out", str(out), "--n", "99")
    with np.load(out) as run:
        assert run["coords"].shape == (12, 3)


def test_network_run_from_the_command_line(capsys):
    summary = _fit_json(
        capsys, "--net", "6-32-3:tanh", "--steps", "30", "--lr", "1e-2", "--threads", "1"
    )
    assert summary["final_loss"] < summary["initial_loss"]


def test_plain_output_is_a_readable_summary(capsys):
    assert main(["fit", "--method", "naive", "--steps", "5"]) == 0
    out = capsys.readouterr().out
    assert "first non-finite gradient: step 0; first non-finite loss: step 1" in out


BAD_RUNS = {
    "missing file": (["--target", "file:{tmp}/nope.csv"], "nope.csv does not exist"),
    "non-numeric": (["--target", "file:{tmp}/bad.csv"], "line 2, field 2 is 'x'"),
    "ragged": (["--init", "file:{tmp}/ragged.csv"], "line 2 has 1 fields but line 1 has 3"),
    "npz": (["--target", "file:{tmp}/a.npz"], ".npz archive"),
    "unknown generator": (["--target", "blob"], "Unknown target 'blob'"),
    "one point": (["--n", "1"], "between 2 and 100,000"),
    "negative lr": (["--lr", "-1"], "learning rate (lr) must be between 1e-08 and 1e+06"),
    "missing device": (["--device", "cuda:9"], "not available on this machine"),
    "net width": (["--net", "8-2"], "output width is 2 but the points have D = 3"),
    "bad net": (["--net", "8-x-3"], "Width 2 of '8-x-3'"),
    "helix in 2-D": (["--target", "helix", "--dim", "2"], "needs at least 3 dimensions"),
    "negative seed": (["--seed", "-1"], "seed must be a whole number"),
    "huge seed": (["--seed", str(2**64), "--net", "4-3"], "seed must be a whole number"),
    "out folder": (["--out", "{tmp}/no/such/run.npz"], "does not exist; create"),
    "out suffix": (["--out", "{tmp}/run.txt"], "must end in .npz"),
}


@pytest.mark.parametrize("case", list(BAD_RUNS))
def test_bad_arguments_and_files_exit_2_with_one_sentence(capsys, tmp_path, case):
    (tmp_path / "bad.csv").write_text("1,2,3\n4,x,6\n")
    (tmp_path / "ragged.csv").write_text("1,2,3\n4\n")
    np.savez(tmp_path / "a.npz", a=np.zeros((3, 3)))
    args, message = BAD_RUNS[case]
    code = main(["fit", "--steps", "2", *[a.format(tmp=tmp_path) for a in args]])
    out, err = capsys.readouterr()
    assert code == 2
    assert message in err
    assert err.startswith("gradviz fit: error: ") and err.count("\n") == 1
    assert "Traceback" not in err and out == ""


def test_bad_file_in_a_real_process_gives_no_traceback(tmp_path):
    (tmp_path / "bad.csv").write_text("x,y\n1,2\nnan,3\n")
    done = subprocess.run(
        [sys.executable, "-m", "gradviz", "fit", "--target", f"file:{tmp_path / 'bad.csv'}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "line 3, field 1 is 'nan'" in done.stderr and "Traceback" not in done.stderr
