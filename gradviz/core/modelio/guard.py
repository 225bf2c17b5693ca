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


class InBatchRange(torch.nn.Module):
    """Runs ``inner``, a program that takes batches of ``lowest`` to ``highest`` samples (a
    .pt2 exported with a batch range; ``highest`` None: no upper bound), on a batch of any
    size: a batch inside the range as it is, any other in chunks of at most ``highest``, a
    chunk under ``lowest`` filled up with copies of its last sample, whose outputs are
    dropped. Exact for a program that computes each sample on its own (gradviz's
    cross-sample check tells)."""

    def __init__(self, inner: torch.nn.Module, lowest: int, highest: int | None) -> None:
        super().__init__()
        self.inner = inner
        self.lowest = lowest
        self.highest = highest

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 0 or self.lowest <= x.shape[0] <= (self.highest or x.shape[0]):
            return self.inner(x)
        outputs = []
        step = self.highest or x.shape[0]
        for start in range(0, x.shape[0], step):
            chunk = x[start : start + step]
            missing = max(self.lowest - chunk.shape[0], 0)
            if missing:
                chunk = torch.cat([chunk, chunk[-1:].expand(missing, *chunk.shape[1:])])
            outputs.append(self.inner(chunk)[: chunk.shape[0] - missing])
        return torch.cat(outputs)


class InFixedBatches(InBatchRange):
    """Runs ``inner``, a program that takes batches of exactly ``size`` samples (a .pt2
    exported with a fixed batch), on a batch of any size: in chunks of ``size``, the last
    one filled up with copies of its last sample, whose outputs are dropped."""

    def __init__(self, inner: torch.nn.Module, size: int) -> None:
        super().__init__(inner, size, size)


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
