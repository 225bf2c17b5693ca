"""The live run on a GPU: the `cuda` suite of `gradviz bench`.

The app's lab worker (the real window offscreen, its default views, the default frame rate)
runs the default experiment (N = 200) and N = 3000 on CUDA, and the same on the CPU with its
threads left to auto beside it, each against a bare torch loop of the same step on the same
device (``fit_loop.measure_lab``): on CUDA the bare loop is timed to its last kernel and
never reads a value back, where the lab reads its loss and gradient norms once a step; on
the CPU its best of 1 and 2 threads. Each row says which threads the lab's run chose, and
why. No target: these are the figures to set one by.

Without a CUDA device the suite says so and measures nothing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from gradviz.bench.fit_loop import measure_lab
from gradviz.bench.gui import offscreen_lab
from gradviz.bench.harness import call_in_fresh_interpreter, show_table

SIZES = (200, 3000)
QUICK_SIZES = (200,)
DEVICES = ("cuda", "cpu")


def run(repeats: int, quick: bool, emit: Callable[[str], None]) -> dict:
    """Measure and print the figures (or why not); JSON-ready, tables as data."""
    import torch

    if not torch.cuda.is_available():
        why = "no CUDA device here (torch.cuda.is_available() is False)"
        emit(f"cuda: skipped: {why}")
        return {"skipped": why, "tables": []}
    sizes = QUICK_SIZES if quick else SIZES
    # In an interpreter of its own, as the fit_loop suite's lab figures (see there).
    rows = call_in_fresh_interpreter(lab_figures, repeats, 1.0 if quick else 3.0, DEVICES, sizes)
    name = torch.cuda.get_device_name(0)
    return {"lab": rows, "device_name": name, "tables": [_table(rows, name, emit)]}


def lab_figures(repeats: int, seconds: float, devices: list[str], sizes: list[int]) -> list[dict]:
    """One row per size and device: the lab worker against the bare loop on that device."""
    with offscreen_lab() as lab:
        return [
            {"n": n, "device": device, **measure_lab(repeats, seconds, lab, n, device)}
            for n in sizes
            for device in devices
        ]


def _table(rows: list[dict], device_name: str, emit: Callable[[str], None]) -> dict:
    columns = [
        "N", "device", "lab steps/s", "bare steps/s", "lab / bare", "frames/s drawn",
        "lab's threads",
    ]  # fmt: skip
    table = [
        [
            row["n"],
            row["device"],
            row["app_steps_per_second"],
            row["bare_best_steps_per_second"],
            row["ratio"],
            row["frames_drawn_per_second"],
            row["threads"],
        ]
        for row in rows
    ]
    notes = [
        f"cuda: {device_name}; the bare loop timed to its last kernel, never reading a value "
        "back (the lab reads its loss and gradient norms once a step)",
        "cpu: the bare loop's best of 1 and 2 threads, the lab's threads left to auto; "
        "median of the repeats; no target",
    ]
    title = "steps/s of the app's lab worker on CUDA and on the CPU, default experiment"
    return show_table(emit, title, columns, table, notes)


if __name__ == "__main__":  # pragma: no cover - manual use
    print(json.dumps(run(1, "--quick" in sys.argv, print)))
