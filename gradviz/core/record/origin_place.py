"""Where a recording's origin began, in words, as far as its keys say (no torch: the
Recordings page reads it)."""

from __future__ import annotations


def unnamed_place(origin: dict) -> str:
    """Where an origin (a recording's dict) that names no submodule began, as far as it
    says: "" is the model's own code as often as code outside it (the loss), and only a
    replayed operation (``in_model``) or the cause tells which."""
    if origin.get("phase") == "optimizer":
        return "the optimizer's step"
    if origin.get("phase") == "input" and not origin.get("tensor"):
        return "the model's input"
    if origin.get("in_model"):
        return "the model's own code"
    return "no submodule"
