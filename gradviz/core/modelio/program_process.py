"""Trusted programs (TorchScript, ``.pt2``) run in a process of their own, within limits.

``ProgramProcess`` has the program launcher fork a process for the program (a fresh
interpreter that has imported torch and nothing of this process, Qt included: see
program_launcher), or where there is no launcher starts ``python -m
gradviz.core.modelio.program_child`` for it; it sends that process requests
through a pipe and waits for each reply at most the time limit; past it, or when the
caller's ``cancel`` is set, the process is killed and the step fails with one sentence. The
child's data limit bounds its memory (see program_child). ``RemoteProgram`` is the module
the rest of gradviz runs: its forward and backward passes and its Jacobians are computed in
the child and come back as arrays.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import weakref
from multiprocessing import Pipe
from typing import Any

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio.program_launcher import (
    LaunchCancelled,
    Launcher,
    child_environment,
    stderr_fd,
)
from gradviz.core.settings.program_limits import GIB, ProgramLimits, gib_words, seconds_words

#: Seconds the child may take to start (Python and torch imported, nothing of the file).
STARTUP_SECONDS = 300.0
#: How often a wait looks at the caller's cancel flag.
_POLL_SECONDS = 0.05


class ProgramCancelled(GradvizError):
    """The caller cancelled the step under way; the program's process was stopped."""


class ProgramProcess:
    """One child process that holds one trusted program (``name``: the file, for messages)."""

    def __init__(self, limits: ProgramLimits, name: str) -> None:
        self.limits = limits
        self.name = name
        self.stopped: str | None = None  # why the process was stopped, once it was
        self._one_at_a_time = threading.Lock()  # copies of a program share its process
        requests_r, self._requests = Pipe(duplex=False)
        self._replies, replies_w = Pipe(duplex=False)
        fds = (requests_r.fileno(), replies_w.fileno())
        try:
            self._child: _Child = _start(fds, limits)
        except LaunchCancelled:
            raise ProgramCancelled(
                f"Running the program in {name} was cancelled before its process started."
            ) from None
        finally:
            requests_r.close()
            replies_w.close()
        self._finalizer = weakref.finalize(self, self._child.kill)
        self._wait("start", STARTUP_SECONDS)

    def request(self, op: str, *args: Any) -> Any:
        """The child's answer to ``op`` (see program_child), within the time limit (threads
        take turns: the wait for a turn is not counted)."""
        with self._one_at_a_time:
            return self._request(op, args)

    def _request(self, op: str, args: tuple) -> Any:
        if self.stopped is not None:
            raise GradvizError(
                f"The program in {self.name} was stopped earlier ({self.stopped}); open the "
                "model again to run it."
            )
        try:
            self._requests.send((op, args))
        except OSError:
            self._stop("its process had ended")
            raise GradvizError(f"The process running the program in {self.name} ended.") from None
        return self._wait(op, self.limits.time_limit)

    def close(self) -> None:
        """Stop the process (the program is dropped)."""
        self._stop("it was closed")

    def _wait(self, op: str, seconds: float) -> Any:
        deadline = time.monotonic() + seconds
        cancel = self.limits.cancel
        while not self._replies.poll(_POLL_SECONDS):
            if cancel is not None and cancel.is_set():
                self._stop("it was cancelled")
                raise ProgramCancelled(
                    f"Running the program in {self.name} was cancelled; its process was stopped."
                )
            if time.monotonic() > deadline:
                self._stop(f"it ran past the {seconds_words(seconds)} limit")
                if op == "start":
                    raise GradvizError(
                        f"The process to run the program in {self.name} did not start within "
                        f"{seconds_words(seconds)}."
                    )
                raise GradvizError(
                    f"The program in {self.name} ran past the {seconds_words(seconds)} limit "
                    "and was stopped (--time-limit)."
                )
        try:
            status, value = self._replies.recv()
        except (EOFError, OSError):
            return self._ended(self._child.exit_code())
        if status == "ended":  # the launcher's word: the process ended before it answered
            return self._ended(value)
        if status == "memory":
            self._stop("it ran out of memory")
            raise GradvizError(memory_sentence(self.name, self.limits, *value))
        if status == "error":
            raise GradvizError(value)
        return value

    def _ended(self, code: int | None) -> Any:
        self._stop("its process had ended")
        how = ""
        if code is not None:
            how = f" by signal {-code}" if code < 0 else f" with exit status {code}"
        raise GradvizError(
            f"The process running the program in {self.name} ended{how} before it answered."
        )

    def _stop(self, why: str) -> None:
        if self.stopped is None:
            self.stopped = why
        self._finalizer()
        self._requests.close()
        self._replies.close()


def memory_sentence(name: str, limits: ProgramLimits, asked: int | None, held: int) -> str:
    """Why the program's process was stopped for memory: past the limit or, where the failed
    allocation (``asked`` bytes, with ``held`` bytes held) stayed within it, because this
    machine had no more to give."""
    limit = gib_words(limits.memory_limit)
    if asked is not None and held and asked + held <= limits.memory_bytes:
        return (
            f"The program in {name} ran out of memory asking for "
            f"{gib_words(round(asked / GIB, 2))} with {gib_words(round(held / GIB, 2))} held, "
            f"below the {limit} limit (--memory-limit): this machine had no more to give, and "
            "the process was stopped."
        )
    return f"The program in {name} asked for more than {limit} and was stopped (--memory-limit)."


class _Child:
    """A program's process: killed by ``kill``; ``exit_code`` once it has ended (negative:
    the signal), None where unknown."""

    def kill(self) -> None:
        raise NotImplementedError

    def exit_code(self) -> int | None:
        raise NotImplementedError


class _Forked(_Child):
    """A process the launcher forked (it is the launcher's child, not this process's)."""

    def __init__(self, launcher: Launcher, pid: int) -> None:
        self.launcher, self.pid = launcher, pid

    def kill(self) -> None:
        self.launcher.kill(self.pid)

    def exit_code(self) -> int | None:
        return None  # the launcher says it (an "ended" reply) where it still can


class _Interpreter(_Child):
    """A fresh interpreter of this process's own, where there is no launcher."""

    def __init__(self, fds: tuple[int, int], memory_bytes: int) -> None:
        command = [sys.executable, "-m", "gradviz.core.modelio.program_child"]
        self.process = subprocess.Popen(
            [*command, *map(str, fds), str(memory_bytes)],
            pass_fds=fds,
            env=child_environment(),
            stdin=subprocess.DEVNULL,
            stdout=stderr_fd(),
        )

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def exit_code(self) -> int | None:
        return self.process.wait()


def warm_up() -> None:
    """Start the launcher now, without waiting for it, where a program is likely to run
    soon (the app asks whether to trust one): its imports overlap the user's reading."""
    if Launcher.supported():
        Launcher.shared()


def _start(fds: tuple[int, int], limits: ProgramLimits) -> _Child:
    """The program's process within ``limits``, serving requests on ``fds``: forked by the
    launcher, or a fresh interpreter where there is none or it failed."""
    if Launcher.supported():
        try:
            launcher = Launcher.shared()
            pid = launcher.start(fds, limits.memory_bytes, STARTUP_SECONDS, limits.cancel)
            return _Forked(launcher, pid)
        except OSError:
            pass  # the next program gets a new launcher; this one an interpreter
    return _Interpreter(fds, limits.memory_bytes)
