"""One plain sentence for any failure off the GUI thread (a run, a Jacobian, a model load).

gradviz's own errors already are that sentence; memory and file errors get advice; anything
else names its type and first line, so a bug report can start from the dialog.
"""

from __future__ import annotations

from gradviz.core.common.errors import GradvizError


def describe_failure(exc: BaseException, what_failed: str, on_memory: str, then: str = "") -> str:
    """``what_failed`` starts the generic sentence ("The run stopped because of an
    unexpected error"); ``on_memory`` is the whole sentence for running out of memory;
    ``then`` follows the generic sentence (what is still there, what to try)."""
    if isinstance(exc, GradvizError):
        return str(exc)
    text = str(exc).strip()
    if isinstance(exc, MemoryError) or "out of memory" in text.lower():
        return on_memory
    if isinstance(exc, OSError):
        return f"A file could not be read or written: {exc}."
    first = text.splitlines()[0] if text else ""
    detail = f": {first}" if first else ""
    sentence = f"{what_failed} ({type(exc).__name__}{detail})."
    return f"{sentence} {then}" if then else sentence
