"""Memory of a long live run's histories: the `soak` suite of `gradviz bench`.

Every frame of a lab run carries the run's per-step history (each step's loss and gradient
norms), and the loss plot, the timeline's kept snapshots and the Runs page's live feed hold
what they were given. Unbounded, a 10-minute run at 460 steps/s grew by 300 MB (1.1 KB a
step) and kept growing. This drives those structures as such a run does, a frame every 15
steps (460 steps/s at 30 frames/s), without computing the steps themselves: the run's
``StepSeries`` bounded as the lab bounds it (``worker.HISTORY_ROWS``) is given a loss and a
gradient norm a step (NaN on every 5,000th), and a Snapshot of N = 200 each frame goes
through a ``RunSession`` to the lab's loss view, the live timeline and a Runs-page live feed
(the snapshots share one set of matrices: those are bounded by the timeline already, and
left out here so that the histories are what is measured).

Reported: resident memory (VmRSS, after a garbage collection) at the start and after
100,000 and 1,000,000 steps; and the same with an unbounded history (as before) to
100,000 steps, for comparison. ``--quick``: 20,000 and 100,000 steps.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import time
from collections.abc import Callable

STEPS_PER_FRAME = 15
NAN_EVERY = 5000
MARKS = (100_000, 1_000_000)
QUICK_MARKS = (20_000, 100_000)


def resident_mb() -> float:
    """This process's resident memory in MB (VmRSS), after a garbage collection; NaN where
    /proc is not there."""
    gc.collect()
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def soak(marks: tuple[int, ...], rows: int | None) -> dict[str, float]:
    """Resident MB at the start and at each of ``marks`` steps of a run whose history keeps
    at most ``rows`` rows (None: every step)."""
    from PySide6.QtWidgets import QApplication

    from gradviz.core.common.step_series import StepSeries
    from gradviz.gui.pages.recordings.live_history import LiveTimeline
    from gradviz.gui.pages.runs.runs_live import LiveFeed
    from gradviz.gui.run.session import RunSession
    from gradviz.gui.run.views import LossCurveView
    from gradviz.gui.widgets.synthetic import synthetic_snapshot
    from gradviz.gui.widgets.timeline import Timeline

    app = QApplication.instance() or QApplication([])
    base = synthetic_snapshot(n=200, step=0, generation=0)
    session = RunSession()
    loss = LossCurveView()
    session.snapshotShown.connect(loss.show)
    timeline = LiveTimeline(session, Timeline())
    timeline.activate()
    series = StepSeries(2, capacity=rows)
    feed: LiveFeed | None = None
    out = {"start": resident_mb()}
    step = 0
    for mark in marks:
        while step < mark:
            for _ in range(STEPS_PER_FRAME):
                bad = step % NAN_EVERY == NAN_EVERY - 1
                series.append(step, (float("nan") if bad else 1.0 / (step + 1), 0.5))
                step += 1
            frame = dataclasses.replace(
                base,
                step=step,
                loss_history=series.column(0),
                grad_norm_history=series.values[1:],
                grad_norm_names=("coords",),
                history_steps=None if series.every_step else series.steps,
            )
            session._on_snapshot(frame, 460.0)  # as a worker's frame arrives
            if feed is None:
                feed = LiveFeed(session)
                feed.start()
            if step % (STEPS_PER_FRAME * 100) == 0:
                app.processEvents()
        out[f"{mark}"] = resident_mb()
    session.deleteLater()
    app.processEvents()
    return out


def run(repeats: int, quick: bool, emit: Callable[[str], None]) -> dict:
    """Measure and print the soak figures; returns them (JSON-ready)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from gradviz.bench.harness import show_table
    from gradviz.gui.run.worker import HISTORY_ROWS

    marks = QUICK_MARKS if quick else MARKS
    emit(
        f"soak: resident MB of a live run's histories (loss view, timeline, Runs feed), a "
        f"frame every {STEPS_PER_FRAME} steps, history bounded to {HISTORY_ROWS:,} rows"
    )
    started = time.perf_counter()
    bounded = soak(marks, HISTORY_ROWS)
    seconds = time.perf_counter() - started
    unbounded = soak(marks[:1], None)
    columns = ["history", "start MB", *(f"{mark:,} steps MB" for mark in marks)]
    rows = [
        [f"bounded to {HISTORY_ROWS:,} rows", *bounded.values()],
        ["every step kept (as before)", *unbounded.values(), *[None] * (len(marks) - 1)],
    ]
    notes = [
        f"resident memory (VmRSS after a garbage collection); the bounded run took {seconds:.0f} s",
        "every step kept: measured to the first mark only",
    ]
    table = show_table(emit, "resident MB of a live run's histories", columns, rows, notes)
    return {
        "history_rows": HISTORY_ROWS,
        "bounded_mb": bounded,
        "unbounded_mb": unbounded,
        "tables": [table],
    }


if __name__ == "__main__":  # pragma: no cover - manual use
    import json
    import sys

    print(json.dumps(run(1, "--quick" in sys.argv, print)))
