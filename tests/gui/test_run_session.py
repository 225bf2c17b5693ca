"""The RunSession on its own: no window, no views, a fake run (no torch) on the real worker
threads. Its commands (start, pause, step, stop, reset) move its state, and what it says
(signals, the snapshot shown, the pinned first NaN) follows the run's steps."""

from __future__ import annotations

import numpy as np
import pytest
from fake_run import D, FakeRun, N
from PySide6.QtCore import QObject, Slot

from gradviz.core.lab.snapshot import Snapshot
from gradviz.core.settings.config import FitConfig
from gradviz.gui.run.session import RunSession, RunState

WAIT_MS = 30_000


class Heard(QObject):
    """Everything the session says: its states, the (generation, step) of each snapshot
    shown, the clears and the pins."""

    def __init__(self, session: RunSession) -> None:
        super().__init__()
        self.states: list[RunState] = []
        self.shown: list[tuple[int, int]] = []
        self.cleared = 0
        self.pinned: list[int | None] = []
        session.stateChanged.connect(self._on_state)
        session.snapshotShown.connect(self._on_shown)
        session.cleared.connect(self._on_cleared)
        session.pinnedChanged.connect(self._on_pinned)

    @Slot(object)
    def _on_state(self, state: RunState) -> None:
        self.states.append(state)

    @Slot(object)
    def _on_shown(self, snapshot: Snapshot) -> None:
        self.shown.append((snapshot.generation, snapshot.step))

    @Slot()
    def _on_cleared(self) -> None:
        self.cleared += 1

    @Slot(object)
    def _on_pinned(self, snapshot: Snapshot | None) -> None:
        self.pinned.append(None if snapshot is None else snapshot.step)


def config(steps: int = 100_000) -> FitConfig:
    return FitConfig(target="helix", n=N, dim=D, method="safe", steps=steps, seed=1)


@pytest.fixture
def made(qtbot):
    """``made(nan_at=None)``: a session of fake runs and what it says; shut down after."""
    sessions = []

    def make(nan_at: int | None = None):
        runs: list[FakeRun] = []

        def factory(cfg: FitConfig) -> FakeRun:
            runs.append(FakeRun(cfg, nan_at))
            return runs[-1]

        session = RunSession(factory)
        sessions.append(session)
        return session, Heard(session), runs

    yield make
    for session in sessions:
        assert session.shutdown(10.0)
        assert session.workers() == []


def _worker_idle(session: RunSession) -> bool:
    worker = session.worker
    return worker is not None and worker.idle.is_set()


def test_commands_move_the_state_and_the_snapshot_shown_follows_the_run(qtbot, made):
    session, heard, runs = made()
    assert session.state is RunState.IDLE and session.shown is None
    # Reset with settings: step 0 of a new generation, waiting for Start.
    session.reset(config())
    assert session.state is RunState.READY and heard.cleared == 1
    generation = session.generation
    qtbot.waitUntil(lambda: session.shown is not None, timeout=WAIT_MS)
    assert heard.shown == [(generation, 0)] and session.latest is session.shown
    # Start: running, frames of this generation, each later than the one before.
    session.start()
    assert session.state is RunState.RUNNING
    qtbot.waitUntil(lambda: session.latest.step >= 5, timeout=WAIT_MS)
    steps = [step for gen, step in heard.shown]
    assert {gen for gen, _ in heard.shown} == {generation}
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    # Pause: the loop stops between two steps and shows where the run stands.
    session.pause()
    assert session.state is RunState.PAUSED
    qtbot.waitUntil(lambda: _worker_idle(session), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: session.shown.step == runs[-1].completed_steps, timeout=WAIT_MS)
    held = runs[-1].completed_steps
    # Step once: exactly one more step, shown, still paused.
    session.step()
    qtbot.waitUntil(lambda: session.shown.step == held + 1, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: _worker_idle(session), timeout=WAIT_MS)
    assert runs[-1].completed_steps == held + 1 and session.state is RunState.PAUSED
    # The loss history the view would draw is the run's, step for step.
    np.testing.assert_array_equal(session.shown.loss_history, runs[-1].losses)
    # Stop: the last state stays on screen, the worker goes.
    shown = session.shown
    session.stop()
    assert session.state is RunState.STOPPED and session.worker is None
    assert session.shown is shown
    qtbot.waitUntil(lambda: session.workers() == [], timeout=WAIT_MS)
    # Reset again: a new generation, a new run, its step 0 on screen.
    session.reset(config())
    assert session.generation > generation and heard.cleared == 2
    qtbot.waitUntil(lambda: session.shown is not None, timeout=WAIT_MS)
    assert heard.shown[-1] == (session.generation, 0) and len(runs) == 2
    assert heard.states == [
        RunState.READY,
        RunState.RUNNING,
        RunState.PAUSED,
        RunState.PAUSED,  # Step once (it pauses first)
        RunState.STOPPED,
        RunState.READY,
    ]


