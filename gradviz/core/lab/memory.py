"""How much memory a distance-fit run needs, how much there is, and what to say when it
does not fit (before the run, or when an allocation fails during it).

What a run allocates, in (N, N) matrices of the run's dtype (4 bytes an entry in float32,
8 in float64), measured at the peak of one step on the CPU in float32, bool masks included
(``tests/core/test_memory.py`` checks the estimate against the measured peak):

========  =====  ==========================================================================
method    step   what is alive at the peak of a step
========  =====  ==========================================================================
safe      5      target, distances, dL/dd, W = dL/dd / d, mse's difference, coincident mask
cdist     5      target, distances, dL/dd, cdist's backward intermediates
naive     8      target, Gram, squared, distances, dL/dd, dL/dsq, mse's difference, a temporary
detach    9      naive's + the distances with the diagonal detached and the diagonal mask
clamp     9      naive's + the clamped squared distances and the clamp mask
masked    12     naive's + gathered off-diagonal copies (values, gradients) and the mask
========  =====  ==========================================================================

A run that takes Snapshots (the app) also holds, between steps, what the latest Snapshot
came from (freed when the next step starts): the target, distances, squared distances
(Gram methods), their gradient and a uint8 Health matrix (CAPTURE_MATRICES); and on the
host two Snapshots (one shown while the next is built), each four float32 matrices and a
uint8 one of ``side x side`` entries, ``side = min(N, max_display)``. Its peak is the
larger of a step and what it holds between steps, plus the Snapshots (alive through both)
and the capture's workspace: classifying each entry's gradient builds byte-per-entry masks,
and the C allocator keeps the freed pages of those small enough for its heap (measured at
N = 3000: 1 to 2 float32 matrices above the rest; CAPTURE_WORKSPACE_BYTES_PER_ENTRY, for
masks up to HEAP_MASK_BYTES, as larger ones are mapped on their own and returned). Per point
come the coordinates, their gradient and Adam's two moments (N x D each), and with a network
its features, the activations kept for backward and the Jacobians (N x (widths + D x F)).

The estimate leaves out the fixed cost of the Python process and the torch runtime (a few
hundred MB that a running process has already paid). Available memory is the smallest of
MemAvailable (or the free pages), the cgroup's limit less its usage, and the address-space
limit (``ulimit -v``) less what the process has mapped; on CUDA it is what
``torch.cuda.mem_get_info`` reports free plus what torch's cache holds unused. The
environment variable GRADVIZ_MEMORY_LIMIT (bytes, or with a K, M or G suffix) replaces it,
so tests and users can set a budget.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import resource
from dataclasses import dataclass

import torch

from gradviz.core.common.errors import GradvizError
from gradviz.core.nets.networks import NetworkSpec
from gradviz.core.settings.config import FitConfig
from gradviz.core.settings.distance_methods import DISTANCE_METHOD_TABLE

#: (N, N) matrices in the run's dtype alive at the peak of one step, by method (each
#: method's ``step_matrices`` in the one table of methods).
STEP_MATRICES: dict[str, float] = {m.name: m.step_matrices for m in DISTANCE_METHOD_TABLE}

#: Matrices in the run's dtype held between steps for the latest Snapshot, by method (each
#: method's ``capture_matrices``: the target, distances, their gradient, and squared
#: distances for the Gram methods; plus one byte an entry for the Health codes).
CAPTURE_MATRICES: dict[str, float] = {m.name: m.capture_matrices for m in DISTANCE_METHOD_TABLE}

#: Host bytes per display entry: two Snapshots of four float32 matrices and a uint8 one.
SNAPSHOT_BYTES_PER_ENTRY = 2 * (4 * 4 + 1)

#: Bytes per (N, N) entry of a capturing step's Health masks that the allocator keeps, for
#: masks of up to HEAP_MASK_BYTES: glibc maps larger blocks on their own and returns them
#: when freed (its largest mmap threshold is 32 MiB on 64-bit systems).
CAPTURE_WORKSPACE_BYTES_PER_ENTRY = 8
HEAP_MASK_BYTES = 32 * 1024**2

ENV_LIMIT = "GRADVIZ_MEMORY_LIMIT"

_ITEMSIZE = {"float32": 4, "float64": 8}
_GB = 1e9


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak bytes a run is expected to allocate, split by what allocates them."""

    step: int  # one optimizer step (forward, backward, update) at its peak
    held: int  # held between steps for the latest Snapshot (0 headless)
    snapshots: int  # host copies of two Snapshots (0 headless)
    workspace: int  # heap kept from the capture's Health masks (0 headless)
    per_point: int  # coordinates, optimizer state, network activations, Jacobians

    @property
    def total(self) -> int:
        return max(self.step, self.held) + self.snapshots + self.workspace + self.per_point


