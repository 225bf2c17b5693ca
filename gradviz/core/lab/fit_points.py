"""The point sets of a distance fit: its target and initial points (generated, drawn or read
from a file, which then sets N and D) and the target's exact distance matrix."""

from __future__ import annotations

import numpy as np
import torch

from gradviz.core.common.errors import GradvizError
from gradviz.core.lab.pointsets import FILE_PREFIX, generate, resolve_points
from gradviz.core.settings.config import FitConfig
from gradviz.core.settings.drawn import is_drawn

# Independent random streams derived from the one user seed, so that e.g. a gaussian target
# and a random init never coincide (the network's input features take stream 2: fit_pass).
_INIT_STREAM = 1  # the target uses the seed itself

_EXACT = "donot_use_mm_for_euclid_dist"  # torch.cdist from differences, not the Gram formula


def point_sets(config: FitConfig, with_net: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Target and initial points (float64), with N and D taken from a file where one is given."""
    if with_net and config.init != "random":
        raise GradvizError(
            "The initial coords (init) do not apply when a network (net) produces the "
            "coordinates; keep init at random, or fit free coordinates."
        )
    target = _load_if_file(config.target)
    init = _load_if_file(config.init)
    n, dim = config.n, config.dim
    for points in (target, init):
        if points is not None:
            n, dim = points.shape
            break
    if target is None:
        target = generate(config.target, n, dim, config.seed)
    if with_net:
        return target, None
    if init is None:
        init_seed = int(np.random.SeedSequence([config.seed, _INIT_STREAM]).generate_state(1)[0])
        name = "gaussian" if config.init == "random" else config.init
        init = generate(name, n, dim, init_seed)
    if init.shape != target.shape:
        raise GradvizError(
            f"The initial points have shape {init.shape} but the target has {target.shape}; "
            "use point sets with the same number of points and dimensions."
        )
    return target, init


def _load_if_file(spec: str) -> np.ndarray | None:
    """The points of a file or a drawn set (which set N and D), else None (a generator)."""
    fixed = spec.startswith(FILE_PREFIX) or is_drawn(spec)
    return resolve_points(spec, 0, 0) if fixed else None


def exact_distance_matrix(
    points: np.ndarray, dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """(N, N) exact distances of float64 points, rounded once to ``dtype``, on ``device``.

    Computed in float64 from coordinate differences (torch.cdist without the Gram-formula
    shortcut), in row blocks so the float64 intermediate stays small.
    """
    compute = device if device.type != "mps" else torch.device("cpu")  # MPS has no float64
    x = torch.as_tensor(points, dtype=torch.float64).to(compute)
    n = x.shape[0]
    out = torch.empty((n, n), dtype=dtype, device=device)
    block = 1024
    for start in range(0, n, block):
        rows = torch.cdist(x[start : start + block], x, compute_mode=_EXACT)
        out[start : start + block] = rows.to(device=device, dtype=dtype)
    return out
