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
import os
import sys
from collections.abc import Callable

from gradviz.bench.fit_loop import _fresh, measure_lab
from gradviz.bench.harness import show_table

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
    rows = lab_figures_in_a_fresh_interpreter(repeats, 1.0 if quick else 3.0, DEVICES, sizes)
    return {
        "lab": rows,
        "device_name": torch.cuda.get_device_name(0),
        "tables": [_table(rows, torch.cuda.get_device_name(0), emit)],
    }


def lab_figures_in_a_fresh_interpreter(
    repeats: int, seconds: float, devices: tuple[str, ...], sizes: tuple[int, ...]
) -> list[dict]:
    """``lab_figures`` in an interpreter of its own (see ``fit_loop._lab_figures``)."""
    return _fresh(_SCRIPT, json.dumps([repeats, seconds, list(devices), list(sizes)]))


_SCRIPT = """
import json, sys
from gradviz.bench.cuda import lab_figures
print(json.dumps(lab_figures(*json.loads(sys.argv[1]))))
"""


def lab_figures(repeats: int, seconds: float, devices: list[str], sizes: list[int]) -> list[dict]:
    """One row per size and device: the lab worker against the bare loop on that device."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ.setdefault("GRADVIZ_SETTINGS_SCOPE", "bench")
    from gradviz.bench.gui import _Lab

    lab = _Lab()
    rows = []
    try:
        for n in sizes:
            for device in devices:
                row = measure_lab(repeats, seconds, lab, n, device)
                rows.append({"n": n, "device": device, **row})
    finally:
        lab.close()
    return rows


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