def estimate(
    config: FitConfig, n: int | None = None, snapshot_side: int | None = None
) -> MemoryEstimate:
    """The peak memory of ``config``'s run with ``n`` points (default ``config.n``).

    ``snapshot_side`` is the side of the matrices its Snapshots carry (``min(N,
    max_display)``), or None for a headless run that takes none (``gradviz fit``).
    """
    n = config.n if n is None else n
    item = _ITEMSIZE[config.dtype]
    entries = n * n
    step = int(STEP_MATRICES[config.method] * entries * item)
    held = snapshots = workspace = 0
    if snapshot_side is not None:
        held = int(CAPTURE_MATRICES[config.method] * entries * item + entries)
        snapshots = SNAPSHOT_BYTES_PER_ENTRY * snapshot_side * snapshot_side
        workspace = CAPTURE_WORKSPACE_BYTES_PER_ENTRY * min(entries, HEAP_MASK_BYTES)
    return MemoryEstimate(step, held, snapshots, workspace, _per_point(config, n, item))


def _per_point(config: FitConfig, n: int, item: int) -> int:
    """Bytes that grow with N alone: coordinates (+ grad, Adam moments, a capture copy), and
    with a network its features, saved activations (x 3: output, pre-activation, grad) and
    the (N, D, F) Jacobians."""
    per_point = 5 * config.dim
    if config.net:
        spec = NetworkSpec.parse(config.net)
        widths = sum(lin.out_features for lin in spec.linears)
        per_point += spec.in_dim + 3 * widths + 2 * spec.out_dim * spec.in_dim
    return n * per_point * item


# ---- available memory ---------------------------------------------------------------------


def available_bytes(device: torch.device) -> int:
    """Bytes a new run can still allocate on ``device`` (see the module docstring)."""
    limit = os.environ.get(ENV_LIMIT)
    if limit:
        return parse_bytes(limit)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(free + cached)
    candidates = [_host_available(), _cgroup_available(), _address_space_available()]
    return min(c for c in candidates if c is not None)


def parse_bytes(text: str) -> int:
    """``"2G"``, ``"512M"``, ``"1.5e9"`` -> bytes (K, M, G are powers of 1024)."""
    match = re.fullmatch(r"\s*([0-9.eE+]+)\s*([kKmMgG]?)i?[bB]?\s*", text)
    if match is None:
        raise GradvizError(f"{ENV_LIMIT}={text!r} is not a size; write bytes or e.g. 512M or 8G.")
    scale = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[match.group(2).lower()]
    return int(float(match.group(1)) * scale)


def _host_available() -> int:
    """MemAvailable from /proc/meminfo, else free pages (os.sysconf)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 1 << 62  # unknown: do not refuse


def _cgroup_available() -> int | None:
    """A cgroup v2 memory limit less the group's usage, when the process runs under one."""
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        if limit == "max":
            return None
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return max(0, int(limit) - used)


