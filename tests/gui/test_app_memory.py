"""The app and a run that does not fit: refused in a dialog before it starts, and an
allocation failure during the run reported as out of memory with the numbers."""
# The shared fixtures are imported by name, which pyflakes reads as a redefinition:
# ruff: noqa: F811

from __future__ import annotations

import pytest
from fixtures_app import (  # noqa: F401 - fixtures
    isolated_settings,
    make_lab,
    small,
)

from gradviz.core.lab import memory
from gradviz.gui.run.session import RunState

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pyqtgraph")

WAIT_MS = 120_000  # torch imports on a worker thread: be generous on a shared machine

CPU_OOM = (
    "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: "
    "you tried to allocate 1600000000 bytes. Error code 12 (Cannot allocate memory)"
)


def test_a_run_that_does_not_fit_is_refused_in_a_dialog_with_both_numbers(
    qtbot, make_lab, monkeypatch
):
    monkeypatch.setenv(memory.ENV_LIMIT, "1K")
    lab = make_lab(small("safe", n=200), wait_ready=False)
    qtbot.waitUntil(lambda: lab.error_dialog is not None, timeout=WAIT_MS)
    sentence = lab.error_dialog.sentence
    assert "A run of 200 points with the safe method in float32 needs about" in sentence
    assert "but only 1 kB is available on this computer; use fewer points." in sentence
    # Refused before it starts: no worker, nothing on screen, Start asks again.
    assert lab.session.worker is None and lab.session.latest is None
    assert lab.session.state is RunState.IDLE
    lab.error_dialog.close()
    lab.error_dialog = None
    lab.window.actions["start"].trigger()
    assert lab.error_dialog is not None and "needs about" in lab.error_dialog.sentence
    assert lab.session.worker is None and not lab.session.workers()
    lab.error_dialog.close()


def test_an_allocation_failure_mid_run_ends_in_an_out_of_memory_dialog(
    qtbot, make_lab, monkeypatch
):
    from gradviz.core.lab import fit_pass

    real = fit_pass.pairwise_distances
    calls = []

    def fail_on_the_sixth(x, method="safe"):
        calls.append(1)
        if len(calls) == 6:
            raise RuntimeError(CPU_OOM)
        return real(x, method)

    monkeypatch.setattr(fit_pass, "pairwise_distances", fail_on_the_sixth)
    lab = make_lab(small("safe"))
    lab.start()
    qtbot.waitUntil(lambda: lab.error_dialog is not None, timeout=WAIT_MS)
    sentence = lab.error_dialog.sentence
    assert "The run ran out of memory after step" in sentence
    assert "an allocation of 1.6 GB failed" in sentence
    assert lab.session.state is RunState.FAILED
    shown = lab.session.shown
    assert shown is not None and shown.step >= 1  # the last good state stays on screen
    labels = lab.window.status_labels
    assert labels["state"].text() == "failed"
    assert labels["nan"].text() == "run failed (out of memory)"
    lab.error_dialog.close()


def _live_tensors_with(side: int) -> int:
    """torch tensors alive in this process with a dimension of ``side`` (an (N, N) matrix or
    (N, D) coordinates of a run of N = ``side`` points)."""
    import gc

    import torch

    gc.collect()
    return sum(
        1
        for o in gc.get_objects()
        if issubclass(type(o), torch.Tensor) and side in tuple(o.shape)  # no isinstance:
        # it asks torch's deprecated module objects for __class__, which warns
    )


def test_a_reset_to_fewer_points_frees_the_old_run_and_its_snapshots(qtbot, make_lab):
    import gc
    import weakref

    from gradviz.core.lab.fit import DistanceFitRun

    runs: list[weakref.ref] = []

    def tracked_run(config):
        run = DistanceFitRun(config, max_display=2048)
        runs.append(weakref.ref(run))
        return run

    big, smaller = 1_111, 100  # sizes no other object of the test process has
    lab = make_lab(small("safe", n=big), run_factory=tracked_run)
    lab.start()
    qtbot.waitUntil(lambda: lab.session.latest.step >= 2, timeout=WAIT_MS)
    old_matrix = weakref.ref(lab.session.latest.distances)  # (1111, 1111) on screen
    assert _live_tensors_with(big) > 0

    lab.form.param("n").setValue(smaller)  # a new N resets the run (the question says yes)
    qtbot.waitUntil(
        lambda: lab.session.latest is not None and lab.session.latest.n_points == smaller,
        timeout=WAIT_MS,
    )
    qtbot.waitUntil(lambda: len(lab.session.workers()) == 1, timeout=WAIT_MS)
    gc.collect()
    assert runs[0]() is None  # the old run is gone, with its (N, N) tensors
    assert old_matrix() is None  # and no view, pin or session still holds its snapshots
    assert _live_tensors_with(big) == 0
    assert runs[-1]() is not None  # the new run lives
