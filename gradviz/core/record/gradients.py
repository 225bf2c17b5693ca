"""What a Recorder keeps from step to step besides the step itself: the record of the run's
first non-finite gradient (``FirstNonfinite``) and the parameter copies that measure the
update the optimizer applies after a recorded step (``ParameterCopies``)."""

from __future__ import annotations

import torch

from gradviz.core.common.kept_copies import KeptCopies
from gradviz.core.record import stats

#: A recorded step copies the watched parameters to measure the update the optimizer makes;
#: above this size (a large model) it does not, and the update size is left unknown (NaN).
UPDATE_COPY_LIMIT_BYTES = 1 << 29
#: Up to this size the copies are kept from one recorded step to the next and refilled
#: (no allocation per step); above it each recorded step makes and drops its own.
KEEP_COPIES_LIMIT_BYTES = 1 << 26


class FirstNonfinite:
    """The first non-finite step of the run: (3,) float64 [step, tensor, sum] on the
    tensors' device, [-1, -1, 0] until one is seen.

    Every logged step gets a finiteness check (one fused sum per tensor); on the CPU its
    result is read at once, elsewhere it accumulates on the device (no synchronisation) and
    travels with the next recorded step's host copy."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.record = torch.tensor([-1.0, -1.0, 0.0], dtype=torch.float64, device=device)
        self.finite: list[bool] | None = None  # this step's tensors known finite (CPU)

    def check(
        self,
        grads: list,
        number: int,
        workspace: stats.Workspace | None = None,
        layout: tuple | None = None,
    ) -> bool:
        """Keep the record up to date; on the CPU (where a read costs nothing) return
        whether this step's gradients are non-finite, elsewhere False (the record then
        stays on the device until the next recorded step). A ``workspace`` lets a small
        model's gradients be tested in one pass on the CPU; ``layout`` is theirs where the
        caller knows it (``stats.fused_layout``)."""
        self.finite = None
        if not grads:
            return False
        cpu = self.device.type == "cpu"
        fused = cpu and workspace is not None
        if fused and stats.gradients_known_finite(grads, self.device, workspace, layout):
            self.finite = [True] * len(grads)
            return False
        sums = stats.finiteness_sums(grads, self.device)
        if cpu:
            self.finite = stats.finite_flags(grads, sums.tolist())
            bad = not all(self.finite)
            if bad and self.record[0] < 0:
                t = self.finite.index(False)
                self.record = torch.tensor([float(number), float(t), float(sums[t])])
            return bad
        bad = ~torch.isfinite(sums)
        first = bad.to(torch.uint8).argmax()
        current = torch.stack(
            [
                # A fill on the device, not a host-to-device copy (which may synchronise).
                torch.full((), float(number), dtype=torch.float64, device=self.device),
                first.to(torch.float64),
                sums[first],
            ]
        )
        newly = bad.any() & (self.record[0] < 0)
        self.record = torch.where(newly, current, self.record)
        return False


class ParameterCopies:
    """The parameters' values at a recorded step, for the norm of the update after it."""

    def __init__(self) -> None:
        self._kept = KeptCopies()  # reused from one recorded step to the next

    def take(self, params: list) -> list[torch.Tensor | None]:
        """The parameters' values now, copied (for a small model into buffers kept from the
        previous recorded step, free again once its update norm is taken); None where a
        copy would be too big."""
        size = sum(p.nbytes for p in params if p is not None)
        if size > UPDATE_COPY_LIMIT_BYTES:
            return [None] * len(params)  # too big to copy: the update size stays unknown
        if size > KEEP_COPIES_LIMIT_BYTES:
            return [None if p is None else p.detach().clone() for p in params]
        return self._kept.take(params)