def test_a_run_that_ends_finishes_and_its_last_step_stays_shown(qtbot, made):
    session, heard, runs = made()
    session.start(config(steps=12))  # no reset first: Start launches the settings given
    qtbot.waitUntil(lambda: session.state is RunState.FINISHED, timeout=WAIT_MS)
    assert session.worker is None and runs[-1].completed_steps == 12
    assert session.shown.step == 12 and session.shown.done
    assert heard.states[0] is RunState.RUNNING and heard.states[-1] is RunState.FINISHED


def test_a_frame_of_an_older_generation_never_reaches_the_screen(qtbot, made):
    session, heard, _ = made()
    session.start(config())
    qtbot.waitUntil(lambda: session.latest is not None, timeout=WAIT_MS)
    session.reset(config())  # the running worker retires; its late frames are dropped
    new = session.generation
    qtbot.waitUntil(lambda: session.shown is not None, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: len(session.workers()) == 1, timeout=WAIT_MS)  # the old joined
    after_reset = heard.shown[heard.shown.index((new, 0)) :]
    assert {gen for gen, _ in after_reset} == {new}


def test_the_first_nan_is_pinned_shown_on_request_and_left_for_the_live_step(qtbot, made):
    session, heard, _ = made(nan_at=2)
    session.reset(config())
    qtbot.waitUntil(lambda: session.shown is not None, timeout=WAIT_MS)
    for step in (1, 2, 3):  # single steps are always shown: the NaN step is one of them
        session.step()
        qtbot.waitUntil(lambda s=step: session.latest.step == s, timeout=WAIT_MS)
    assert heard.pinned[-1] == 3 and session.pinned.step == 3
    assert session.first_nonfinite_grad_step == 2  # the CLI's 0-based step
    session.step()
    qtbot.waitUntil(lambda: session.latest.step == 4, timeout=WAIT_MS)
    assert session.pinned.step == 3  # the first one stays pinned
    session.show_first_nan()
    assert session.viewing_pinned and session.shown is session.pinned
    assert heard.shown[-1] == (session.generation, 3)
    session.show_live()
    assert not session.viewing_pinned and session.shown is session.latest
    # A reset unpins.
    session.reset(config())
    assert session.pinned is None and heard.pinned[-1] is None


def test_learning_rate_changes_reach_the_run_and_the_settings_it_runs_with(qtbot, made):
    session, _, runs = made()
    session.reset(config())
    qtbot.waitUntil(lambda: session.shown is not None, timeout=WAIT_MS)
    session.set_lr(0.5)
    assert session.settings_now.lr == 0.5 and session.config.lr == config().lr
    session.step()  # the rate is applied before the next step
    qtbot.waitUntil(lambda: runs[-1].lrs == [0.5], timeout=WAIT_MS)


def test_nothing_starts_while_unavailable_held_or_closed(qtbot, made):
    session, heard, runs = made()
    session.set_available(False)
    assert session.state is RunState.UNAVAILABLE and not session.available
    session.start(config())
    session.step(config())
    assert runs == [] and session.worker is None
    session.set_available(True)
    session.set_held(True)
    session.start(config())
    assert runs == [] and session.worker is None
    session.set_held(False)
    assert session.shutdown(10.0)
    session.start(config())
    assert runs == [] and session.worker is None
    assert RunState.RUNNING not in heard.states
