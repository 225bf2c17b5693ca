"""Wrap a loaded model so that running it either gives one tensor or a GradvizError."""

from __future__ import annotations

import torch

from gradviz.core.common.errors import GradvizError


class CheckedModel(torch.nn.Module):
    """Runs ``inner`` on (..., in_dim) inputs and returns its (..., out_dim) tensor output.

    A wrong input width, an exception inside the model (TorchScript and .pt2 programs raise
    their own errors) or an output that is not a tensor become GradvizError."""

    def __init__(
        self, inner: torch.nn.Module, in_dim: int | None, name: str, ran: str = "code from the file"
    ) -> None:
        super().__init__()
        self.inner = inner
        self.in_dim = in_dim
        self.name = name
        self.ran = ran  # what ran before a failure, for the message

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.in_dim is not None and (x.dim() == 0 or x.shape[-1] != self.in_dim):
            raise GradvizError(
                f"{self.name} takes inputs of width {self.in_dim}, but got inputs of shape "
                f"{tuple(x.shape)}."
            )
        try:
            y = self.inner(x)
        except GradvizError:
            raise
        except Exception as exc:
            raise GradvizError(
                f"{self.name} failed on inputs of shape {tuple(x.shape)} after running "
                f"{self.ran}: {_first_line(exc)}."
            ) from None
        if not isinstance(y, torch.Tensor):
            raise GradvizError(
                f"{self.name} returned a {type(y).__name__}, not a tensor; gradviz needs a "
                "model whose output is one tensor."
            )
        return y


def probe_output_width(model: CheckedModel, in_dim: int, dtype: torch.dtype, batch: int = 2) -> int:
    """Run ``model`` once on a (batch, in_dim) batch of zeros: the output width, or
    GradvizError if it fails or returns something other than a (batch, m) tensor."""
    with torch.no_grad():
        y = model(torch.zeros(batch, in_dim, dtype=dtype))
    if y.dim() != 2 or y.shape[0] != batch:
        raise GradvizError(
            f"{model.name} maps a ({batch}, {in_dim}) batch to shape {tuple(y.shape)}; gradviz "
            "needs a model that maps (B, n) inputs to (B, m) outputs."
        )
    return int(y.shape[1])


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    # TorchScript errors start with a traceback of the scripted code; the cause is last.
    text = lines[-1] if lines else type(exc).__name__
    return text.rstrip(".")[:300]


def probe_output_size(
    model: torch.nn.Module, in_shape: tuple[int, ...], dtype: torch.dtype, batch: int = 2
) -> int:
    """Run ``model`` once on a (batch, *in_shape) batch of zeros: how many numbers it puts
    out per sample (m, its output flattened), or GradvizError if it fails or does not keep
    the batch axis first."""
    with torch.no_grad():
        y = model(torch.zeros(batch, *in_shape, dtype=dtype))
    if not isinstance(y, torch.Tensor) or y.dim() == 0 or y.shape[0] != batch:
        shape = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
        raise GradvizError(
            f"The model maps a {(batch, *in_shape)} batch to {shape}; gradviz needs a model "
            "that maps (B, ...) inputs to (B, ...) outputs."
        )
    return int(y[0].numel())
