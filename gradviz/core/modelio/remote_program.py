"""``RemoteProgram``: a trusted program that runs in its own process (program_process), as a
module the rest of gradviz runs like any other.

Its forward pass sends the inputs to the program's process and returns the outputs; its
backward pass asks that process for the vector-Jacobian product, so autograd through it is
exact. Whole Jacobian computations (``compute_jacobians``, ``full_batch_jacobian``) run in
that process at once (``run_elsewhere``): their batched backward passes cannot cross a pipe.
The one parameter is an empty tensor that carries the dtype the program runs in, so that
``module.to(torch.float64)`` moves the program as it would move one run in-process.
"""

from __future__ import annotations

import numpy as np
import torch

from gradviz.core.modelio.program_process import ProgramProcess


class RemoteProgram(torch.nn.Module):
    """The program held by ``process``; ``trained`` names its modules that were in training
    mode when loaded (it runs in eval mode)."""

    def __init__(self, process: ProgramProcess, trained: list[str], dtype: str) -> None:
        super().__init__()
        self.process = process
        self.name = process.name
        self.trained = list(trained)
        self.dtype_carrier = torch.nn.Parameter(
            torch.empty(0, dtype=getattr(torch, dtype)), requires_grad=False
        )
        self.eval()

    def __deepcopy__(self, memo: dict) -> RemoteProgram:
        """Another module for the same program and process (the program is run in eval
        mode and never changed; each copy keeps its own dtype)."""
        copy = RemoteProgram(self.process, self.trained, str(self.dtype_carrier.dtype)[6:])
        copy.name = self.name
        return copy

    def checked(self, width: int | None, name: str) -> RemoteProgram:
        """The program, from now on run so that a wrong input width, a failure or an
        output that is not a tensor is a sentence (guard.CheckedModel, in its process)."""
        self.process.request("check", width, name)
        self.name = name
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ThroughProcess.apply(x.to(self.dtype_carrier.dtype), self.process)

    def run_elsewhere(
        self, name: str, inputs: torch.Tensor, *args, in_shape: tuple[int, ...] | None = None
    ):
        """``jacobians.compute_jacobians(model, inputs, method)`` (name ``jacobians``, args
        ``(method,)``), ``full_batch_jacobian`` (name ``full``) or
        ``histograms.parameter_gradient_histograms`` (name ``histograms``, args ``(loss,
        target, bins)``) computed in the program's process; ``in_shape`` reshapes the (B, n)
        inputs to (B, *in_shape) for the program."""
        x = _array(inputs.to(self.dtype_carrier.dtype))
        if name == "full":
            return torch.from_numpy(self.process.request("full", x, in_shape))
        if name == "histograms":
            return self.process.request("histograms", x, *args, in_shape)
        from gradviz.core.nets.jacobians import JacobianResult

        jac, out, method, reason = self.process.request("jacobians", x, *args, in_shape)
        return JacobianResult(torch.from_numpy(jac), torch.from_numpy(out), method, reason)


class _ThroughProcess(torch.autograd.Function):
    """y = program(x) in its process; the backward pass is the process's vector-Jacobian
    product at x (the forward pass is run again there)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, process: ProgramProcess) -> torch.Tensor:
        ctx.process = process
        ctx.save_for_backward(x)
        return torch.from_numpy(process.request("forward", _array(x))).to(x.device)

    @staticmethod
    def backward(ctx, grad_y: torch.Tensor):
        (x,) = ctx.saved_tensors
        grad = ctx.process.request("vjp", _array(x), _array(grad_y.to(x.dtype)))
        return torch.from_numpy(grad).to(x.device), None


def _array(tensor: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(tensor.detach().cpu().numpy())
