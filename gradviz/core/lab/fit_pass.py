"""What a distance fit moves and one forward/backward pass of it.

``FitPass`` holds the parameters the optimizer moves (free (N, D) coordinates, or a
network's weights and its fixed (N, F) input features), runs the forward, the MSE loss
against the target distances and the backward, reads the step's loss and gradient norms
in one host read, and keeps what a Snapshot shows out of the live graph (a ``Capture``).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from gradviz.core.common import diagnostics
from gradviz.core.common.errors import GradvizError
from gradviz.core.lab.capture import Capture, parameter_values
from gradviz.core.lab.distances import DistanceResult, pairwise_distances
from gradviz.core.nets.jacobians import compute_jacobians
from gradviz.core.nets.networks import NetworkSpec

# The network's input features: a random stream of the user's seed of their own (the
# target uses the seed itself, the initial points stream 1: fit_points).
_FEATURE_STREAM = 2


class FitPass:
    """The parameters of a distance fit and one forward/backward pass of them.

    ``spec`` (a network) makes the coordinates the network's (N, D) output of fixed
    gaussian (N, F) features, its weights drawn from ``seed``; without one the parameters
    are the free (N, D) coordinates ``init_points``. ``target_distances`` is the (N, N)
    matrix the loss compares with, on ``device``, in the dtype of every tensor here.
    Raises GradvizError when the network's output width is not D.
    """

    def __init__(
        self,
        spec: NetworkSpec | None,
        init_points: np.ndarray | None,
        target_distances: torch.Tensor,
        method: str,
        seed: int,
        dim: int,
        device: torch.device,
    ) -> None:
        self.method = method
        self.target_distances = target_distances
        self.dtype, self.device = target_distances.dtype, device
        self.model: torch.nn.Module | None = None
        self.features: torch.Tensor | None = None
        self.coords_param: torch.nn.Parameter | None = None
        if spec is not None:
            self._build_network(spec, seed, target_distances.shape[0], dim)
            named = list(self.model.named_parameters())
        else:
            start = torch.as_tensor(init_points, dtype=self.dtype)
            self.coords_param = torch.nn.Parameter(start.to(self.device))
            named = [("coords", self.coords_param)]
        self.named_params = named
        self.params = [p for _, p in named]
        self.grad_norm_names = tuple(name for name, _ in named)

    def _build_network(self, spec: NetworkSpec, seed: int, n_points: int, dim: int) -> None:
        if spec.out_dim != dim:
            raise GradvizError(
                f"The network's output width is {spec.out_dim} but the points have D = "
                f"{dim}; end the network spec with -{dim}."
            )
        self.model = spec.build(seed=seed, dtype=self.dtype).to(self.device)
        rng = np.random.default_rng([seed, _FEATURE_STREAM])
        features = rng.standard_normal((n_points, spec.in_dim))
        self.features = torch.as_tensor(features, dtype=self.dtype, device=self.device)

    def coords(self) -> torch.Tensor:
        """(N, D) coordinates of the current parameters (a graph output for a network)."""
        if self.model is not None:
            return self.model(self.features)
        return self.coords_param

    def clear_grads(self) -> None:
        """As ``optimizer.zero_grad()`` (set to None), without making the optimizer."""
        for param in self.params:
            param.grad = None

    @torch.no_grad()
    def evaluate(self) -> tuple[np.ndarray, np.ndarray, float]:
        """Coordinates (N, D), distances (N, N) and loss of the current parameters, in the
        run's dtype (numpy copies)."""
        coords = self.coords()
        distances = pairwise_distances(coords, self.method).distances
        loss = F.mse_loss(distances, self.target_distances)
        return to_numpy(coords), to_numpy(distances), float(loss)

    def forward_backward(
        self, capture: bool
    ) -> tuple[torch.Tensor, torch.Tensor, DistanceResult, list[torch.Tensor]]:
        """Forward, loss and backward; with ``capture`` also the entry gradient (dLoss/d
        squared where the method has a pre-sqrt node, else dLoss/d distances) in the list.

        The entry gradient is kept by a hook that holds the tensor autograd passes on
        (``retain_grad`` would clone it: one more (N, N) matrix at the step's peak).
        """
        coords = self.coords()
        if capture and not coords.is_leaf:
            coords.retain_grad()
        result = pairwise_distances(coords, self.method)
        entry_grad: list[torch.Tensor] = []
        if capture:
            node = next(
                (
                    t
                    for t in (result.squared, result.distances)
                    if t is not None and t.requires_grad
                ),
                None,
            )
            if node is not None:
                node.register_hook(entry_grad.append)
        loss = F.mse_loss(result.distances, self.target_distances)
        loss.backward()
        return loss, coords, result, entry_grad

    def read_step(self, loss: torch.Tensor) -> tuple[float, bool, np.ndarray]:
        """The loss value, whether every gradient is finite and the (T,) float64 norm of
        each parameter's gradient: the one host read of a step."""
        grads = [p.grad for p in self.params]
        norms = diagnostics.grad_norms(grads, self.device)  # one multi-tensor kernel
        if self.device.type == "cpu":
            # Host memory: plain reads cost nothing, where stacking them into one
            # transfer adds a few small torch ops (about 3% of a step at N = 10). A finite
            # norm means finite entries (a NaN or Inf entry makes the norm NaN or Inf); only
            # a non-finite norm (which also comes of a finite gradient whose norm overflows)
            # needs the entries looked at.
            values = np.array(norms.tolist(), dtype=np.float64)
            ok = bool(np.isfinite(values).all()) or bool(diagnostics.all_finite(grads, self.device))
            return loss.item(), ok, values
        ok = diagnostics.all_finite(grads, self.device)
        # On an accelerator all values come back in one transfer (one sync), in the loss's
        # dtype (MPS has no float64; a float32 norm is exact in it).
        head = torch.stack([loss.detach(), ok.to(loss.dtype)])
        values = torch.cat([head, norms.to(loss.dtype)]).cpu().numpy().astype(np.float64)
        return float(values[0]), bool(values[1] == 1.0), values[2:]

    def gather(
        self,
        attempt: int,
        step: int,
        loss_value: float,
        coords: torch.Tensor,
        result: DistanceResult,
        entry_grad: list[torch.Tensor],
    ) -> Capture:
        """Keep what a Snapshot shows out of the live graph (before the optimizer moves it):
        ``attempt`` is the index of this forward/backward, ``step`` the Snapshot's step."""
        squared = result.squared
        # The graph's own gradient (nothing changes it after the backward pass), or zeros
        # where no gradient reached the distances.
        entry_grads = entry_grad[0].detach() if entry_grad else torch.zeros_like(result.distances)
        coord_grads = coords.grad
        if coord_grads is None:
            coord_grads = torch.zeros_like(coords)
        coord_grads = coord_grads.detach().clone()
        return Capture(
            attempt=attempt,
            step=step,
            loss=loss_value,
            coords=coords.detach().clone(),  # free coordinates: the optimizer moves these
            distances=result.distances.detach(),
            squared=None if squared is None else squared.detach(),
            entry_grads=entry_grads,
            entry_health=diagnostics.entry_health(entry_grads, result.blocked),
            coord_grads=coord_grads,
            coord_health=diagnostics.coord_health(coord_grads),
            param_health=diagnostics.parameter_health(self.named_params),
            jacobians=self.jacobians(),
            param_norms=self.param_norms(),
            param_values=parameter_values(self.model),
        )

    def param_norms(self) -> tuple[tuple[str, float], ...]:
        """(name, gradient norm) of each parameter now, as the run's ``grad_norm_history``
        keeps them."""
        norms = diagnostics.grad_norms([p.grad for p in self.params], self.device)
        values = norms.to("cpu", torch.float64).tolist()
        return tuple(zip(self.grad_norm_names, values, strict=True))

    def jacobians(self) -> torch.Tensor | None:
        if self.model is None:
            return None
        # Points do not interact in these networks, so "auto" takes one backward pass per
        # output coordinate (no torch.func start-up); it leaves the parameters' .grad alone.
        return compute_jacobians(self.model, self.features, method="auto").jacobians.detach()


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A numpy copy on the host (``Tensor.numpy()`` alone would share the tensor's memory)."""
    return t.detach().to(device="cpu", copy=True).numpy()
