"""`gradviz fit`: run the distance-matrix fit headless and report how it went.

A run that ends in NaN is a result (exit 0); bad settings or files are errors (exit 2).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TextIO

import numpy as np

from gradviz.commands.output import print_json
from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.config import FitConfig
from gradviz.core.settings.table import from_arguments


def run(args) -> int:
    config = from_arguments(FitConfig, args)
    out = _checked_out_path(args.out)

    from gradviz.core.lab.fit import DistanceFitRun  # torch loads here, after the cheap checks
    from gradviz.core.record.stats import MAX_IMAGE_SIDE

    recorded = getattr(args, "record", None) is not None
    # A recorded run's snapshots are reduced on its device to the recording's image size.
    fit = DistanceFitRun(config, max_display=MAX_IMAGE_SIDE if recorded else None)
    progress = _Progress(sys.stderr, config.steps) if sys.stderr.isatty() else None
    if recorded:
        _run_recorded(fit, args.record, progress)
    else:
        fit.run(callback=progress.update if progress else None)
    if progress:
        progress.finish(fit)

    coords, distances, final_loss = fit.evaluate()
    summary = {
        "method": config.method,
        "steps": fit.completed_steps,
        "initial_loss": fit.initial_loss,
        "final_loss": final_loss,
        "first_nonfinite_loss_step": fit.first_nonfinite_loss_step,
        "first_nonfinite_grad_step": fit.first_nonfinite_grad_step,
        "steps_per_second": fit.steps_per_second,
        "device": str(fit.device),
        "reference_loss": fit.reference_loss,
        "threads": fit.thread_choice.to_dict(),
    }
    if out is not None:
        _save_run(out, fit, coords, distances)
    if args.json:
        print_json(summary)
    else:
        print(_describe(summary, fit.stopped_on_nan, out, fit.thread_choice.text()))
    return 0


def _run_recorded(fit, path: str, progress) -> None:
    """Step ``fit`` to the end through a FitRecording at ``path`` (``--record``)."""
    from gradviz.core.record.fit_recording import FitRecording

    recording = FitRecording(fit, path)
    while not fit.done:
        recording.step(fit)
        if progress is not None:
            progress.update(fit)
    recording.close()


def _checked_out_path(out: str | None) -> Path | None:
    """Fail before a long run, not after it, when --out cannot be written."""
    if out is None:
        return None
    path = Path(out)
    if path.suffix.lower() != ".npz":
        raise GradvizError(f"--out {out!r} must end in .npz (it is a numpy archive).")
    if path.is_dir():
        raise GradvizError(f"--out {out!r} is a directory; give a file name ending in .npz.")
    if not path.parent.is_dir():
        raise GradvizError(
            f"The folder of --out {out!r} does not exist; create {str(path.parent)!r} first."
        )
    return path


def _save_run(path: Path, fit, coords: np.ndarray, distances: np.ndarray) -> None:
    try:
        np.savez(
            path,
            loss=fit.loss_history,
            coords=coords,
            target_coords=fit.target_points,
            distances=distances,
            target_distances=fit.target_distances.cpu().numpy(),
        )
    except OSError as exc:
        raise GradvizError(f"Cannot write {path} ({exc.strerror or exc}).") from None


def _describe(summary: dict, stopped_on_nan: bool, out: Path | None, threads: str) -> str:
    def step_or_never(value: int | None) -> str:
        return "never" if value is None else f"step {value}"

    lines = [
        f"method {summary['method']} on {summary['device']}: {summary['steps']} steps, "
        f"{summary['steps_per_second']:.1f} steps/s (first step not counted)",
        f"torch CPU threads: {threads}",
        f"loss: initial {summary['initial_loss']:.6g}, final {summary['final_loss']:.6g}, "
        f"best reachable (classical MDS) {summary['reference_loss']:.3g}",
        f"first non-finite gradient: {step_or_never(summary['first_nonfinite_grad_step'])}; "
        f"first non-finite loss: {step_or_never(summary['first_nonfinite_loss_step'])}",
    ]
    if stopped_on_nan:
        lines.append("stopped on NaN: the coordinates are the last finite ones")
    if out is not None:
        lines.append(f"saved {out}")
    return "\n".join(lines)


class _Progress:
    """A one-line progress bar on a terminal, redrawn at most 10 times a second."""

    WIDTH = 30

    def __init__(self, stream: TextIO, total: int) -> None:
        self.stream = stream
        self.total = max(total, 1)
        self.last_draw = 0.0

    def update(self, fit) -> None:
        now = time.monotonic()
        if now - self.last_draw >= 0.1:  # finish() draws the last state
            self.last_draw = now
            self._draw(fit)

    def finish(self, fit) -> None:
        self._draw(fit)
        self.stream.write("\n")
        self.stream.flush()

    def _draw(self, fit) -> None:
        done = fit.completed_steps
        filled = round(self.WIDTH * done / self.total)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        history = fit.loss_history
        loss = f"{history[-1]:.4g}" if len(history) else "-"
        self.stream.write(f"\r[{bar}] {done}/{self.total}  loss {loss}")
        self.stream.flush()
