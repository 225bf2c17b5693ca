"""The tensors a Recorder watches, how their gradients are read, and what a recorded step
takes of them.

A leaf's gradient is its ``.grad``; a non-leaf's (an intermediate given to ``rec.tensor``,
or a dict target's tensor) is caught by a hook as backward passes it. Nothing here writes a
gradient: the hooks return None, which leaves the gradient as it was.
"""

from __future__ import annotations

import torch
from torch import nn

from gradviz.core.common.errors import GradvizError
from gradviz.core.record import stats
from gradviz.core.record.gradients import ParameterCopies

#: Rows and columns of the per-input Jacobians kept as an image at a recorded step.
PROBE_IMAGE_SIDE = 512


class WatchedTensors:
    """Name -> tensor (``named``: a module's parameters that need a gradient, or a dict
    target's tensors, then what ``add`` gives), the module where the target is one, and the
    names also recorded as per-entry health images (``images``). The list is fixed at the
    first recorded step (``frozen``)."""

    def __init__(self, target: nn.Module | dict, probe: torch.Tensor | None = None) -> None:
        self.module = target if isinstance(target, nn.Module) else None
        self.named = _named_tensors(target)
        if probe is not None and self.module is None:
            raise GradvizError("probe= needs an nn.Module target (its Jacobians are recorded).")
        self.probe = probe
        # The common case read without a call per tensor at every step: parameters only (no
        # intermediates, no shards), whose gradients' layout (dtype, device, sizes) is theirs.
        self._leaves, self._layout = _plain_leaves(self.named, self.module)
        self._captured: dict[str, torch.Tensor] = {}
        self._hooks = [
            t.register_hook(self._capture_hook(name))
            for name, t in self.named.items()
            if not t.is_leaf and t.requires_grad
        ]
        self.images: set[str] = set()
        self.frozen = False
        self._copies = ParameterCopies()

    @property
    def device(self) -> torch.device:
        """Where the first watched tensor lives (the CPU without any)."""
        first = next(iter(self.named.values()), None)
        return first.device if first is not None else torch.device("cpu")

    def add(self, name: str, t: torch.Tensor) -> None:
        """Also watch ``t`` (an intermediate), recorded with its health image; ignored for
        a new name once the list is fixed."""
        if name not in self.named and self.frozen:
            return
        self.named[name] = t
        self.images.add(name)
        if t.requires_grad:
            t.register_hook(self._capture_hook(name))

    def gradients(self) -> tuple[list[str], list, tuple | None]:
        """(names, their gradients now (None where none), the gradients' fused layout where
        they are the parameters' own, else None)."""
        names = list(self.named)
        if self._leaves is not None and not self._captured and not self.images:
            return names, [t.grad for t in self._leaves], self._layout
        return names, [self.gradient(name) for name in names], None

    def gradient(self, name: str) -> torch.Tensor | None:
        if name in self._captured:
            return _local(self._captured[name])
        t = self.named[name]
        grad = _local(t.grad) if t.is_leaf else None
        # A sparse embedding's gradient is read as the dense one it stands for (its
        # untouched rows are zeros), which the statistics and the finiteness test expect.
        return grad.to_dense() if grad is not None and grad.is_sparse else grad

    def step_done(self) -> None:
        """Forget the gradients caught in this step."""
        self._captured.clear()

    def taken(
        self, names: list[str], grads: list, device: torch.device, finite, workspace
    ) -> tuple:
        """What a recorded step keeps of the tensors: (rows (T, ROW_WIDTH) statistics,
        images name -> 2-D tensor, the tensors the rows belong to (None for an
        intermediate), the parameters' values before the optimizer's update). ``finite``:
        the tensors known finite this step, or None."""
        params = [self._parameter(name) for name in names]
        rows = stats.gradient_rows(grads, params, device, finite, workspace)
        images = {
            name: stats.health_image(g)
            for name, g in zip(names, grads)
            if name in self.images and g is not None
        }
        if self.probe is not None:
            from gradviz.core.ops import per_input_jacobians

            jac = per_input_jacobians(self.module, self.probe).detach()
            side = PROBE_IMAGE_SIDE
            images["probe_jacobians"] = jac.reshape(len(jac), -1)[:side, :side].float()
        before = self._copies.take(params)
        sources = [self.named[name] if p is not None else None for name, p in zip(names, params)]
        return rows, images, sources, before

    def remove(self) -> None:
        """Remove the hooks set on the target's own tensors."""
        for handle in self._hooks:
            handle.remove()

    def _parameter(self, name: str) -> torch.Tensor | None:
        """The tensor's value where it is a leaf the optimizer updates, else None."""
        t = self.named.get(name)
        return _local(t) if t is not None and t.is_leaf and name not in self.images else None

    def _capture_hook(self, name: str):
        def hook(grad: torch.Tensor) -> None:
            self._captured[name] = grad  # read only; returning None leaves it unchanged

        return hook


def _named_tensors(target) -> dict[str, torch.Tensor]:
    if isinstance(target, nn.Module):
        return {n: p for n, p in target.named_parameters() if p.requires_grad}
    if isinstance(target, dict) and all(isinstance(t, torch.Tensor) for t in target.values()):
        return {str(n): t for n, t in target.items()}
    raise GradvizError(
        "gradviz.watch needs an nn.Module or a dict of name -> tensor, got "
        f"{type(target).__name__}."
    )


def _plain_leaves(
    named: dict[str, torch.Tensor], module: nn.Module | None
) -> tuple[list | None, tuple | None]:
    """(the tensors, their fused layout or None) where every watched tensor is a plain leaf
    (a gradient of a leaf has its dtype, device and size) and none gets a sparse gradient,
    else (None, None)."""
    tensors = list(named.values())
    if not all(t.is_leaf and not hasattr(t, "to_local") for t in tensors):
        return None, None
    sparse = (nn.Embedding, nn.EmbeddingBag)
    if module is not None and any(isinstance(m, sparse) and m.sparse for m in module.modules()):
        return None, None
    return tensors, stats.fused_layout(tensors)


def _local(t: torch.Tensor | None) -> torch.Tensor | None:
    """This rank's shard of a sharded tensor (FSDP's DTensor parameters), else ``t``."""
    to_local = getattr(t, "to_local", None)
    return to_local() if to_local is not None else t
