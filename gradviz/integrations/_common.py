"""What the trainers' callbacks share: the missing-package error, the recorder they start
and the numbers they keep as scalars."""

from __future__ import annotations

import os
from typing import Any

import torch

from gradviz.core.record.recorder import Recorder


def missing(module: str, trainer: str, extra: str, pip: str) -> ImportError:
    """The one-sentence error when ``trainer`` is not installed."""
    return ImportError(
        f'gradviz.integrations.{module} needs {trainer}: pip install "gradviz[{extra}]" '
        f"(or pip install {pip})."
    )


def start_recorder(
    model: torch.nn.Module,
    path: str | os.PathLike,
    every: int,
    budget_bytes: int,
    scaler: Any,
    source: str,
    ddp_model: torch.nn.Module | None = None,
) -> Recorder:
    """A Recorder of ``model``, following ``scaler`` where the trainer's is a GradScaler."""
    return Recorder(
        model,
        path,
        every=every,
        budget_bytes=budget_bytes,
        scaler=scaler if isinstance(scaler, torch.amp.GradScaler) else None,
        ddp_model=ddp_model,
        source=source,
    )


def is_number(value: Any) -> bool:
    """A scalar worth recording: an int or float (never a bool) or a one-element tensor."""
    if isinstance(value, torch.Tensor):
        return value.numel() == 1
    return isinstance(value, (int, float)) and not isinstance(value, bool)
