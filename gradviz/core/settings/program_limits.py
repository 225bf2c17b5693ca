"""How long and how much memory a trusted program (TorchScript, ``.pt2``) may take.

A trusted program runs in a process of its own (gradviz.core.modelio.program_process): the
memory limit is that process's data limit (``RLIMIT_DATA``: what it allocates, not the
libraries it maps), the time limit the wall-clock seconds each step (loading it, one
forward pass, one Jacobian computation) may take before gradviz stops the process. The CLI
options ``--time-limit`` and ``--memory-limit`` come from this table.

Imports neither torch nor Qt."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from gradviz.core.settings.table import setting

GIB = 1 << 30


@dataclass(frozen=True)
class ProgramLimits:
    """``time_limit`` in seconds per step, ``memory_limit`` in GiB for the whole process
    (torch itself takes some 0.3 GiB of it). ``cancel`` is an object with ``is_set()``
    (a ``threading.Event``): once set, the step under way is stopped with its process."""

    time_limit: float = setting(
        60.0,
        title="Time limit",
        tooltip="seconds a trusted program may take to load or for one computation before "
        "it is stopped",
        group="Programs",
        limits=(0.1, 86400.0),
        metavar="SECONDS",
    )
    memory_limit: float = setting(
        8.0,
        title="Memory limit",
        tooltip="GiB of memory the process running a trusted program may allocate before it "
        "is stopped",
        group="Programs",
        limits=(0.5, 4096.0),
        metavar="GIB",
    )
    cancel: Any = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_limit * GIB)


def seconds_words(seconds: float) -> str:
    """``60 s``, ``2.5 s``: the limit as the sentences name it."""
    return f"{seconds:g} s"


def gib_words(gib: float) -> str:
    """``8 GiB``, ``1.5 GiB``."""
    return f"{gib:g} GiB"
