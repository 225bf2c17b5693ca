"""Mixed precision: following a ``torch.amp.GradScaler`` so that its skipped steps are not
mistaken for failures and its scaled gradients are recorded unscaled.

A GradScaler multiplies the loss by its scale S before ``backward()``; ``scaler.step``
divides the gradients by S (``unscale_``) and skips ``optimizer.step()`` when any is NaN or
Inf, and ``scaler.update()`` then lowers the scale (S -> S * backoff, S/2 by default). That
is the scaler doing its job, not a failure. The scaler has no hooks, so ``ScalerWatch``
wraps the instance's ``scale``, ``unscale_`` and ``update`` (the class is untouched; the
wrappers call the originals and are removed by ``release``) to know where in the iteration
``rec.log`` is called:

- after ``scaler.update()``: the gradients were unscaled by ``scaler.step``; a skipped step
  shows as the scale dropping in that ``update``;
- between ``backward()`` and ``scaler.step``: the gradients are still scaled (divide by S),
  unless ``scaler.unscale_`` already ran (for gradient clipping); the scaler will skip the
  step exactly when a gradient is non-finite, and then lower the scale by its backoff.

Reading the scale is a host copy on an accelerator (``get_scale``), once per call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch

#: Frames searched above an optimizer's step for the GradScaler that called it.
_SEARCH_FRAMES = 8


@dataclass(frozen=True)
class Skip:
    """A step GradScaler skipped: its scale before and after the update that followed."""

    scale: float
    new_scale: float

    def describe(self) -> str:
        return f"skipped by GradScaler (scale {self.scale:g} -> {self.new_scale:g})"


class ScalerWatch:
    """Follows one GradScaler's calls (see the module docstring).

    ``on_update(before, after)``, if given, hears every ``update`` with the scale before and
    after it (the recorder uses it where the optimizer's step records the steps, since a
    skipped step never reaches ``optimizer.step``).
    """

    def __init__(
        self,
        scaler: torch.amp.GradScaler,
        on_update: Callable[[float, float], None] | None = None,
    ) -> None:
        self.scaler = scaler
        self._on_update = on_update
        self._phase = "updated"  # "scaled", "unscaled" or "updated": the last call seen
        self._last_update: tuple[float, float] | None = None
        self._wrapped: list[str] = []
        self._wrap("scale", self._after_scale)
        self._wrap("unscale_", self._after_unscale)
        self._wrap("update", None)

    @property
    def enabled(self) -> bool:
        return bool(self.scaler.is_enabled())

    def gradient_scale(self) -> float:
        """What the gradients are multiplied by now: S between ``backward`` and
        ``scaler.step`` (before any ``unscale_``), else 1."""
        if self.enabled and self._phase == "scaled":
            return float(self.scaler.get_scale())
        return 1.0

    def skip_of_logged_step(self, gradients_nonfinite) -> Skip | None:
        """Whether the scaler skips (or skipped) the step being logged now.
        ``gradients_nonfinite()`` (a host read) is called only where the answer needs it:
        an enabled scaler whose ``step`` is still to come."""
        if not self.enabled:
            return None
        if self._phase == "updated":  # after scaler.update(): its scale says what happened
            last, self._last_update = self._last_update, None
            if last is not None and last[1] < last[0]:
                return Skip(*last)
            return None
        # Before scaler.step: it skips exactly when a gradient is non-finite.
        self._last_update = None
        if not gradients_nonfinite():
            return None
        scale = float(self.scaler.get_scale())
        return Skip(scale, scale * float(self.scaler.get_backoff_factor()))

    def release(self) -> None:
        """Remove the wrappers: the scaler's own methods answer again."""
        for name in self._wrapped:
            self.scaler.__dict__.pop(name, None)
        self._wrapped.clear()

    # ---- the wrappers ------------------------------------------------------------------------
    def _after_scale(self) -> None:
        self._phase = "scaled"

    def _after_unscale(self) -> None:
        self._phase = "unscaled"

    def _wrap(self, name: str, after: Callable[[], None] | None) -> None:
        original = getattr(self.scaler, name)  # bound: calls the class's method

        if name == "update":

            def wrapper(*args, **kwargs):
                before = float(self.scaler.get_scale()) if self.enabled else 1.0
                result = original(*args, **kwargs)
                now = float(self.scaler.get_scale()) if self.enabled else 1.0
                self._phase = "updated"
                self._last_update = (before, now)
                if self._on_update is not None:
                    self._on_update(before, now)
                return result

        else:

            def wrapper(*args, **kwargs):
                result = original(*args, **kwargs)
                after()
                return result

        wrapper.__wrapped__ = original
        setattr(self.scaler, name, wrapper)
        self._wrapped.append(name)


def find_calling_scaler() -> torch.amp.GradScaler | None:
    """The GradScaler whose ``step`` is calling the optimizer step in progress, if any
    (searched in the few frames above the caller)."""
    frame = inspect.currentframe()
    try:
        for _ in range(_SEARCH_FRAMES):
            frame = frame.f_back if frame is not None else None
            if frame is None:
                return None
            candidate = frame.f_locals.get("self")
            if isinstance(candidate, torch.amp.GradScaler):
                return candidate
        return None
    finally:
        del frame
