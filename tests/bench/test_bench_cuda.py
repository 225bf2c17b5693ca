"""`gradviz bench --suite cuda`: the lab's worker on a GPU against a bare loop there, and on
the CPU beside it. Without a device it says so; its CPU half runs here (slow); the figures
themselves need a CUDA device (gpu)."""

from __future__ import annotations

import pytest
import torch

from gradviz.bench import cuda
from gradviz.bench.harness import call_in_fresh_interpreter

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is here")
def test_without_cuda_the_suite_says_so_and_measures_nothing():
    said: list[str] = []
    result = cuda.run(1, quick=True, emit=said.append)
    assert result == {"skipped": "no CUDA device here (torch.cuda.is_available() is False)",
                      "tables": []}  # fmt: skip
    assert said == ["cuda: skipped: no CUDA device here (torch.cuda.is_available() is False)"]


@pytest.mark.slow
def test_the_lab_and_the_bare_loop_are_measured_on_the_device_named():
    (row,) = call_in_fresh_interpreter(cuda.lab_figures, 1, 0.3, ["cpu"], [40])
    assert (row["n"], row["device"]) == (40, "cpu")
    assert row["app_steps_per_second"] > 0 and row["bare_best_steps_per_second"] > 0
    assert row["ratio"] == pytest.approx(
        row["app_steps_per_second"] / row["bare_best_steps_per_second"]
    )
    assert row["threads"] == "1 thread (auto: a step of 40 points is too small to share)"


@pytest.mark.gpu
@needs_cuda
def test_the_lab_runs_the_default_experiment_on_cuda_on_one_thread():
    result = cuda.run(1, quick=True, emit=print)
    rows = {row["device"]: row for row in result["lab"]}
    assert set(rows) == {"cuda", "cpu"}
    assert rows["cuda"]["threads"] == "1 thread (auto: the step runs on cuda)"
    assert rows["cuda"]["app_steps_per_second"] > 0 and rows["cuda"]["ratio"] > 0
