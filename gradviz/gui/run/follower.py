"""Opening a recording and following it while it is written, all reading off the GUI thread.

A ``RecordingSource`` reads the recording once, then, until its writer marks it complete,
polls ``Reader.refresh()`` every ``POLL_MS`` on a task thread and re-reads it when steps
or logged scalars were added. One read is in flight at a time (a Reader is not shared
between threads). A stream that is not complete and has not grown (no step, no scalar) for
``STALL_S`` seconds is shown as incomplete (its writer stopped or died): a state, not an
error; polling goes on slowly in case it resumes.
"""

from __future__ import annotations

import enum
import time

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from gradviz.core.common.errors import GradvizError
from gradviz.core.record.reader import Reader
from gradviz.core.record.recording_data import RecordingData, read_recording
from gradviz.gui.common.background import BackgroundTasks
from gradviz.gui.common.failures import describe_failure

#: How often a recording still being written is polled (ms).
POLL_MS = 500
#: A stream that has not grown for this long (and is not complete) is "incomplete" (s).
STALL_S = 3.0
#: Poll interval once a stream looks stalled (ms).
STALLED_POLL_MS = 2000


class FollowState(enum.Enum):
    """Where an opened recording stands; ``label`` is what the timeline says."""

    READING = "reading…"
    FOLLOWING = "following"  # the writer is (or may be) still adding steps
    COMPLETE = "complete"
    INCOMPLETE = "incomplete (writer stopped)"
    DAMAGED = "damaged"  # opened, but data is lost: the label then names the steps
    FAILED = "could not be read"

    @property
    def label(self) -> str:
        return self.value


class RecordingSource(QObject):
    """One opened recording: ``loaded(RecordingData)`` on each read that found something
    new, ``stateChanged(FollowState)``, ``failed(sentence, details)``."""

    loaded = Signal(object)
    stateChanged = Signal(object)
    failed = Signal(str, str)

    def __init__(self, path: str, parent: QObject | None = None, read=read_recording) -> None:
        """``read(reader, rank)`` turns the recording into what is shown (``RecordingData``
        by default; anything with its ``n_steps``, ``rank``, ``complete``, ``meta`` and
        ``damaged``), on the task thread."""
        super().__init__(parent)
        self.path = path
        self._read_data = read
        self.rank: int | None = None
        self.data: RecordingData | None = None
        self._state = FollowState.READING
        self._reader: Reader | None = None
        self._busy = False
        self._closed = False
        self._generation = 0
        self._last_growth = time.monotonic()
        self._tasks = BackgroundTasks(self)
        self._tasks.succeeded.connect(self._on_finished)
        self._tasks.failed.connect(self._on_failed)
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._poll)

    @property
    def state(self) -> FollowState:
        return self._state

    def start(self) -> None:
        """Read the recording (on a task thread)."""
        self._read(force=True)

    def set_rank(self, rank: int) -> None:
        """Show ``rank`` instead (re-read on a task thread)."""
        if rank != self.rank:
            self.rank = rank
            self._generation += 1
            # The read in flight is for the old rank: its result is dropped, and the new
            # read opens a Reader of its own (a Reader is never shared between threads).
            self._busy = False
            self._reader = None
            self._read(force=True)

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop polling and wait for a read in flight."""
        self._closed = True
        self._timer.stop()
        self._tasks.shutdown(timeout_s)

    def _read(self, force: bool) -> None:
        if self._busy or self._closed:
            return
        self._busy = True
        path, rank, previous, read = self.path, self.rank, self._reader, self._read_data

        def work():
            try:
                reader = previous if previous is not None else Reader(path)
                changed = reader.refresh() if previous is not None else True
                # ``changed`` is the growth test: a writer that logs scalars between
                # recorded steps is still writing, though what is shown may not change.
                return reader, (read(reader, rank) if changed or force else None), changed
            except (GradvizError, MemoryError, OSError):
                raise
            except Exception as exc:  # a damaged recording: say so, not "not a model"
                raise GradvizError(
                    f"gradviz could not read the recording {path!r} ({type(exc).__name__}: "
                    f"{exc}). It may be damaged; the details say more."
                ) from exc

        self._tasks.submit(self._generation, "recording", work, lambda exc: _describe(exc, path))

    @Slot()
    def _poll(self) -> None:
        self._read(force=False)

    @Slot(int, str, object)
    def _on_finished(self, generation: int, _kind: str, value: object) -> None:
        if generation != self._generation or self._closed:
            return
        self._busy = False
        self._reader, data, changed = value  # type: ignore[misc]
        now = time.monotonic()
        if changed:
            self._last_growth = now
        if data is not None:
            grew = self.data is None or data.n_steps != self.data.n_steps
            if grew or data.rank != self.data.rank or data.complete != self.data.complete:
                self._last_growth = now
            self.data = data
            self.rank = data.rank
            self.loaded.emit(data)
        self._update_state(now)

    def _update_state(self, now: float) -> None:
        data = self.data
        if data is None:
            return
        written = bool(data.meta.get("complete", data.complete))  # the writer is done
        if data.damaged:
            state = FollowState.DAMAGED
            if written:
                self._timer.stop()
        elif data.complete:
            state = FollowState.COMPLETE
            self._timer.stop()
        elif now - self._last_growth > STALL_S:
            state = FollowState.INCOMPLETE
            self._timer.setInterval(STALLED_POLL_MS)
        else:
            state = FollowState.FOLLOWING
            self._timer.setInterval(POLL_MS)
        if not written and not self._timer.isActive():
            self._timer.start()
        if state is not self._state:
            self._state = state
            self.stateChanged.emit(state)

    @Slot(int, str, str, str)
    def _on_failed(self, generation: int, _kind: str, sentence: str, details: str) -> None:
        if generation != self._generation or self._closed:
            return
        self._busy = False
        self._timer.stop()
        if self._state is not FollowState.FAILED:  # never "reading…" forever
            self._state = FollowState.FAILED
            self.stateChanged.emit(FollowState.FAILED)
        self.failed.emit(sentence, details)


def _describe(exc: BaseException, path: str) -> str:
    return describe_failure(
        exc,
        f"gradviz could not read the recording {path!r}",
        f"There was not enough memory to read the recording {path!r}.",
    )
