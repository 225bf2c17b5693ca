"""Speed target of the timeline: moving the slider over a lab recording of N = 1000 points
redraws the views within 100 ms (run with: pytest -m bench tests/bench/test_bench_timeline.py -s).
"""

import time

import numpy as np
import pytest

TARGET_MS = 100.0


@pytest.mark.bench
def test_moving_the_timeline_redraws_within_100_ms_at_n_1000(qtbot, tmp_path):
    from gradviz.bench.gui_views import views_window
    from gradviz.cli import main
    from gradviz.core.record.reader import Reader
    from gradviz.core.record.recording_data import read_recording
    from gradviz.gui.run.recorded_run import RecordedRun
    from gradviz.gui.run.views import LabViews
    from gradviz.gui.widgets.timeline import Timeline

    path = tmp_path / "big"
    assert main(["fit", "--target", "helix", "--n", "1000", "--dim", "3", "--steps", "30",
                 "--record", str(path)]) == 0  # fmt: skip
    views, recorded, timeline = LabViews(), RecordedRun(), Timeline()
    window = views_window(views)
    qtbot.addWidget(window)
    qtbot.addWidget(timeline)
    window.show()
    recorded.snapshotShown.connect(views.show)
    timeline.indexChanged.connect(recorded.show_index)
    recorded.set_data(read_recording(Reader(path)))
    timeline.set_steps(recorded.data.images["distances"][0])
    times = []
    for k in list(range(30)) * 2:
        started = time.perf_counter()
        timeline.select_index(k)
        window.repaint()  # the drawn frame, not only the request for one
        qtbot.wait(0)
        times.append((time.perf_counter() - started) * 1000)
    median = float(np.median(times))
    print(f"timeline at N = 1000: median {median:.1f} ms, p95 {np.percentile(times, 95):.1f} ms")
    assert median < TARGET_MS
