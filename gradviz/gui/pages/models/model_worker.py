"""What model work off the GUI thread needs besides ``gui.background``: the file's hash
and the sentence for a failed open.

A ``torch.load`` cannot be interrupted, so a task is never stopped: each carries the
generation it was started for, and results of older generations are dropped.
"""

from __future__ import annotations

import hashlib

from gradviz.core.common.errors import GradvizError
from gradviz.gui.common.failures import describe_failure

HASH_CHUNK_BYTES = 1 << 20


def file_sha256(path: str) -> str:
    """The SHA-256 of the file's bytes, as 64 hex digits (read in 1 MiB chunks)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(HASH_CHUNK_BYTES), b""):
                digest.update(chunk)
    except OSError as exc:
        raise GradvizError(f"Could not read {path!r} to check it: {exc.strerror}.") from exc
    return digest.hexdigest()


def describe_model_failure(exc: BaseException, path: str) -> str:
    """One plain sentence for a failed open: gradviz's own message, else a generic one."""
    return describe_failure(
        exc,
        f"gradviz could not open {path!r}",
        f"Opening {path!r} ran out of memory; the model is too large for this machine.",
        then="The file may be damaged or not a model; the details say more.",
    )
