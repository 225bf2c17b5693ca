"""The process that starts trusted programs' processes, with torch already imported.

Why: a trusted program's process used to be a fresh interpreter each time, and each spent
some 1.3 s importing torch and 1.2 s more importing what ``torch.export.load`` needs before
the program's first byte was read: every open of a TorchScript or ``.pt2`` file waited
seconds. The launcher is one fresh interpreter (``python -m
gradviz.core.modelio.program_launcher SOCKET_FD``, nothing of the app forked into it) that
imports them once and then forks a process for each program on request: the fork starts in
milliseconds with torch loaded. Each forked process sets its own data limit and serves its
program (``program_child.serve``); it keeps none of the launcher's descriptors but its own
two pipe ends, so one program cannot read or answer another's pipe.

The launcher starts no thread before it forks (OpenBLAS is asked for one thread, torch runs
no operation), so a fork inherits no lock held by another thread.

The app talks to it through a Unix socket of datagrams: ``{"start": MEMORY_BYTES}`` with the
program's two pipe ends (the reply is ``{"pid": PID}``) and ``{"kill": PID}``. The launcher
keeps a copy of each program's reply pipe and, when the program's process ends, writes
``("ended", EXIT_CODE)`` there, so the app learns how it ended though it is not its child.
The socket's end (the app exited or closed it) kills every program and ends the launcher.

Linux only (``os.pidfd_open``); elsewhere ``Launcher.supported()`` is False and a program
gets a fresh interpreter of its own (program_process).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection

#: Preloaded by the launcher: what a program's process would import before it could read
#: the file (torch, ``torch.export.load``'s serializer, the loaders here).
PRELOAD = (
    "torch",
    "torch._export.serde.serialize",
    "gradviz.core.modelio.programs",
    "gradviz.core.modelio.loading",
    "gradviz.core.modelio.guard",
    "gradviz.core.nets.jacobians",
)
_MESSAGE_BYTES = 4096
#: How often a wait for the launcher's start looks at the caller's cancel flag.
_POLL_SECONDS = 0.05


class LaunchCancelled(Exception):
    """The caller cancelled while the launcher was still starting."""


# ---- the app's side --------------------------------------------------------------------------
class Launcher:
    """The app's handle on its launcher process, started by the first ``start``; one per
    process (``shared()``), used from any thread."""

    _shared: Launcher | None = None
    _shared_lock = threading.Lock()

    @staticmethod
    @functools.cache
    def supported() -> bool:
        """Whether this system has what the launcher needs: Linux's pidfds (kernel 5.3)."""
        if not (sys.platform.startswith("linux") and hasattr(os, "pidfd_open")):
            return False
        try:
            os.close(os.pidfd_open(os.getpid()))
        except OSError:
            return False
        return True

    @classmethod
    def shared(cls) -> Launcher:
        with cls._shared_lock:
            if cls._shared is None or not cls._shared.alive():
                if cls._shared is not None:
                    cls._shared.close()  # it died, and its programs with it
                else:
                    atexit.register(cls._close_shared)
                cls._shared = Launcher()
            return cls._shared

    @classmethod
    def _close_shared(cls) -> None:
        """At exit: the launcher ends, and every program with it."""
        with cls._shared_lock:
            if cls._shared is not None:
                cls._shared.close()
                cls._shared = None

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socket, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._process = subprocess.Popen(
            [sys.executable, "-m", __name__, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            env=child_environment(OPENBLAS_NUM_THREADS="1"),  # no BLAS threads before a fork
            stdin=subprocess.DEVNULL,
            stdout=stderr_fd(),
        )
        theirs.close()
        self._ready = False

    def alive(self) -> bool:
        return self._process.poll() is None

    def start(self, fds: tuple[int, int], memory_bytes: int, timeout: float, cancel=None) -> int:
        """Fork a program's process that serves requests on ``fds`` (its read and write
        pipe ends) within ``memory_bytes``; its pid. Raises OSError where the launcher
        failed or did not answer within ``timeout`` seconds (its start included), and
        LaunchCancelled where ``cancel`` (an object with ``is_set()``) was set while the
        launcher was still starting (it goes on starting for the next program)."""
        with self._lock:
            try:
                if not self._ready:
                    self._wait_ready(timeout, cancel)
                self._socket.settimeout(timeout)
                socket.send_fds(self._socket, [json.dumps({"start": memory_bytes}).encode()], fds)
                return int(self._expect("pid"))
            except (OSError, ValueError) as exc:
                self.close()
                raise OSError(f"the program launcher failed ({exc})") from exc

    def _wait_ready(self, timeout: float, cancel) -> None:
        deadline = time.monotonic() + timeout
        self._socket.settimeout(_POLL_SECONDS)
        while True:
            try:
                self._expect("ready")
            except TimeoutError:
                if cancel is not None and cancel.is_set():
                    raise LaunchCancelled() from None
                if time.monotonic() > deadline:
                    raise
                continue
            self._ready = True
            return

    def kill(self, pid: int) -> None:
        """Kill the program's process ``pid`` (one this launcher started); no wait."""
        # Where the launcher is gone (OSError), its programs went with it.
        with self._lock, contextlib.suppress(OSError):
            self._socket.send(json.dumps({"kill": pid}).encode())

    def close(self) -> None:
        """End the launcher: the socket's end makes it kill its programs and exit."""
        self._socket.close()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def _expect(self, key: str):
        message = self._socket.recv(_MESSAGE_BYTES)
        if not message:
            raise OSError("it ended")
        return json.loads(message)[key]


def child_environment(**extra: str) -> dict[str, str]:
    """This process's environment for a gradviz child interpreter, with ``extra``: the
    folder gradviz is imported from first on ``PYTHONPATH``, so the child runs this
    gradviz whatever its working folder."""
    import gradviz

    root = os.path.dirname(os.path.dirname(os.path.abspath(gradviz.__file__)))
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def stderr_fd():
    """Where a program's prints go: this process's standard error, where it has one."""
    try:
        return sys.__stderr__.fileno()  # type: ignore[union-attr]
    except (AttributeError, OSError, ValueError):
        return subprocess.DEVNULL


# ---- the launcher's side ---------------------------------------------------------------------
class _Programs:
    """The program processes the launcher started: pid -> (pidfd, its reply pipe end)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.running: dict[int, tuple[int, int]] = {}

    def start(self, memory_bytes: int, fds: list[int]) -> int:
        read_fd, write_fd = fds
        pid = os.fork()
        if pid == 0:
            self._become_program(read_fd, write_fd, memory_bytes)
        os.close(read_fd)
        self.running[pid] = (os.pidfd_open(pid), write_fd)
        return pid

    def _become_program(self, read_fd: int, write_fd: int, memory_bytes: int) -> None:
        code = 1
        try:
            self.sock.close()
            for pidfd, reply_fd in self.running.values():  # other programs' ends
                os.close(pidfd)
                os.close(reply_fd)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            from gradviz.core.modelio import program_child

            code = program_child.serve(read_fd, write_fd, memory_bytes)
        finally:
            os._exit(code)

    def kill(self, pid: int) -> None:
        if pid in self.running:  # not yet reaped: the pidfd names this very process
            signal.pidfd_send_signal(self.running[pid][0], signal.SIGKILL)

    def reap(self, pidfd: int) -> None:
        """The process of ``pidfd`` ended: tell its reply pipe how, and forget it."""
        pid = next(p for p, (fd, _) in self.running.items() if fd == pidfd)
        _, status = os.waitpid(pid, 0)
        pidfd, reply_fd = self.running.pop(pid)
        os.close(pidfd)
        ended = Connection(reply_fd, readable=False)
        # Written only where the pipe has room (a pipe is writable with a page free, and
        # the message is shorter: one write that cannot block), so a pipe the app left
        # full never stalls the launcher; the end is still seen, as the pipe's end. The
        # pipe stays blocking: its flags are the program's too. OSError: the app closed it.
        if select.select([], [reply_fd], [], 0)[1]:
            with contextlib.suppress(OSError):
                ended.send(("ended", os.waitstatus_to_exitcode(status)))
        ended.close()

    def kill_all(self) -> None:
        for pid in list(self.running):
            self.kill(pid)
        for pid in list(self.running):
            os.waitpid(pid, 0)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the app's Ctrl+C is the app's to handle
    sock = socket.socket(fileno=int(argv[0]))
    for name in PRELOAD:
        # ImportError: a torch without that module; its programs import what they need.
        with contextlib.suppress(ImportError):
            __import__(name)
    sock.send(json.dumps({"ready": True}).encode())
    programs = _Programs(sock)
    while True:
        pidfds = [pidfd for pidfd, _ in programs.running.values()]
        readable, _, _ = select.select([sock, *pidfds], [], [])
        for pidfd in readable:
            if pidfd is not sock:
                programs.reap(pidfd)
        if sock in readable and not _answer(sock, programs):
            programs.kill_all()
            return 0


def _answer(sock: socket.socket, programs: _Programs) -> bool:
    """Answer one request; False once the app has closed the socket."""
    message, fds, _flags, _address = socket.recv_fds(sock, _MESSAGE_BYTES, 2)
    if not message:
        return False
    request = json.loads(message)
    if "start" in request:
        pid = programs.start(int(request["start"]), fds)
        sock.send(json.dumps({"pid": pid}).encode())
    elif "kill" in request:
        programs.kill(int(request["kill"]))
    return True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