def _address_space_available() -> int | None:
    """The address-space limit (``ulimit -v``) less what the process has mapped."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/status") as f:
            mapped = next(int(x.split()[1]) * 1024 for x in f if x.startswith("VmSize:"))
    except (OSError, StopIteration):
        return None
    return max(0, soft - mapped)


def return_freed_memory() -> None:
    """Hand memory the process has freed back to the system (glibc's ``malloc_trim``).

    Freed matrices above 32 MB go back at once; smaller ones (masks, Health codes, display
    copies) stay in the allocator's heap, so after a big run is released RSS would not
    fall. Call it after dropping a run (a reset, a failure). A no-op without glibc.
    """
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


# ---- refusing and failing in words ----------------------------------------------------------


class NotEnoughMemoryError(GradvizError):
    """A run that would not fit, refused before it starts (``needed`` and ``available`` in
    bytes)."""

    def __init__(self, message: str, needed: int, available: int) -> None:
        super().__init__(message)
        self.needed = needed
        self.available = available


class RunOutOfMemoryError(GradvizError):
    """An allocation failed during a run. The run's parameters, step count and losses stay
    those of ``last_good_step`` (completed steps); Snapshots taken before are untouched."""

    def __init__(
        self, message: str, requested: int | None, estimate: int, available: int, step: int
    ) -> None:
        super().__init__(message)
        self.requested = requested
        self.estimate = estimate
        self.available = available
        self.last_good_step = step


def check_fits(
    config: FitConfig,
    device: torch.device,
    n: int | None = None,
    snapshot_side: int | None = None,
) -> MemoryEstimate:
    """The run's estimate, or NotEnoughMemoryError when it exceeds what ``device`` has free."""
    needed = estimate(config, n, snapshot_side)
    available = available_bytes(device)
    if needed.total > available:
        n = config.n if n is None else n
        raise NotEnoughMemoryError(
            f"A run of {n:,} points with the {config.method} method in {config.dtype} needs "
            f"about {format_bytes(needed.total)} but only {format_bytes(available)} is "
            f"available on {_where(device)}; {advice(config, device)}.",
            needed.total,
            available,
        )
    return needed


def advice(config: FitConfig, device: torch.device) -> str:
    """What to change, most effective first: "use fewer points, float32 or a GPU"."""
    options = ["fewer points"]
    if config.dtype == "float64":
        options.append("float32")
    if STEP_MATRICES[config.method] > STEP_MATRICES["safe"]:
        options.append("the safe method")
    if device.type == "cpu" and torch.cuda.is_available():
        options.append("a GPU")
    elif device.type != "cpu":
        options.append("the CPU")
    if len(options) == 1:
        return "use " + options[0]
    return "use " + ", ".join(options[:-1]) + " or " + options[-1]


_REQUEST_PATTERNS = (
    (re.compile(r"tried to allocate (\d+) bytes", re.I), 1),  # CPU DefaultCPUAllocator
    (re.compile(r"tried to allocate ([0-9.]+) (GiB|MiB|KiB|B)", re.I), None),  # CUDA
)


def requested_bytes(message: str) -> int | None:
    """The size of the allocation that failed, when torch's message says it."""
    for pattern, scale in _REQUEST_PATTERNS:
        match = pattern.search(message)
        if match is None:
            continue
        if scale is not None:
            return int(match.group(1)) * scale
        unit = {"gib": 1024**3, "mib": 1024**2, "kib": 1024, "b": 1}[match.group(2).lower()]
        return int(float(match.group(1)) * unit)
    return None


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation failure (CPU, CUDA or MPS) rather than a bug."""
    if isinstance(exc, MemoryError):
        return True
    oom_type = getattr(torch, "OutOfMemoryError", None)
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    if not isinstance(exc, RuntimeError):
        return False
    text = str(exc).lower()
    return "can't allocate memory" in text or "out of memory" in text


def out_of_memory(
    exc: BaseException, config: FitConfig, device: torch.device, n: int, step: int,
    snapshot_side: int | None = None,
) -> RunOutOfMemoryError:  # fmt: skip
    """The RunOutOfMemoryError that reports ``exc`` (an allocation failure in ``step``)."""
    requested = requested_bytes(str(exc))
    needed = estimate(config, n, snapshot_side).total
    try:
        available = available_bytes(device)
    except GradvizError:
        available = 0
    asked = f"an allocation of {format_bytes(requested)} failed" if requested else "it failed"
    return RunOutOfMemoryError(
        f"The run ran out of memory after step {step} ({asked}; the run needs about "
        f"{format_bytes(needed)} and {format_bytes(available)} is available on "
        f"{_where(device)}); the state of step {step} is kept; {advice(config, device)}.",
        requested,
        needed,
        available,
        step,
    )


def format_bytes(count: float) -> str:
    """``1.6 GB``, ``350 MB``, ``12 kB`` (decimal units, as system monitors show them)."""
    if count >= _GB:
        return f"{count / _GB:.1f} GB"
    if count >= 1e6:
        return f"{count / 1e6:.0f} MB"
    return f"{max(count, 0) / 1e3:.0f} kB"


def _where(device: torch.device) -> str:
    return "this computer" if device.type in ("cpu", "mps") else str(device)


def largest_n(config: FitConfig, available: int, snapshot_side: int | None = None) -> int:
    """The most points whose run fits in ``available`` bytes (bisection on ``estimate``)."""
    lo, hi = 1, 2
    while estimate(config, hi, snapshot_side).total <= available and hi < 1 << 24:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if estimate(config, mid, snapshot_side).total <= available:
            lo = mid
        else:
            hi = mid
    return lo
