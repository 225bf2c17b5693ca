"""The process a trusted program runs in: forked by the program launcher
(``serve``), or where there is none ``python -m gradviz.core.modelio.program_child READ_FD
WRITE_FD MEMORY_BYTES``; started by program_process, never by hand.

Its data limit (``RLIMIT_DATA``) is set before the program's file is read (torch itself,
some 0.2-0.3 GiB, is counted in it), so every allocation of the program (a tensor, a Python
list) counts against it and one past it fails with ENOMEM, which is reported as the memory
limit. Requests come as ``(op, args)`` on READ_FD; each
reply is ``("ok", value)``, ``("error", sentence)`` or ``("memory", (asked, held))`` on
WRITE_FD: the bytes the failed allocation asked for (None where the error does not say) and
the bytes the process held then.
Arrays travel as numpy arrays. The program's own prints go to stderr, never into the
replies."""

from __future__ import annotations

import os
import re
import resource
import sys
from multiprocessing.connection import Connection
from typing import Any

_ASKED = re.compile(r"tried to allocate (\d+) bytes")
#: Words of an allocation that failed, in torch's message or Python's.
_OUT_OF_MEMORY = ("can't allocate memory", "Cannot allocate memory", "std::bad_alloc")


def main(argv: list[str]) -> int:
    read_fd, write_fd, memory = (int(a) for a in argv)
    return serve(read_fd, write_fd, memory)


def serve(read_fd: int, write_fd: int, memory: int) -> int:
    """Answer requests on the two pipe ends within ``memory`` bytes of data, until the
    parent closes its end; the exit status."""
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    os.dup2(2, 1)  # the program may print; stdout is the parent's stderr
    requests, replies = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    server = _Server()
    replies.send(("ok", "ready"))
    while True:
        try:
            op, args = requests.recv()
        except EOFError:  # the parent closed the pipe or is gone
            return 0
        reply = server.answer(op, args)
        try:
            replies.send(reply)
        except Exception as exc:  # noqa: BLE001 - a value that cannot travel is one sentence
            replies.send(("error", f"The program's answer could not be sent back ({exc})."))


class _Server:
    """Holds the one program this process runs and answers requests on it."""

    def __init__(self) -> None:
        self.model: Any = None
        self.in_dtype: dict[Any, Any] = {}  # the model moved to each dtype asked for

    def answer(self, op: str, args: tuple) -> tuple[str, Any]:
        from gradviz.core.common.errors import GradvizError

        try:
            return "ok", getattr(self, "_" + op)(*args)
        except BaseException as exc:  # noqa: BLE001 - every failure becomes a reply
            if _out_of_memory(exc):
                return "memory", (_asked_bytes(exc), _held_bytes())
            if isinstance(exc, GradvizError):
                return "error", str(exc)
            return "error", f"The program failed ({type(exc).__name__}: {_first_line(exc)})."

    def _open(self, kind: str, data: bytes, base: Any) -> tuple:
        """Load the program: (info, probe batch, names of modules found in training mode,
        floating dtype name)."""
        from gradviz.core.modelio import programs
        from gradviz.core.modelio.loading import _eval_mode, _float_dtype

        opener = programs._open_torchscript if kind == "torchscript" else programs._open_exported
        opened = opener(data, base)
        del data
        self.model = opened.build()
        trained = _eval_mode(self.model)
        dtype = str(_float_dtype(self.model)).removeprefix("torch.")
        return opened.info, opened.probe_batch, trained, dtype

    def _graph(self, format_name: str, name: str, data: bytes) -> Any:
        """The program's graph (gradviz.core.graph.sources), the program then dropped."""
        from gradviz.core.graph.sources import graph_of_program_here

        return graph_of_program_here(format_name, name, data)

    def _check(self, width: int | None, name: str) -> None:
        """From now on, run the program checked (wrong widths, failures, non-tensor
        outputs become sentences)."""
        from gradviz.core.modelio.guard import CheckedModel

        self.model = CheckedModel(self.model, width, name)
        self.in_dtype.clear()

    def _forward(self, x) -> Any:
        import torch

        with torch.no_grad():
            return self._run(self._tensor(x)).numpy()

    def _vjp(self, x, grad_y) -> Any:
        import torch

        with torch.enable_grad():
            inputs = self._tensor(x).requires_grad_(True)
            y = self._run(inputs)
            (grad,) = torch.autograd.grad(y, inputs, torch.from_numpy(grad_y), allow_unused=True)
        return (torch.zeros_like(inputs) if grad is None else grad).detach().numpy()

    def _jacobians(self, x, method: str, in_shape: tuple[int, ...] | None) -> tuple:
        from gradviz.core.nets.jacobians import compute_jacobians

        result = compute_jacobians(self._model_for(x, in_shape), self._tensor(x), method)
        return (
            result.jacobians.detach().numpy(),
            result.outputs.detach().numpy(),
            result.method,
            result.reason,
        )

    def _full(self, x, in_shape: tuple[int, ...] | None) -> Any:
        from gradviz.core.nets.jacobians import full_batch_jacobian

        return full_batch_jacobian(self._model_for(x, in_shape), self._tensor(x)).numpy()

    def _histograms(self, x, loss: str, target, bins: int, in_shape) -> Any:
        from gradviz.core.explorer.histograms import parameter_gradient_histograms

        model = self._model_for(x, in_shape)
        return parameter_gradient_histograms(model, self._tensor(x), loss, target, bins)

    def _model_for(self, x, in_shape: tuple[int, ...] | None) -> Any:
        model = self._in_dtype(self._tensor(x).dtype)
        if in_shape is None:
            return model
        from gradviz.core.explorer.input_gradients import flattened

        return flattened(model, in_shape)

    def _run(self, x) -> Any:
        return self._in_dtype(x.dtype)(x)

    def _tensor(self, x) -> Any:
        import torch

        return torch.from_numpy(x)

    def _in_dtype(self, dtype: Any) -> Any:
        """The program in the inputs' floating dtype (the parent moved its stand-in there,
        as ``module.to(dtype)`` moves a program run in-process), each dtype a copy of the
        program as loaded (a float64 program run in float32 keeps its float64 weights)."""
        from gradviz.core.modelio.loading import _float_dtype
        from gradviz.core.nets.networks import module_copy

        if _float_dtype(self.model) == dtype:
            return self.model
        if dtype not in self.in_dtype:
            self.in_dtype[dtype] = module_copy(self.model, dtype)
        return self.in_dtype[dtype]


def _out_of_memory(exc: BaseException | None) -> bool:
    """Whether ``exc`` or an exception it was raised while handling is a failed
    allocation (gradviz's sentences keep torch's error as their context)."""
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, MemoryError) or any(w in str(exc) for w in _OUT_OF_MEMORY):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _asked_bytes(exc: BaseException | None) -> int | None:
    """The size of torch's failed allocation ("you tried to allocate N bytes"), else None."""
    seen = 0
    while exc is not None and seen < 20:
        found = _ASKED.search(str(exc))
        if found:
            return int(found.group(1))
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def _held_bytes() -> int:
    """The process's data size (VmData, what RLIMIT_DATA bounds), in bytes; 0 if unknown."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__).rstrip(".")[:300]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
